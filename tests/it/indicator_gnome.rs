//! The privacy indicator in real GNOME Shell 43 (headless, the extension
//! of data/gnome-shell enabled by the session mode): it appears in the
//! top bar while a subscriber reads, its menu names the reader with End,
//! Pause all sharing and Open the dashboard, it goes after the subscriber
//! ends and the recent-read window (1 s here) passed, and while the shell
//! shows it the broker registers no StatusNotifierItem. What the shell
//! shows is read from its actor tree by the extension's test hook (served
//! only when the shell runs with `CONTEXTD_SHELL_TEST`); a screenshot of
//! the shell with the indicator is saved as
//! `target/tmp/indicator-gnome-shell.png`.

use crate::common;
use crate::shells;

use common::*;
use contextd::client::proxy::Context1Proxy;
use shells::gnome::{GnomeShell, data_dir_for};

const HOOK: &str = "/org/contextd/ShellTest/Indicator";
const HOOK_IFACE: &str = "org.contextd.ShellTest.Indicator";

/// Whether the indicator is in the top bar, mapped, and its menu's labels.
async fn shown(conn: &zbus::Connection) -> Option<(bool, Vec<String>)> {
    let reply = conn
        .call_method(
            Some("org.gnome.Shell"),
            HOOK,
            Some(HOOK_IFACE),
            "Shown",
            &(),
        )
        .await
        .ok()?;
    reply.body().deserialize::<(bool, Vec<String>)>().ok()
}

async fn sni_names(conn: &zbus::Connection) -> Vec<String> {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.expect("dbus");
    dbus.list_names()
        .await
        .expect("ListNames")
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with("org.kde.StatusNotifierItem"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_shows_the_indicator_while_a_subscriber_reads() {
    gnome_shell_shows_the_indicator_while_a_subscriber_reads_in(None, "gnome-shell").await;
}

/// The whole test for the GNOME Shell of `root` (a root of
/// scripts/roots.sh) or the host's, with the extension of `data/FORMAT`.
pub(crate) async fn gnome_shell_shows_the_indicator_while_a_subscriber_reads_in(
    root: Option<&str>,
    format: &str,
) {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        // The shell's executable as the kernel shows it to the broker: from
        // a root, the path below the root.
        let shells = match root {
            Some(r) => format!("[sources.shells]\ngnome_shell = \"{r}/usr/bin/gnome-shell\"\n"),
            None => String::new(),
        };
        home.write_config(&format!(
            "{shells}[consent]\nundecided = \"deny\"\n[ui]\nrecent_read_s = 1\n"
        ));
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let shell_home = tempfile::tempdir().expect("tempdir");
        let data = data_dir_for(shell_home.path(), format);
        let _daemon = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let shell = GnomeShell::start_in(
            root,
            &bus.address,
            &data,
            shell_home.path(),
            "contextd-test-on",
        )
        .await;

        // Nobody reads: the hook answers, no indicator.
        let (on, _) = eventually(20, "the extension's test hook", || shown(&conn)).await;
        assert!(!on, "an indicator while nobody reads");

        // A subscriber: the indicator is in the top bar, with its menu.
        let sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let items = eventually(20, "the indicator is shown", || async {
            let (on, items) = shown(&conn).await?;
            on.then_some(items)
        })
        .await;
        let me = my_app_id();
        assert!(
            items
                .iter()
                .any(|l| l.starts_with("End ") && l.contains(&me)),
            "no End entry for the reader: {items:?}"
        );
        assert!(items.iter().any(|l| l == "Pause all sharing"), "{items:?}");
        assert!(
            items.iter().any(|l| l.starts_with("Open the dashboard")),
            "{items:?}"
        );
        // The shell shows it: the broker registers no item of its own
        // (one it may have shown before the shell's Watch went is gone).
        eventually(
            10,
            "no StatusNotifierItem while the shell shows one",
            || async { sni_names(&conn).await.is_empty().then_some(()) },
        )
        .await;

        // A picture of it, for people.
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(dir).expect("target/tmp");
        let png = dir.join(format!("indicator-{format}.png"));
        let _ = std::fs::remove_file(&png);
        // Taken where a shell in a root can write (its home is under
        // /tmp), then kept beside the other test pictures.
        let shot = shell_home.path().join("indicator.png");
        let reply = conn
            .call_method(
                Some("org.gnome.Shell"),
                HOOK,
                Some(HOOK_IFACE),
                "Screenshot",
                &(shot.display().to_string(),),
            )
            .await
            .expect("Screenshot");
        assert!(reply.body().deserialize::<bool>().expect("b"), "screenshot");
        std::fs::copy(&shot, &png).expect("keep the screenshot");
        assert!(
            std::fs::metadata(&png).is_ok_and(|m| m.len() > 0),
            "{}",
            png.display()
        );
        eprintln!("screenshot: {}", png.display());

        // The subscriber ends: once its last read is older than the
        // window, the indicator goes.
        let sub = contextd::client::proxy::Subscription1Proxy::builder(&conn)
            .path(sub)
            .build()
            .await
            .expect("sub");
        sub.unsubscribe().await.expect("unsubscribe");
        eventually(20, "the indicator is gone", || async {
            let (on, _) = shown(&conn).await?;
            (!on).then_some(())
        })
        .await;
        drop(shell);
    })
    .await
}
