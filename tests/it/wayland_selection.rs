//! `selection` follows the primary selection of a real headless sway
//! (zwlr_data_control_manager_v1 v2) that `wl-copy --primary` sets: a
//! caller granted `selection` reads it with `GetSelection`; a caller
//! without the grant gets an error and nothing; no `Changed` signal carries
//! the text (the test app subscribes to every category it may); nothing of
//! it is in the timeline (read from the decrypted database after the stop).

use crate::common;
use crate::fdo;

use std::process::{Child, Command, Stdio};

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use fdo::Changes;
use serde_json::Value;

const TEXT: &str = "CANARY-PRIMARY-SELECTION: the quick brown fox";

/// `wl-copy --foreground --primary TEXT` in `session` (the one of `root`,
/// through scripts/in-root.sh, if given), killed on drop.
struct WlCopy(Child);

impl WlCopy {
    fn start(session: &Session, root: Option<&str>, text: &str) -> WlCopy {
        let mut cmd = match root {
            Some(r) => {
                let mut c = Command::new(crate::common::root().join("scripts/in-root.sh"));
                c.args([r, "wl-copy"]);
                c
            }
            None => Command::new("wl-copy"),
        };
        cmd.args(["--foreground", "--primary", text]).env_clear();
        session.apply(&mut cmd);
        cmd.env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        WlCopy(
            cmd.spawn()
                .expect("wl-copy (Debian wl-clipboard, make deps)"),
        )
    }
}

impl Drop for WlCopy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_selection_with_the_grant_only_and_never_in_signals_or_history() {
    get_selection_with_the_grant_only_and_never_in_signals_or_history_in(
        None,
        "zwlr_data_control_manager_v1 v2",
    )
    .await;
}

/// The whole acceptance on the sway of `root` (a root of scripts/roots.sh,
/// its wl-copy too) or the host's; the broker follows the selection
/// through `protocol` (as its log names it: `INTERFACE vVERSION`).
pub(crate) async fn get_selection_with_the_grant_only_and_never_in_signals_or_history_in(
    root: Option<&str>,
    protocol: &str,
) {
    with_timeout(180, async {
        // With its demo windows, so that the timeline has rows.
        let mut args = vec!["--no-pipewire"];
        if let Some(r) = root {
            args.extend(["--root", r]);
        }
        let session = Session::start(&args);
        let home = Home::new();
        let all: Vec<String> = contextd::model::Category::fixed()
            .iter()
            .map(ToString::to_string)
            .collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        home.write_policy(&[(&my_app_id(), &all)]);
        let mut d = Daemon::start_in_session(&session, &home, &[]).await;
        let address = session
            .get("DBUS_SESSION_BUS_ADDRESS")
            .expect("session bus")
            .to_owned();
        let conn = connect_to(&address).await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");
        let src = eventually(15, "the selection source available", || async {
            fdo::source(&conn, "selection")
                .await
                .filter(|s| s["available"] == true)
        })
        .await;
        assert!(src.get("last_error").is_none(), "{src}");

        // Every signalled category the test app may read.
        let cats = [
            "windows",
            "media.playback",
            "media.capture",
            "session",
            "power",
            "network",
            "notifications",
            "documents.recent",
            "location",
            "selection",
        ];
        let mut changes = Changes::subscribe(&conn, &cats).await;

        let log = d.stderr();
        assert!(
            log.contains(&format!(
                "following the primary selection through {protocol}"
            )),
            "not through {protocol}: {log}"
        );

        let _copy = WlCopy::start(&session, root, TEXT);
        let sel = eventually(15, "the selection read", || async {
            ctx.get_selection()
                .await
                .ok()
                .map(|d| dict_to_json(&d))
                .filter(|s| s["text"] == TEXT)
        })
        .await;
        assert_eq!(sel["@type"], "Quotation", "{sel}");
        assert_eq!(sel["mime_type"], "text/plain;charset=utf-8", "{sel}");
        assert_eq!(sel["length"], TEXT.chars().count() as u64, "{sel}");
        assert_eq!(sel["truncated"], false, "{sel}");

        // A caller without the grant (busctl, another app id): an error,
        // and nothing of the text.
        let mut busctl = Command::new("busctl");
        busctl
            .args(["--address", &address, "--json=short", "call"])
            .args([BUS_NAME, PATH, "org.contextd.Context1", "GetSelection"]);
        let (st, out, err) = run_cmd(&mut busctl, 20);
        assert!(!st.success(), "busctl was given the selection: {out}");
        assert!(err.contains("may not read 'selection'"), "{err}");
        assert!(
            !out.contains("CANARY") && !err.contains("CANARY"),
            "{out}{err}"
        );

        // Let the snapshot and the MCP view of this app be read too: the
        // snapshot never has it.
        let snap = fdo::snapshot(&conn).await;
        assert!(!snap.to_string().contains("CANARY"), "{snap}");

        // No Changed signal carried it (drained until quiet).
        let mut seen: Vec<(String, Value)> = Vec::new();
        while let Some(c) = changes.none_within(500).await {
            seen.push(c);
        }
        let text = format!("{seen:?}");
        assert!(
            !text.contains("CANARY"),
            "a Changed signal carries the selection: {text}"
        );

        // Stop the broker (the timeline is written), and look in the
        // decrypted database.
        d.signal(libc::SIGTERM);
        assert!(
            d.wait_exit(std::time::Duration::from_secs(20)).is_some(),
            "the broker did not stop"
        );
        let db = open_db(&home).await;
        let rows: Vec<String> = sqlx::query_scalar(
            "SELECT kind || ' ' || coalesce(app_id, '') || ' ' || coalesce(title, '') || ' '
                 || coalesce(detail, '') FROM history",
        )
        .fetch_all(db.pool())
        .await
        .expect("history rows");
        db.pool().close().await;
        assert!(!rows.is_empty(), "the timeline recorded nothing at all");
        let text = format!("{rows:?}");
        assert!(
            !text.contains("CANARY"),
            "the selection is in the timeline: {text}"
        );
    })
    .await;
}
