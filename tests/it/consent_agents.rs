//! Who may answer prompts: only a trusted consent agent (GNOME Shell
//! owning `org.gnome.Shell`, or a program the user named in config.toml)
//! registers; an attacker on the same bus (another program, one that
//! takes `org.gnome.Shell`, a copy of the trusted program) gets
//! `NotAllowed`, and the trusted agent keeps answering. Without an agent
//! `ListSources` says the notification asks, and why. The broker shows
//! one question at a time; Escape ("cancel") denies the call only.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::agent::{AgentBroker, TestAgent, serve_and_register};
use common::*;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use zbus::wire::ObjectPath;

const NOT_ALLOWED: &str = "org.contextd.Error.NotAllowed";

/// Set by the test for a copy of this program run as the attacker.
const ATTACK_BUS: &str = "CONTEXTD_TEST_ATTACK_BUS";

/// Run `calls` (Python, with `conn` a Gio connection to `bus`) in a
/// python3 process, an ordinary unsandboxed program, which first takes
/// `org.gnome.Shell` when `take_shell_name`: its output.
pub fn python_as_attacker(bus: &str, take_shell_name: bool, calls: &str) -> String {
    let script = format!(
        r#"
import sys
from gi.repository import Gio, GLib
conn = Gio.DBusConnection.new_for_address_sync(sys.argv[1],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
if sys.argv[2] == "1":
    r = conn.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        "RequestName", GLib.Variant("(su)", ("org.gnome.Shell", 4)), None, 0, -1, None)
    assert r.unpack()[0] == 1, r
{calls}"#
    );
    let out = Command::new("/usr/bin/python3")
        .args(["-c", &script, bus, if take_shell_name { "1" } else { "0" }])
        .output()
        .expect("python3 (python3-gi: scripts/deps.sh)");
    assert!(
        out.status.success(),
        "python3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Register as agent from python3 ([`python_as_attacker`]): what it
/// heard, `OK` or the error's name.
pub fn python_registers(bus: &str, take_shell_name: bool) -> String {
    python_as_attacker(
        bus,
        take_shell_name,
        r#"try:
    conn.call_sync("org.contextd.Broker1", "/org/contextd/Broker1", "org.contextd.Consent1",
        "RegisterAgent", GLib.Variant("(o)", ("/org/example/Evil",)), None, 0, -1, None)
    print("OK")
except GLib.Error as e:
    print(Gio.DBusError.get_remote_error(e))
"#,
    )
    .trim()
    .to_owned()
}

/// Run a copy of this test program (a hard link, else a copy, under
/// another path) as the attacker: it registers and says what it heard.
fn copy_registers(bus: &str) -> String {
    let exe = std::env::current_exe().expect("exe");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let copy = dir.path().join("it");
    if std::fs::hard_link(&exe, &copy).is_err() {
        std::fs::copy(&exe, &copy).expect("copy the test program");
    }
    let out = Command::new(&copy)
        .args([
            "consent_agents::a_copy_registers",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(ATTACK_BUS, bus)
        .output()
        .expect("run the copy");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("ATTACK: "))
        .unwrap_or_else(|| panic!("the copy said nothing: {text}"))
        .to_owned()
}

/// The attacker's side of [`copy_registers`]: only does something when
/// run by it (ignored otherwise).
#[tokio::test]
#[ignore = "run by consent_agents::only_trusted_agents_register, as a copy of this program"]
async fn a_copy_registers() {
    let Ok(bus) = std::env::var(ATTACK_BUS) else {
        return;
    };
    let conn = connect_to(&bus).await;
    let r = Consent1Proxy::new(&conn)
        .await
        .expect("proxy")
        .register_agent(&ObjectPath::try_from("/org/example/Evil").expect("path"))
        .await;
    let said = match r {
        Ok(()) => "OK".to_owned(),
        Err(zbus::Error::MethodError(name, _, _)) => name.to_string(),
        Err(e) => format!("{e}"),
    };
    println!("ATTACK: {said}");
}

/// The `consent-agent` entry of `ListSources`.
async fn surface(conn: &zbus::Connection) -> serde_json::Value {
    let ctx = Context1Proxy::new(conn).await.expect("proxy");
    ctx.list_sources()
        .await
        .expect("ListSources")
        .iter()
        .map(contextd::client::json::dict_to_json)
        .find(|s| s["name"] == "consent-agent")
        .expect("a consent-agent entry in ListSources")
}

type Setup = AgentBroker;

async fn setup(config: &str) -> Setup {
    AgentBroker::new(config).await
}

async fn start(s: &Setup) -> Daemon {
    s.start(&[]).await
}

async fn register(bus: &Bus, agent: &TestAgent) -> zbus::Connection {
    serve_and_register(&bus.address, agent).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_trusted_agents_register() {
    with_timeout(90, async {
        let s = setup("[consent]\nprompt_timeout_s = 20\n").await;
        let _d = start(&s).await;
        let app = s.bus.connect().await;

        // No agent yet: the notification asks, and ListSources says why.
        let src = surface(&app).await;
        assert_eq!(src["available"], false, "{src}");
        // This bus can start no portal backend: notifications ask, and
        // the entry says why not the portal's dialog.
        let why = src["last_error"].as_str().unwrap_or_default();
        assert!(
            why.starts_with(
                "notification: no trusted consent agent registered; no portal dialog: "
            ),
            "{src}"
        );

        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .arg("sources")
                .env("DBUS_SESSION_BUS_ADDRESS", &s.bus.address),
            20,
        );
        assert!(st.success(), "contextctl sources: {err}");
        assert!(
            out.lines().any(|l| l.starts_with("consent-agent")
                && l.contains("notification: no trusted consent agent registered")),
            "{out}"
        );

        // An ordinary program, and one that took the shell's name first.
        assert_eq!(python_registers(&s.bus.address, false), NOT_ALLOWED);
        assert_eq!(python_registers(&s.bus.address, true), NOT_ALLOWED);
        assert_eq!(surface(&app).await["available"], false);

        // The program the user named registers.
        let agent = TestAgent::new("once");
        let _agent_conn = register(&s.bus, &agent).await;
        let src = surface(&app).await;
        assert_eq!(src["available"], true, "{src}");

        // Attacks after it: refused, and it keeps answering.
        assert_eq!(copy_registers(&s.bus.address), NOT_ALLOWED);
        assert_eq!(python_registers(&s.bus.address, true), NOT_ALLOWED);
        let ctx = Context1Proxy::new(&app).await.expect("proxy");
        ctx.request_access(&["power"], "testing")
            .await
            .expect("RequestAccess");
        let asked = eventually(20, "the trusted agent is asked", || async {
            agent.asked().into_iter().next()
        })
        .await;
        assert_eq!(asked.categories, vec!["power"]);
        // What the agent is told besides the app: the question in words.
        let q = &asked.app["questions"][0];
        assert_eq!(q["category"], "power", "{asked:?}");
        assert_eq!(
            q["description"], "Battery level and whether you are on battery",
            "{asked:?}"
        );
        assert_eq!(asked.app["identity"], "the program file it runs");
        assert_eq!(surface(&app).await["available"], true);
    })
    .await;
}

/// Two questions queue: the agent is asked the second only once the first
/// is answered. Escape (`cancel`) denies the call and stores nothing, and
/// (the attack: an app re-asking as fast as the user presses Escape) the
/// app is not asked again for the cool-down: its next call is denied at
/// once, with no question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_queue_and_escape_cools_the_app_down() {
    with_timeout(90, async {
        let s = setup("[consent]\nprompt_timeout_s = 20\ncooldown_s = 600\n").await;
        let _d = start(&s).await;
        let agent = TestAgent::new("hold");
        let _agent_conn = register(&s.bus, &agent).await;
        let app = s.bus.connect().await;
        let ctx = Context1Proxy::new(&app).await.expect("proxy");

        ctx.request_access(&["power"], "testing")
            .await
            .expect("RequestAccess");
        eventually(20, "the first question is asked", || async {
            (agent.asked().len() == 1).then_some(())
        })
        .await;
        ctx.request_access(&["network"], "testing")
            .await
            .expect("RequestAccess");
        // The second waits in ListPending, not on the screen.
        let consent = Consent1Proxy::new(&app).await.expect("proxy");
        eventually(20, "both questions are pending", || async {
            (consent.list_pending().await.ok()?.len() == 2).then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(agent.asked().len(), 1, "two questions on the screen");
        agent.release.notify_one();
        let second = eventually(20, "the second question is asked", || async {
            agent.asked().get(1).cloned()
        })
        .await;
        assert_eq!(second.categories, vec!["network"]);

        // Escape on the second: denied for that call, nothing stored.
        agent.set("cancel", Duration::ZERO);
        agent.release.notify_one();
        eventually(20, "the question is gone", || async {
            consent.list_pending().await.ok()?.is_empty().then_some(())
        })
        .await;
        let grants = consent.list_grants().await.expect("grants");
        assert!(
            !grants
                .iter()
                .map(contextd::client::json::dict_to_json)
                .any(|g| g["category"] == "network"),
            "Escape stored a decision: {grants:?}"
        );
        // The app asks again at once, for that and for anything else:
        // denied without a question, for the 10 minutes of cool-down.
        for cats in [&["network"][..], &["session"], &["location"]] {
            assert_eq!(
                crate::consent_prompts::request(&app, cats).await,
                1,
                "{cats:?}"
            );
        }
        assert_eq!(error_name(ctx.subscribe(&["session"]).await), NOT_ALLOWED);
        assert!(consent.list_pending().await.expect("pending").is_empty());
        assert_eq!(agent.asked().len(), 2, "asked again: {:?}", agent.asked());
        assert!(
            consent.list_grants().await.expect("grants").is_empty(),
            "a cool-down is no decision"
        );
    })
    .await;
}
