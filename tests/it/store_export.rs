//! Your data is yours (issue 32): `contextctl export --history` on one
//! machine, `contextctl import` on a fresh one (a new HOME: new key, new
//! database) gives the same `contextctl consent list` and the same
//! `History1.Summary`; a bad line is an error naming it, and changes
//! nothing.

use crate::common;
use crate::history::{DAY, day, t};

use std::process::Command;

use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, History1Proxy};
use serde_json::Value;

struct Machine {
    bus: Bus,
    sys: Bus,
    _polkit: Mock,
    home: Home,
    _daemon: Daemon,
    _replay: Replay,
}

async fn machine(replay_lines: &[String]) -> Machine {
    let bus = Bus::start();
    let sys = Bus::start();
    let polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
    let home = Home::new();
    home.write_policy(&[(
        &my_app_id(),
        &["history", "windows.titles", "media.capture", "session"],
    )]);
    let mut replay = Replay::new(&home);
    for l in replay_lines {
        replay.send(l);
    }
    let daemon = Daemon::start_with(
        &bus,
        &home,
        &["--replay", &replay.arg(), "--fake-clock", DAY],
        &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
    )
    .await;
    Machine {
        bus,
        sys,
        _polkit: polkit,
        home,
        _daemon: daemon,
        _replay: replay,
    }
}

fn ctl(m: &Machine, args: &[&str]) -> (bool, String, String) {
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .args(args)
            .env_clear()
            .envs(m.home.envs(&m.bus))
            .env("DBUS_SYSTEM_BUS_ADDRESS", &m.sys.address),
        30,
    );
    (st.success(), out, err)
}

async fn summary(m: &Machine) -> Vec<Value> {
    let conn = m.bus.connect().await;
    let h = History1Proxy::new(&conn).await.expect("proxy");
    h.summary(t("08:00").timestamp(), t("16:00").timestamp())
        .await
        .expect("summary")
        .iter()
        .map(dict_to_json)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_to_a_fresh_machine_and_import_gives_the_same_decisions_and_summary() {
    with_timeout(120, async {
        let a = machine(&day()).await;
        let conn = a.bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent
            .set_grant("org.example.Allowed", "windows", "allow", 0)
            .await
            .expect("grant");
        consent
            .set_grant("org.example.Denied", "session", "deny", 0)
            .await
            .expect("deny");
        consent
            .set_publishing("org.example.Noisy", false)
            .await
            .expect("refuse");
        let (ok, _, err) = ctl(&a, &["token", "create", "laptop-host"]);
        assert!(ok, "{err}");
        let before = eventually(10, "the day is recorded", || async {
            let s = summary(&a).await;
            (s.len() >= 3).then_some(s)
        })
        .await;
        let (ok, list_a, err) = ctl(&a, &["consent", "list"]);
        assert!(ok, "{err}");

        let (ok, export, err) = ctl(&a, &["export", "--history"]);
        assert!(ok, "{err}");
        let first: Value =
            serde_json::from_str(export.lines().next().unwrap_or("")).expect("header");
        assert_eq!(first["format"], "contextd-export");
        assert_eq!(first["version"], 1);
        assert!(export.contains("\"laptop-host\""), "token names are listed");
        assert!(!export.contains("hmac"), "a token secret was exported");

        // A fresh machine: nothing recorded, a new key and database.
        let b = machine(&[]).await;
        let file = b.home.dir.path().join("backup.jsonl");

        // A bad line: an error naming it, nothing imported.
        let mut bad = export.clone();
        bad.push_str("{\"type\":\"decision\",\"app_id\":\"org.x\"}\n");
        std::fs::write(&file, &bad).expect("write");
        let (ok, _, err) = ctl(&b, &["import", &file.display().to_string()]);
        assert!(!ok, "a bad file was imported");
        let n = bad.lines().count();
        assert!(err.contains(&format!("line {n}")), "{err}");
        assert!(
            summary(&b).await.is_empty(),
            "a bad import changed the timeline"
        );

        std::fs::write(&file, &export).expect("write");
        let (ok, out, err) = ctl(&b, &["import", &file.display().to_string()]);
        assert!(ok, "{err}");
        eprintln!("{out}");
        assert!(out.contains("laptop-host"), "{out}");
        let (ok, list_b, err) = ctl(&b, &["consent", "list"]);
        assert!(ok, "{err}");
        // The decisions table (the apps that asked, with when they were
        // last seen, are this machine's own and not exported), each
        // decision now shown as an import: a file's word for who decided
        // is a claim (issue 47).
        let decisions = |l: &str| l.split("\n\n").next().unwrap_or("").to_owned();
        let words = |l: &str| -> Vec<String> {
            l.split_whitespace()
                .map(|w| w.to_owned())
                .filter(|w| {
                    !["you,", "in", "a", "prompt", "you", "an", "import"].contains(&w.as_str())
                })
                .collect()
        };
        assert_eq!(words(&decisions(&list_b)), words(&decisions(&list_a)));
        assert!(
            decisions(&list_b).contains("an import") && !decisions(&list_b).contains("prompt"),
            "{list_b}"
        );
        assert!(list_a.contains("org.example.Denied"), "{list_a}");
        assert_eq!(summary(&b).await, before);

        // Importing twice adds nothing.
        let (ok, _, err) = ctl(&b, &["import", &file.display().to_string()]);
        assert!(ok, "{err}");
        assert_eq!(summary(&b).await, before);
    })
    .await
}
