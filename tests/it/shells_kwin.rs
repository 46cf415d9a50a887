//! The `kwin` source against real KWin 5.27 (`kwin_wayland --virtual` in a
//! private session bus) and real GTK windows: the broker loads its script
//! into KWin, two windows are listed with their app ids (titles only with
//! `windows.titles`), focus moved by KWin (its WindowsRunner, what KRunner
//! uses) reaches GetActiveWindow and a subscriber, whose `Changed` never
//! shows the null activation KWin sends before each real one; a client that
//! is not KWin is refused; KWin exiting takes the windows with it until it
//! is back; the broker unloads its script when it stops.
//!
//! The script reports only to the broker that loaded it (issue 47, item
//! 3), written as the attack: the broker dies with its script loaded in
//! KWin, a rogue takes `org.contextd.Broker1` at once, and windows open and
//! change: the rogue receives nothing; the next broker gets them.
//!
//! KWin runs as a copy without its file capability (tests/it/shells/kwin.rs),
//! named in `[sources.shells] kwin`.

use crate::common;
use crate::shells;

use std::process::Command;
use std::time::Duration;

use common::*;
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use shells::kwin::{Kwin, activate, kwin_copy_from, script_loaded};
use shells::rogue::{Disguise, RogueBroker};
use shells::*;

const ONE: &str = "org.example.One";
const TWO: &str = "org.example.Two";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kwin_reports_windows_and_focus_through_the_script() {
    kwin_reports_windows_and_focus_through_the_script_in(None, "kwin 5.27").await;
}

