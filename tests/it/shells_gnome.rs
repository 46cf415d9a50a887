//! The `gnome-shell` source against real GNOME Shell 43 (headless, with a
//! virtual monitor, in a private session bus that also plays the system
//! bus) running the extension of data/gnome-shell, and real GTK windows:
//! the extension not enabled is said in ListSources with the command that
//! enables it; enabled, two windows are listed with their app ids (titles
//! only with `windows.titles`), focus and title changes reach
//! GetActiveWindow and a subscriber, a client that is not gnome-shell is
//! refused, and the shell exiting takes the windows with it until it is
//! back.

use crate::common;
use crate::shells;

use std::process::Command;
use std::time::Duration;

use common::*;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use shells::gnome::{GnomeShell, UUID, data_dir_for};
use shells::*;

const ONE: &str = "org.example.One";
const TWO: &str = "org.example.Two";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gnome_shell_reports_windows_focus_and_titles_through_the_extension() {
    gnome_shell_reports_windows_focus_and_titles_through_the_extension_in(
        None,
        "43",
        "gnome-shell",
    )
    .await;
}

/// The whole acceptance, for the GNOME Shell of `root` (a root of
/// scripts/roots.sh) or the host's, whose version starts with `version`,
/// with the extension of `data/FORMAT`.
pub(crate) async fn gnome_shell_reports_windows_focus_and_titles_through_the_extension_in(
    root: Option<&str>,
    version: &str,
    format: &str,
) {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[
            (&my_app_id(), &["windows", "windows.titles"]),
            ("exe:/usr/bin/gdbus", &["windows"]),
        ]);
        let shell_home = tempfile::tempdir().expect("tempdir");
        let data = data_dir_for(shell_home.path(), format);
        // The shell's executable as the kernel shows it to the broker: from
        // a root entered with chroot, the path below the root.
        let seen_exe = format!("{}/usr/bin/gnome-shell", root.unwrap_or(""));
        if root.is_some() {
            home.write_config(&format!("[sources.shells]\ngnome_shell = \"{seen_exe}\"\n"));
        }
        let mut daemon = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");

        // No GNOME Shell yet: the source is not listed.
        assert_eq!(source(&ctx, "gnome-shell").await, None);

        // GNOME Shell runs, the extension is installed but not enabled:
        // ListSources says so, with the command; the broker enables nothing.
        let mut shell = GnomeShell::start_in(
            root,
            &bus.address,
            &data,
            shell_home.path(),
            "contextd-test",
        )
        .await;
        let shell_version: String = zbus::Proxy::new(
            &conn,
            "org.gnome.Shell",
            "/org/gnome/Shell",
            "org.gnome.Shell",
        )
        .await
        .expect("org.gnome.Shell proxy")
        .get_property("ShellVersion")
        .await
        .expect("ShellVersion");
        assert!(
            shell_version.starts_with(version),
            "GNOME Shell {version} expected, got {shell_version}"
        );
        assert_eq!(
            std::fs::read_link(format!("/proc/{}/exe", shell.pid()))
                .ok()
                .map(|p| p.display().to_string()),
            Some(seen_exe.clone()),
            "the broker would not know this shell"
        );
        let src = eventually(10, "the extension is said to be off", || async {
            let s = source(&ctx, "gnome-shell").await?;
            s["last_error"]
                .as_str()?
                .contains(&format!("gnome-extensions enable {UUID}"))
                .then_some(s)
        })
        .await;
        assert_eq!(src["available"], false, "{src}");
        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .arg("sources")
                .env("DBUS_SESSION_BUS_ADDRESS", &bus.address),
            20,
        );
        assert!(st.success(), "contextctl sources: {err}");
        assert!(
            out.contains(&format!("gnome-extensions enable {UUID}")),
            "{out}"
        );
        let one = shell.window(&bus.address, ONE, "Window one");
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            windows(&ctx).await.is_empty(),
            "nothing without the extension"
        );

        // The user enables it (what `gnome-extensions enable` asks the
        // shell): the window already open is reported.
        let reply = conn
            .call_method(
                Some("org.gnome.Shell"),
                "/org/gnome/Shell",
                Some("org.gnome.Shell.Extensions"),
                "EnableExtension",
                &(UUID,),
            )
            .await
            .expect("EnableExtension");
        assert!(reply.body().deserialize::<bool>().expect("bool"), "enabled");
        let ws = eventually(10, "the open window is reported", || async {
            let ws = windows(&ctx).await;
            find(&ws, ONE).is_some().then_some(ws)
        })
        .await;
        let w1 = find(&ws, ONE).expect("one").clone();
        assert_eq!(w1["title"], "Window one", "{w1}");
        let id1 = w1["id"].as_str().expect("id").to_owned();
        assert!(id1.starts_with("gnome-shell-1-"), "{id1}");
        // The shell's attribution (its report came over the connection
        // that owns org.gnome.Shell, or it would have been refused).
        assert_eq!(w1["app_id_source"], "gnome-shell", "{w1}");
        // The window's process, from Meta.Window.get_pid() and the kernel
        // (issue 52): the python script's identity, beside its claim.
        assert_eq!(w1["identity"]["known_by"], "compositor", "{w1}");
        assert_eq!(
            w1["identity"]["app"],
            crate::window_identity::kernel_id(one.pid()),
            "{w1}"
        );
        let src = source(&ctx, "gnome-shell").await.expect("source");
        assert_eq!(src["available"], true, "{src}");
        eventually(5, "window one is active", || async {
            (active(&ctx).await["app_id"] == ONE).then_some(())
        })
        .await;

        // A subscriber follows focus and titles.
        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changes = Changes::new(sub.receive_changed().await.expect("changed"));

        // A second window takes the focus.
        let two = shell.window(&bus.address, TWO, "Window two");
        changes
            .until(10, "focus on two", |d| is_focus_on(d, TWO))
            .await;
        let a = active(&ctx).await;
        assert_eq!(a["app_id"], TWO, "{a}");
        assert_eq!(a["title"], "Window two", "{a}");
        let ws = windows(&ctx).await;
        assert_eq!(ws.len(), 2, "{ws:?}");
        assert_ne!(
            find(&ws, ONE).expect("one")["id"],
            find(&ws, TWO).expect("two")["id"]
        );

        // Titles only with windows.titles: gdbus has `windows` only.
        let (st, out, err) = run_cmd(
            Command::new("gdbus")
                .args([
                    "call",
                    "--session",
                    "-d",
                    "org.contextd.Broker1",
                    "-o",
                    "/org/contextd/Broker1",
                    "-m",
                    "org.contextd.Context1.ListWindows",
                ])
                .env("DBUS_SESSION_BUS_ADDRESS", &bus.address),
            10,
        );
        assert!(st.success(), "gdbus: {err}");
        assert!(out.contains(ONE) && out.contains(TWO), "{out}");
        assert!(
            !out.contains("Window one") && !out.contains("Window two"),
            "title leaked: {out}"
        );

        // A title change.
        let mut one = one;
        one.set_title("Renamed one");
        let d = changes
            .until(5, "title change", |d| {
                d["event"] == "changed" && d["window"]["title"] == "Renamed one"
            })
            .await;
        assert_eq!(d["window"]["id"], id1.as_str(), "the id stays: {d}");

        // Closing the focused window gives the focus back to the other.
        two.close();
        changes
            .until(10, "focus back on one", |d| is_focus_on(d, ONE))
            .await;
        changes
            .until(5, "two closed", |d| {
                d["event"] == "closed" && d["window"]["app_id"] == TWO
            })
            .await;
        assert_eq!(active(&ctx).await["app_id"], ONE);
        assert_eq!(windows(&ctx).await.len(), 1);
        // No window opened nameless and renamed after.
        for d in changes.seen.iter().filter(|d| d["event"] == "opened") {
            assert!(
                d["window"]["app_id"]
                    .as_str()
                    .is_some_and(|a| !a.is_empty()),
                "opened without an app id: {d}"
            );
        }
        assert!(
            !changes.focuses().contains(&None),
            "a moment without focus: {:?}",
            changes.focuses()
        );

        // A client that is not gnome-shell: refused, nothing changes.
        let reports = |method: &'static str, arg: String| {
            let conn = conn.clone();
            async move {
                conn.call_method(
                    Some("org.contextd.Broker1"),
                    "/org/contextd/Broker1",
                    Some("org.contextd.WindowReports1"),
                    method,
                    &(arg,),
                )
                .await
            }
        };
        for (method, arg) in [
            ("ReportFocus", "x".to_owned()),
            ("ReportClosed", id1.clone()),
        ] {
            let r = reports(method, arg).await;
            assert_eq!(error_name(r), "org.contextd.Error.NotAllowed", "{method}");
        }
        let fake: std::collections::HashMap<&str, zbus::wire::Variant<'_>> =
            [("app_id", zbus::wire::Variant::from("org.evil.Fake"))].into();
        let r = conn
            .call_method(
                Some("org.contextd.Broker1"),
                "/org/contextd/Broker1",
                Some("org.contextd.WindowReports1"),
                "ReportWindow",
                &("evil", fake),
            )
            .await;
        assert_eq!(error_name(r), "org.contextd.Error.NotAllowed");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ws = windows(&ctx).await;
        assert_eq!(ws.len(), 1, "{ws:?}");
        assert_eq!(active(&ctx).await["app_id"], ONE);

        // The user disables the extension: its windows go, and the source
        // says how to enable it again; enabled, they are back.
        for (method, listed) in [("DisableExtension", 0), ("EnableExtension", 1)] {
            conn.call_method(
                Some("org.gnome.Shell"),
                "/org/gnome/Shell",
                Some("org.gnome.Shell.Extensions"),
                method,
                &(UUID,),
            )
            .await
            .expect(method);
            let src = eventually(10, method, || async {
                let src = source(&ctx, "gnome-shell").await?;
                (windows(&ctx).await.len() == listed && src["available"] == (listed == 1))
                    .then_some(src)
            })
            .await;
            if listed == 0 {
                let hint = format!("gnome-extensions enable {UUID}");
                assert!(
                    src["last_error"]
                        .as_str()
                        .is_some_and(|e| e.contains(&hint)),
                    "{src}"
                );
            }
        }
        let src = source(&ctx, "gnome-shell").await.expect("source");
        assert!(src["last_error"].is_null(), "{src}");

        // The shell exits: its windows go, the source is unavailable.
        shell.stop();
        drop(one);
        eventually(10, "windows gone with the shell", || async {
            windows(&ctx).await.is_empty().then_some(())
        })
        .await;
        let src = eventually(10, "source unavailable", || async {
            let s = source(&ctx, "gnome-shell").await?;
            (s["available"] == false).then_some(s)
        })
        .await;
        assert_eq!(src["last_error"], "GNOME Shell is not running", "{src}");
        assert!(active(&ctx).await["app_id"].is_null(), "no active window");

        // Back (the extension enabled by the session mode this time): the
        // new shell's windows, with new ids.
        let shell = GnomeShell::start_in(
            root,
            &bus.address,
            &data,
            shell_home.path(),
            "contextd-test-on",
        )
        .await;
        // The attack: a python window claiming Firefox's app id is python.
        let fake = shell.window(
            &bus.address,
            crate::window_identity::FIREFOX,
            "Mozilla Firefox",
        );
        let ws = eventually(15, "the claiming window is reported", || async {
            let ws = windows(&ctx).await;
            find(&ws, crate::window_identity::FIREFOX)
                .is_some()
                .then_some(ws)
        })
        .await;
        crate::window_identity::assert_claim_is_a_claim(
            find(&ws, crate::window_identity::FIREFOX).expect("fake"),
            fake.pid(),
        );
        // Opened after the claiming window, so that it has the focus.
        let _again = shell.window(&bus.address, ONE, "Window one again");
        let ws = eventually(15, "windows back with the shell", || async {
            let ws = windows(&ctx).await;
            find(&ws, ONE).is_some().then_some(ws)
        })
        .await;
        let id = find(&ws, ONE).expect("one")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        // A new reporter: new ids (each reporting session counts).
        assert!(id.starts_with("gnome-shell-") && id != id1, "{id}");
        let src = source(&ctx, "gnome-shell").await.expect("source");
        assert_eq!(src["available"], true, "{src}");

        // The broker restarts: the extension sees org.contextd.Broker1
        // appear and sends its windows again.
        daemon.signal(libc::SIGTERM);
        daemon
            .wait_exit(Duration::from_secs(10))
            .expect("broker exits");
        let _daemon = Daemon::start(&bus, &home, &[]).await;
        // The extension sends the windows, then the focus: both arrive,
        // in that order, some time after the new broker owns the name.
        eventually(
            10,
            "windows and focus reported to the new broker",
            || async {
                let ws = windows(&ctx).await;
                (find(&ws, ONE)?["title"] == "Window one again"
                    && active(&ctx).await["app_id"] == ONE)
                    .then_some(())
            },
        )
        .await;
    })
    .await
}

