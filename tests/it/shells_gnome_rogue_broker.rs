//! The GNOME Shell extension sends nothing to an owner of
//! `org.contextd.Broker1` that is not the broker (issue 47, item 3),
//! written as the attack: while no broker runs, a process takes the name
//! (tests/it/shells/rogue.rs), and GNOME Shell with the extension enabled
//! has windows open and opens more. In each disguise:
//! - any program (python3): refused, it is not `contextd`;
//! - a program named `contextd` elsewhere than the installed broker (the
//!   D-Bus activation file in the shell's `$XDG_DATA_HOME` names this
//!   test's broker): refused;
//! - the installed broker's path inside a sandbox with `/.flatpak-info`
//!   (what the bus proxy of every Flatpak app is): refused;
//! - the same in a PID namespace of its own and not dumpable, so that the
//!   shell can read neither its executable nor its `.flatpak-info` (a
//!   Flatpak app given the whole session bus): refused.
//!
//! The rogue receives no call at all from the shell (no `ReportWindows`,
//! `ReportWindow`, `RegisterAgent`, `Watch`), and the consent agent answers
//! its `Ask` with `NotAllowed`. Then the rogue leaves, the real broker
//! starts and gets the windows, the shell's consent agent and its
//! indicator; the broker is killed and a rogue takes the name at once: it
//! gets nothing of a title that changes then.
//!
//! The shell runs without CAP_SYS_PTRACE (tests/it/shells/gnome.rs), as a
//! user's shell does: the broker, not dumpable, keeps its /proc closed to
//! it, and is known anyway.

use crate::common;
use crate::shells;

use std::path::PathBuf;

use common::*;
use contextd::client::proxy::Context1Proxy;
use shells::gnome::{GnomeShell, data_dir_for};
use shells::rogue::{Disguise, RogueBroker};
use shells::*;