/// The whole acceptance, for the KWin of `root` (a root of
/// scripts/roots.sh) or the host's, whose `--version` starts with
/// `version`.
pub(crate) async fn kwin_reports_windows_and_focus_through_the_script_in(
    root: Option<&str>,
    version: &str,
) {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        let kwin_home = tempfile::tempdir().expect("tempdir");
        let exe = kwin_copy_from(root, kwin_home.path());
        let mut v = match root {
            Some(r) => {
                let mut c = Command::new(crate::common::root().join("scripts/in-root.sh"));
                c.arg(r).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        let (_, out, _) = run_cmd(v.arg("--version"), 30);
        assert!(out.starts_with(version), "KWin {version} expected: {out}");
        home.write_policy(&[
            (&my_app_id(), &["windows", "windows.titles", "history"]),
            ("exe:/usr/bin/gdbus", &["windows"]),
        ]);
        // KWin's executable as the kernel shows it to the broker: from a
        // root entered with chroot, the path below the root.
        let seen_exe = format!("{}{}", root.unwrap_or(""), exe.display());
        home.write_config(&format!("[sources.shells]\nkwin = \"{seen_exe}\"\n"));
        let mut daemon = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert_eq!(source(&ctx, "kwin").await, None, "no KWin, no source");

        // KWin starts: the broker loads its script, which reports.
        let mut kwin = Kwin::start_in(root, &bus.address, &exe, kwin_home.path(), 1).await;
        assert_eq!(
            std::fs::read_link(format!("/proc/{}/exe", kwin.pid()))
                .ok()
                .map(|p| p.display().to_string()),
            Some(seen_exe.clone()),
            "the broker would not know this KWin"
        );
        eventually(10, "the kwin source available", || async {
            let s = source(&ctx, "kwin").await?;
            (s["available"] == true).then_some(())
        })
        .await;
        assert!(script_loaded(&conn).await);

        let path = ctx.subscribe(&["windows"]).await.expect("subscribe");
        let sub = Subscription1Proxy::builder(&conn)
            .path(path)
            .build()
            .await
            .expect("sub");
        let mut changes = Changes::new(sub.receive_changed().await.expect("changed"));

        let one = kwin.window(&bus.address, ONE, "Window one");
        changes
            .until(10, "focus on one", |d| is_focus_on(d, ONE))
            .await;
        let two = kwin.window(&bus.address, TWO, "Window two");
        changes
            .until(10, "focus on two", |d| is_focus_on(d, TWO))
            .await;
        let ws = windows(&ctx).await;
        assert_eq!(ws.len(), 2, "{ws:?}");
        let w1 = find(&ws, ONE).expect("one");
        assert_eq!(w1["title"], "Window one", "{w1}");
        let id1 = w1["id"].as_str().expect("id").to_owned();
        assert!(id1.starts_with("kwin-1-"), "{id1}");
        // The script's callDBus reports over KWin's own connection, which
        // owns org.kde.KWin (anything else is refused): KWin attributed it.
        assert_eq!(w1["app_id_source"], "kwin", "{w1}");
        // The window's process, from KWin's Window.pid and the kernel
        // (issue 52): the python script's identity, beside its claim.
        assert_eq!(w1["identity"]["known_by"], "compositor", "{w1}");
        assert_eq!(
            w1["identity"]["app"],
            crate::window_identity::kernel_id(one.pid()),
            "{w1}"
        );
        assert_eq!(active(&ctx).await["app_id"], TWO);

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
        assert!(!out.contains("Window one"), "title leaked: {out}");

        // KWin moves the focus back and forth: each activation comes after
        // a null one, which the subscriber never sees.
        for (title, app) in [
            ("Window one", ONE),
            ("Window two", TWO),
            ("Window one", ONE),
        ] {
            activate(&conn, title).await;
            changes
                .until(10, &format!("focus on {app}"), |d| is_focus_on(d, app))
                .await;
            assert_eq!(active(&ctx).await["app_id"], app);
        }
        // Past the wait for a null focus, nothing more came.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(active(&ctx).await["app_id"], ONE);
        let focuses = changes.focuses();
        assert!(
            !focuses.contains(&None),
            "a moment without focus: {focuses:?}"
        );
        assert_eq!(
            focuses,
            [ONE, TWO, ONE, TWO, ONE].map(|a| Some(a.to_owned())),
            "{:#?}",
            changes.seen
        );

        // No window opened nameless and renamed after.
        for d in changes.seen.iter().filter(|d| d["event"] == "opened") {
            assert!(
                d["window"]["app_id"]
                    .as_str()
                    .is_some_and(|a| !a.is_empty()),
                "opened without an app id: {d}"
            );
        }
        // The timeline has the focus intervals, as for any window source.
        let history = contextd::client::proxy::History1Proxy::new(&conn)
            .await
            .expect("history");
        let apps = eventually(10, "focus intervals in the timeline", || async {
            let (events, _) = history.query(0, 0, &["windows"], &[], 100, "").await.ok()?;
            let apps: Vec<String> = events
                .iter()
                .map(contextd::client::json::dict_to_json)
                .filter(|e| e["kind"] == "focus")
                .filter_map(|e| e["app_id"].as_str().map(str::to_owned))
                .collect();
            (apps.len() >= 5).then_some(apps)
        })
        .await;
        assert_eq!(apps[..5], [ONE, TWO, ONE, TWO, ONE], "{apps:?}");

        // A caption change.
        let mut two = two;
        two.set_title("Renamed two");
        changes
            .until(5, "caption change", |d| {
                d["event"] == "changed" && d["window"]["title"] == "Renamed two"
            })
            .await;

        // A client that is not KWin: refused, nothing changes.
        let r = conn
            .call_method(
                Some("org.contextd.Broker1"),
                "/org/contextd/Broker1",
                Some("org.contextd.WindowReports1"),
                "ReportFocus",
                &("x",),
            )
            .await;
        assert_eq!(error_name(r), "org.contextd.Error.NotAllowed");
        let r = conn
            .call_method(
                Some("org.contextd.Broker1"),
                "/org/contextd/Broker1",
                Some("org.contextd.WindowReports1"),
                "ReportStopped",
                &(),
            )
            .await;
        assert_eq!(error_name(r), "org.contextd.Error.NotAllowed");
        assert_eq!(windows(&ctx).await.len(), 2);
        assert_eq!(active(&ctx).await["app_id"], ONE);

        // KWin exits: its windows go, the source is unavailable.
        kwin.stop();
        drop(two);
        eventually(10, "windows gone with KWin", || async {
            windows(&ctx).await.is_empty().then_some(())
        })
        .await;
        let src = eventually(10, "source unavailable", || async {
            let s = source(&ctx, "kwin").await?;
            (s["available"] == false).then_some(s)
        })
        .await;
        assert_eq!(src["last_error"], "KWin is not running", "{src}");
        assert!(active(&ctx).await["app_id"].is_null());

        // Back: the script is loaded again, the new KWin's windows listed.
        let kwin = Kwin::start_in(root, &bus.address, &exe, kwin_home.path(), 2).await;
        // The attack: a python window claiming Firefox's app id is python.
        let fake = kwin.window(
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
        let _again = kwin.window(&bus.address, ONE, "Window one again");
        let ws = eventually(15, "windows back with KWin", || async {
            let ws = windows(&ctx).await;
            find(&ws, ONE).is_some().then_some(ws)
        })
        .await;
        let id = find(&ws, ONE).expect("one")["id"]
            .as_str()
            .expect("id")
            .to_owned();
        assert!(id.starts_with("kwin-2-"), "{id}");

        // The broker stops: its script is unloaded from KWin.
        assert!(script_loaded(&conn).await);
        daemon.signal(libc::SIGTERM);
        daemon
            .wait_exit(Duration::from_secs(10))
            .expect("broker exits");
        assert!(!script_loaded(&conn).await, "the script stays loaded");

        // A new broker loads it again and gets the windows.
        let _daemon = Daemon::start(&bus, &home, &[]).await;
        // The script sends the windows, then the focus.
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
        assert!(script_loaded(&conn).await);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_reports_only_to_the_broker_that_loaded_it() {
    the_script_reports_only_to_the_broker_that_loaded_it_in(None).await;
}

/// The attack on the KWin of `root` (a root of scripts/roots.sh) or the
/// host's.
pub(crate) async fn the_script_reports_only_to_the_broker_that_loaded_it_in(root: Option<&str>) {
    with_timeout(180, async {
        let bus = Bus::start();
        let home = Home::new();
        let kwin_home = tempfile::tempdir().expect("tempdir");
        let exe = kwin_copy_from(root, kwin_home.path());
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        let seen_exe = format!("{}{}", root.unwrap_or(""), exe.display());
        home.write_config(&format!("[sources.shells]\nkwin = \"{seen_exe}\"\n"));
        let mut daemon = Daemon::start(&bus, &home, &[]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        let kwin = Kwin::start_in(root, &bus.address, &exe, kwin_home.path(), 1).await;
        let mut one = kwin.window(&bus.address, ONE, "Window one");
        eventually(15, "the broker gets the window", || async {
            find(&windows(&ctx).await, ONE).map(drop)
        })
        .await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus proxy");
        let kwin_name = dbus
            .get_name_owner("org.kde.KWin".try_into().expect("name"))
            .await
            .expect("KWin's unique name")
            .to_string();

        // The broker dies: nobody unloads its script, which stays in KWin.
        // A rogue takes the name before the next broker does.
        daemon.signal(libc::SIGKILL);
        daemon
            .wait_exit(Duration::from_secs(10))
            .expect("the broker dies");
        wait_for_owner(&bus, false).await;
        assert!(
            script_loaded(&conn).await,
            "the script went with the broker"
        );
        let mut rogue = RogueBroker::start(&bus.address, Disguise::Python);

        // A window opens (and takes the focus), another changes its title:
        // the script reports each as it happens, to the broker that
        // loaded it, which is gone.
        let two = kwin.window(&bus.address, TWO, "Online banking");
        one.set_title("Secret one");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let got = rogue.calls_from(&kwin_name);
        assert!(got.is_empty(), "the rogue got {got:?}");
        rogue.stop();
        wait_for_owner(&bus, false).await;

        // The next broker loads the script anew, with its own name, and
        // gets the windows as they are.
        let _daemon = Daemon::start(&bus, &home, &[]).await;
        eventually(15, "the next broker gets the windows", || async {
            let ws = windows(&ctx).await;
            (find(&ws, ONE)?["title"] == "Secret one"
                && find(&ws, TWO)?["title"] == "Online banking")
                .then_some(())
        })
        .await;
        drop(two);
    })
    .await
}
