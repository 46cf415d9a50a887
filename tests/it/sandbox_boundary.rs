//! The sandbox is the boundary: the user's own controls are the user's
//! alone. Written as the attacks an outside tester made: a Flatpak app
//! (bubblewrap, a read-only `/.flatpak-info`, the bus only through
//! `xdg-dbus-proxy --filter --talk=org.contextd.Broker1`, as `flatpak run`
//! sets it up; `common::flatpak`) opened the dashboard for itself,
//! imported grants of its own making and answered its own question, each
//! through a polkit dialog that did not name it. Here polkit says yes to
//! everything, so that only the broker's own rule stands between the app
//! and the controls: it is refused before polkit is asked, and nothing is
//! stored.

use crate::common;

use std::collections::HashMap;

use common::dbusmock::Mock;
use common::flatpak::Flatpak;
use common::*;
use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};

const SNEAKY: &str = "org.example.Sneaky";
const POLKIT_PATH: &str = "/org/freedesktop/PolicyKit1/Authority";

/// polkit's `CheckAuthorization` calls so far: each one's details.
async fn polkit_checks(polkit: &Mock, sys: &Bus) -> Vec<HashMap<String, String>> {
    let conn = sys.connect().await;
    let m = polkit
        .call(
            &conn,
            POLKIT_PATH,
            "org.freedesktop.DBus.Mock",
            "GetCalls",
            &(),
        )
        .await;
    let calls: Vec<(u64, String, Vec<zbus::wire::OwnedVariant>)> =
        m.body().deserialize().expect("calls");
    calls
        .into_iter()
        .filter(|c| c.1 == "CheckAuthorization")
        .map(|c| {
            let details = to_json(&c.2[2]);
            details
                .as_object()
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// An export line claiming the user answered a prompt in 2099.
fn forged_export(app: &str) -> String {
    format!(
        "{{\"format\":\"contextd-export\",\"version\":1,\"exported\":\"2099-01-01T00:00:00Z\"}}\n\
         {{\"type\":\"decision\",\"app_id\":\"{app}\",\"category\":\"windows.titles\",\
         \"decision\":\"allow\",\"origin\":\"prompt\",\"created\":\"2099-01-01T00:00:00Z\"}}\n"
    )
}

/// A broker as a real installation runs it (undecided access is asked),
/// with `config` added, on a private session bus with a notification
/// server (so that a question stays on screen), and a system bus whose
/// polkit allows every management call: a refusal is the broker's own.
struct Desk {
    bus: Bus,
    sys: Bus,
    polkit: Mock,
    _notifications: Mock,
    _home: Home,
    _daemon: Daemon,
}

async fn desk(config: &str) -> Desk {
    let bus = Bus::start();
    let sys = Bus::start();
    let polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
    let notifications = Mock::start(&bus.address, false, "notification_daemon").await;
    let home = Home::new();
    home.write_config(config);
    let daemon = Daemon::start_with(
        &bus,
        &home,
        &[],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await;
    Desk {
        bus,
        sys,
        polkit,
        _notifications: notifications,
        _home: home,
        _daemon: daemon,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flatpak_app_reaches_none_of_the_users_controls() {
    with_timeout(120, async {
        // The dashboard runs, so that a link could be handed out.
        let Desk {
            bus, sys, polkit, ..
        } = &desk("[dashboard]\nenabled = true\n").await;
        let app = Flatpak::start(bus, SNEAKY);

        // It is who the sandbox says: a read answers for the Flatpak id.
        let err = app
            .call("org.contextd.Context1.GetActiveWindow", &[])
            .expect_err("undecided");
        assert!(
            err.contains("org.contextd.Error.Pending") && err.contains(SNEAKY),
            "the broker did not see the Flatpak app: {err}"
        );
        // Its own question, on the screen.
        app.call(
            "org.contextd.Context1.RequestAccess",
            &["['location']", "'to find restaurants'"],
        )
        .expect("a question may be asked");
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let question = eventually(10, "the app's question waits", || async {
            consent
                .list_pending()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .find(|p| p["app_id"] == SNEAKY)
        })
        .await;
        let id = question["id"].as_u64().expect("id").to_string();
        let checks_before = polkit_checks(polkit, sys).await.len();

        let forged = forged_export(SNEAKY).replace('\n', "\\n");
        let attacks: Vec<(&str, Vec<String>)> = vec![
            ("Consent1.OpenDashboard", vec![]),
            (
                "Consent1.SetGrant",
                vec![
                    format!("'{SNEAKY}'"),
                    "'windows.titles'".into(),
                    "'allow'".into(),
                    "0".into(),
                ],
            ),
            ("Consent1.Import", vec![format!("'{forged}'")]),
            (
                "Consent1.AnswerPending",
                vec![id.clone(), "'always'".into(), "0".into()],
            ),
            ("Consent1.SetPaused", vec!["true".into()]),
            ("Consent1.ListGrants", vec![]),
            ("Consent1.ListApps", vec![]),
            ("Consent1.ListPending", vec![]),
            ("Consent1.ListReaders", vec![]),
            ("Consent1.EndReader", vec!["1".into()]),
            ("Consent1.ListProviders", vec![]),
            (
                "Consent1.SetPublishing",
                vec![format!("'{SNEAKY}'"), "true".into()],
            ),
            (
                "Consent1.Revoke",
                vec!["'org.example.Other'".into(), "'windows'".into()],
            ),
            ("Consent1.ForgetApp", vec!["'org.example.Other'".into()]),
            (
                "Consent1.GetAudit",
                vec!["0".into(), "0".into(), "''".into(), "10".into()],
            ),
            ("Consent1.Export", vec!["true".into()]),
            ("Consent1.RotateKey", vec![]),
            ("Consent1.DismissRecovery", vec![]),
            ("Consent1.WatchChanges", vec![]),
            (
                "History1.Forget",
                vec!["0".into(), "0".into(), "@as []".into(), "@as []".into()],
            ),
        ];
        for (method, args) in &attacks {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = app.call(&format!("org.contextd.{method}"), &args);
            match r {
                Err(e) => assert!(
                    e.contains("org.contextd.Error.NotAllowed") && e.contains("sandbox"),
                    "{method}: not refused as a sandboxed caller: {e}"
                ),
                Ok(reply) => panic!("{method} served a sandboxed app: {reply}"),
            }
        }
        // The properties too.
        for prop in ["Paused", "Recovery"] {
            let r = app.call(
                "org.freedesktop.DBus.Properties.Get",
                &["'org.contextd.Consent1'", &format!("'{prop}'")],
            );
            assert!(
                r.as_ref()
                    .is_err_and(|e| e.contains("org.contextd.Error.NotAllowed")),
                "{prop}: {r:?}"
            );
        }

        // polkit was never asked for the sandboxed app: no dialog that
        // would pass for the user's own action.
        assert_eq!(
            polkit_checks(polkit, sys).await.len(),
            checks_before,
            "polkit was asked on behalf of a sandboxed app"
        );

        // Nothing changed: no grant, not paused, the question still waits.
        let grants = consent.list_grants().await.expect("grants");
        assert!(
            grants
                .iter()
                .map(dict_to_json)
                .all(|g| g["app_id"] != SNEAKY),
            "the app granted itself: {grants:?}"
        );
        assert!(!consent.paused().await.expect("paused"));
        let pending = consent.list_pending().await.expect("pending");
        assert!(
            pending
                .iter()
                .map(dict_to_json)
                .any(|p| p["id"].as_u64().is_some_and(|n| n.to_string() == id)),
            "its question was answered: {pending:?}"
        );
        let err = app
            .call("org.contextd.Context1.GetActiveWindow", &[])
            .expect_err("still undecided");
        assert!(err.contains("org.contextd.Error.Pending"), "{err}");
    })
    .await
}

/// An unsandboxed app that answers its own question grants itself: it is
/// refused too, from a second connection of the same app as well, and
/// the user's own tool (another program) still answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_answers_its_own_question() {
    with_timeout(60, async {
        let Desk {
            bus, sys, polkit, ..
        } = &desk("").await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        ctx.request_access(&["location"], "to find restaurants")
            .await
            .expect("asked");
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let me = my_app_id();
        let question = eventually(10, "my question waits", || async {
            consent
                .list_pending()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .find(|p| p["app_id"] == me.as_str())
        })
        .await;
        let id = question["id"].as_u64().expect("id");
        let checks_before = polkit_checks(polkit, sys).await.len();
        for c in [conn.clone(), bus.connect().await] {
            let consent = Consent1Proxy::new(&c).await.expect("proxy");
            let r = consent.answer_pending(id, "always", 0).await;
            match r {
                Err(zbus::Error::MethodError(name, msg, _)) => {
                    assert_eq!(name.as_str(), "org.contextd.Error.NotAllowed");
                    assert!(
                        msg.unwrap_or_default().contains("its own question"),
                        "unclear refusal"
                    );
                }
                other => panic!("answered its own question: {other:?}"),
            }
        }
        assert_eq!(polkit_checks(polkit, sys).await.len(), checks_before);
        assert!(
            consent
                .list_grants()
                .await
                .expect("grants")
                .iter()
                .map(dict_to_json)
                .all(|g| g["app_id"] != me.as_str()),
            "a grant was stored"
        );

        // The user's tool (gdbus here: another program) answers it, and
        // polkit's request names that caller and the exact change.
        let out = std::process::Command::new("gdbus")
            .args([
                "call",
                "--address",
                &bus.address,
                "--dest",
                "org.contextd.Broker1",
                "--object-path",
                "/org/contextd/Broker1",
                "--method",
                "org.contextd.Consent1.AnswerPending",
                &id.to_string(),
                "deny",
                "0",
            ])
            .output()
            .expect("gdbus");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let checks = polkit_checks(polkit, sys).await;
        let asked = checks.last().expect("polkit was asked");
        assert!(
            asked["caller"].starts_with("exe:/usr/bin/gdbus (PID "),
            "{asked:?}"
        );
        assert!(
            asked["summary"].contains(&format!("\"deny\" to {me}'s question about location"))
                && asked["summary"].contains("as asked by exe:/usr/bin/gdbus"),
            "{asked:?}"
        );
        assert_eq!(asked["app"], me);
        assert_eq!(asked["categories"], "location");
    })
    .await
}

/// A file is anyone's to write: an import from the user's own tool keeps
/// what it says as an import, dated no later than the import, never as a
/// prompt's answer from 2099 (which would outrank every decision the user
/// makes until then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_decisions_are_imports_dated_no_later_than_now() {
    with_timeout(60, async {
        let Desk { bus, .. } = &desk("").await;
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .import(&forged_export("org.example.Imported"))
            .await
            .expect("imported");
        let grants: Vec<serde_json::Value> = consent
            .list_grants()
            .await
            .expect("grants")
            .iter()
            .map(dict_to_json)
            .collect();
        let g = grants
            .iter()
            .find(|g| g["app_id"] == "org.example.Imported")
            .expect("the import is there");
        assert_eq!(g["origin"], "import", "{g}");
        let created = g["created"].as_str().expect("created");
        let created = chrono::DateTime::parse_from_rfc3339(created).expect("a time");
        assert!(
            created <= chrono::Utc::now(),
            "an imported decision is dated in the future: {created}"
        );
    })
    .await
}

/// Tokens are the user's too: a Flatpak app whose manifest gives it the
/// broker's runtime directory (`--filesystem=xdg-run/contextd`) reaches
/// the admin socket, and is refused there as on D-Bus: no token is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flatpak_app_with_the_runtime_directory_makes_no_token() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _d = Daemon::start(&bus, &home, &[]).await;
        let run = home.dir.path().join("run/contextd");
        let socket = run.join("admin.sock");
        let app = Flatpak::start(&bus, SNEAKY);
        let script = format!(
            "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({:?})\n\
             s.sendall(b'{{\"op\":\"token-create\",\"name\":\"sneaky\"}}\\n')\n\
             print(s.makefile().readline())",
            socket.display().to_string()
        );
        let out = app
            .command_with("python3", &["-c", &script], &[&run])
            .output()
            .expect("python3 in the sandbox");
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(
            answer.contains("\"ok\":false") && answer.contains("sandbox"),
            "the sandboxed app reached token management: {answer} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The user's own contextctl still manages tokens, and none is
        // named after the app's request.
        let (ok, list, err) = crate::mcp_support::contextctl(&bus, &home, &["token", "list"]);
        assert!(ok, "{err}");
        assert!(!list.contains("sneaky"), "{list}");
    })
    .await
}