/// The reporter is the same code in the legacy extension (GNOME 43, 44)
/// and the ES module (45 and later).
#[test]
fn both_extension_formats_carry_the_same_reporter() {
    let part = |dir: &str| -> String {
        let p = crate::common::root()
            .join("data")
            .join(dir)
            .join(UUID)
            .join("extension.js");
        let text = std::fs::read_to_string(&p).expect("extension.js");
        let start = text.find("// --- reporter").expect("start marker");
        let end = text.find("// --- end of reporter ---").expect("end marker");
        text[start..end].to_owned()
    };
    assert_eq!(part("gnome-shell"), part("gnome-shell-45"));
    for dir in ["gnome-shell", "gnome-shell-45"] {
        let p = crate::common::root()
            .join("data")
            .join(dir)
            .join(UUID)
            .join("metadata.json");
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).expect("metadata")).expect("json");
        assert_eq!(m["uuid"], UUID);
    }
}

/// The ES-module extension says it runs on every GNOME from 45 to 51
/// (GNOME Shell loads an extension only on the versions its metadata
/// names), the legacy one on 43 and 44; each of them is tested
/// (tests/it/debian13.rs: 48, tests/it/debian_testing.rs: 51).
#[test]
fn the_extensions_name_the_shell_versions_they_run_on() {
    let versions = |dir: &str| -> Vec<String> {
        let p = crate::common::root()
            .join("data")
            .join(dir)
            .join(UUID)
            .join("metadata.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let meta: serde_json::Value = serde_json::from_str(&text).expect("metadata.json");
        meta["shell-version"]
            .as_array()
            .expect("shell-version")
            .iter()
            .map(|v| v.as_str().expect("a version string").to_owned())
            .collect()
    };
    assert_eq!(versions("gnome-shell"), ["43", "44"]);
    assert_eq!(
        versions("gnome-shell-45"),
        (45..=51).map(|v| v.to_string()).collect::<Vec<_>>()
    );
}