const HOOK: &str = "/org/contextd/ShellTest/Indicator";
const HOOK_IFACE: &str = "org.contextd.ShellTest.Indicator";
const PARTS: [&str; 3] = ["reporter", "consent agent", "indicator"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_sends_nothing_to_an_owner_of_the_name_that_is_not_the_broker() {
    the_extension_sends_nothing_to_a_rogue_in(None, "gnome-shell").await;
}

/// Whether the indicator is in the top bar (the extension's test hook).
async fn indicator_shown(conn: &zbus::Connection) -> Option<bool> {
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
    let (on, _items): (bool, Vec<String>) = reply.body().deserialize().ok()?;
    Some(on)
}

/// Wait until every part of the extension refused `rogue`, saying `why`.
async fn refused_by_every_part(shell: &GnomeShell, rogue: &RogueBroker, why: &str) {
    for part in PARTS {
        let says = format!(
            "contextd: {part}: {} owns org.contextd.Broker1 but is not the contextd broker",
            rogue.unique
        );
        eventually(
            20,
            &format!("the {part} refuses the rogue ({why})"),
            || async {
                shell
                    .log()
                    .lines()
                    .any(|l| l.contains(&says) && l.contains(why))
                    .then_some(())
            },
        )
        .await;
    }
}

/// The extension of `data/FORMAT` in the GNOME Shell of `root` (a root of
/// scripts/roots.sh) or the host's.
pub(crate) async fn the_extension_sends_nothing_to_a_rogue_in(root: Option<&str>, format: &str) {
    with_timeout(300, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows", "windows.titles"])]);
        if let Some(r) = root {
            home.write_config(&format!(
                "[sources.shells]\ngnome_shell = \"{r}/usr/bin/gnome-shell\"\n"
            ));
        }
        let shell_home = tempfile::tempdir().expect("tempdir");
        let data = data_dir_for(shell_home.path(), format);
        // The installed broker, as its D-Bus activation file says (in the
        // shell's XDG_DATA_HOME): the one this test starts.
        let broker = PathBuf::from(contextd_bin());
        let services = shell_home.path().join("data/dbus-1/services");
        std::fs::create_dir_all(&services).expect("mkdir");
        std::fs::write(
            services.join("org.contextd.Broker1.service"),
            format!(
                "[D-BUS Service]\nName=org.contextd.Broker1\nExec={}\n",
                broker.display()
            ),
        )
        .expect("the activation file");
        let mut shell = GnomeShell::start_in(
            root,
            &bus.address,
            &data,
            shell_home.path(),
            "contextd-test-on",
        )
        .await;
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("dbus proxy");
        let shell_name = dbus
            .get_name_owner("org.gnome.Shell".try_into().expect("name"))
            .await
            .expect("GNOME Shell's unique name")
            .to_string();
        let mut opened = vec![shell.window(&bus.address, "org.example.Bank", "Online banking")];

        let disguises = [
            (Disguise::Python, "not contextd"),
            (Disguise::NamedContextd, "not the installed"),
            (
                Disguise::Sandboxed {
                    exe_at: broker.clone(),
                    flatpak_info: true,
                    own_pid_ns: false,
                    not_dumpable: false,
                },
                "Flatpak sandbox",
            ),
            (
                Disguise::Sandboxed {
                    exe_at: broker.clone(),
                    flatpak_info: true,
                    own_pid_ns: true,
                    not_dumpable: true,
                },
                "PID namespace",
            ),
        ];
        for (n, (how, why)) in disguises.into_iter().enumerate() {
            let mut rogue = RogueBroker::start(&bus.address, how);
            refused_by_every_part(&shell, &rogue, why).await;
            // A window opens while it owns the name (the reporter sends
            // each one as it opens, to the broker it checked).
            let app = format!("org.example.App{n}");
            opened.push(shell.window(&bus.address, &app, &format!("Secret {n}")));
            assert_eq!(
                rogue.ask(),
                "org.contextd.Error.NotAllowed",
                "{why}: the consent agent took the rogue's question"
            );
            // What the shell would have sent has arrived by now: the
            // window was reported as it opened, and the reporter, the
            // agent and the indicator would have called at once.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            let got = rogue.calls_from(&shell_name);
            assert!(got.is_empty(), "{why}: the rogue got {got:?}");
            rogue.stop();
            wait_for_owner(&bus, false).await;
        }

        // The real broker: it gets every window, the shell's consent
        // agent and its indicator.
        let mut daemon = Daemon::start(&bus, &home, &[]).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(20, "the broker gets every window", || async {
            let ws = windows(&ctx).await;
            (ws.len() == opened.len() && find(&ws, "org.example.Bank").is_some()).then_some(())
        })
        .await;
        eventually(20, "the shell is the broker's consent agent", || async {
            (source(&ctx, "consent-agent").await?["available"] == true).then_some(())
        })
        .await;
        let _sub = ctx.subscribe(&["windows"]).await.expect("subscribe");
        eventually(20, "the indicator is shown", || async {
            indicator_shown(&conn).await?.then_some(())
        })
        .await;

        // The broker dies; a rogue takes the name before it is back. A
        // title that changes then goes nowhere.
        daemon.signal(libc::SIGKILL);
        let _ = daemon.wait_exit(std::time::Duration::from_secs(10));
        wait_for_owner(&bus, false).await;
        let rogue = RogueBroker::start(&bus.address, Disguise::Python);
        refused_by_every_part(&shell, &rogue, "not contextd").await;
        opened[0].set_title("Online banking: statement");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let got = rogue.calls_from(&shell_name);
        assert!(
            got.is_empty(),
            "after the broker died: the rogue got {got:?}"
        );
        drop(rogue);
        for w in opened {
            w.close();
        }
        shell.stop();
    })
    .await
}

/// The check of the broker is the same code in the legacy extension
/// (GNOME 43, 44) and the ES module (45 and later); the reporter, the
/// consent agent and the indicator each follow the name through it, and
/// none follows the well-known name itself or calls it.
#[test]
fn every_part_of_both_formats_talks_only_to_the_checked_broker() {
    let read = |dir: &str, file: &str| -> String {
        let p = crate::common::root()
            .join("data")
            .join(dir)
            .join(shells::gnome::UUID)
            .join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let part = |dir: &str| -> String {
        let text = read(dir, "brokerCheck.js");
        let start = text.find("// --- broker check").expect("start marker");
        let end = text
            .find("// --- end of broker check ---")
            .expect("end marker");
        text[start..end].to_owned()
    };
    assert_eq!(part("gnome-shell"), part("gnome-shell-45"));
    assert!(read("gnome-shell", "brokerCheck.js").contains("var BrokerWatch = Watch;"));
    assert!(read("gnome-shell-45", "brokerCheck.js").contains("export {Watch as BrokerWatch};"));
    for dir in ["gnome-shell", "gnome-shell-45"] {
        for file in ["extension.js", "consentDialog.js", "indicator.js"] {
            let text = read(dir, file);
            assert!(
                text.contains("new BrokerWatch("),
                "{dir}/{file} does not check the broker"
            );
            assert!(
                !text.contains("bus_watch_name"),
                "{dir}/{file} follows a name unchecked"
            );
            assert!(
                !text.contains("session.call(BUS_NAME")
                    && !text.contains("session.call(BROKER_NAME")
                    && !text.contains("session.call(IND_BUS_NAME"),
                "{dir}/{file} calls the well-known name"
            );
        }
    }
}
