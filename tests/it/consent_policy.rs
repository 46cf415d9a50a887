//! The consent gate with policy.toml: a grant lets busctl read, no grant
//! gives NotAllowed with how to grant, edits apply live, a broken file keeps
//! the last good policy and says where the error is (to `contextctl` only:
//! other callers read that it failed, not the file's lines).

use crate::common;

use std::process::Command;

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::Context1Proxy;
use serde_json::Value;

fn busctl(bus: &Bus, args: &[&str]) -> (i32, String, String) {
    let (st, out, err) = run_cmd(
        Command::new("busctl")
            .arg(format!("--address={}", bus.address))
            .args(["call", BUS_NAME, PATH, "org.contextd.Context1"])
            .args(args),
        20,
    );
    (st.code().unwrap_or(-1), out, err)
}

fn replay_file(home: &Home) -> String {
    let p = home.dir.path().join("replay.jsonl");
    let lines = [
        window_line("w1", "org.gnome.TextEditor", "notes.txt", false),
        window_line("w2", "org.mozilla.firefox", "Breaking news", true),
    ];
    std::fs::write(&p, lines.join("\n")).expect("write replay");
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busctl_with_grant_reads_the_active_window_and_without_gets_not_allowed() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let replay = replay_file(&home);
        let _d = Daemon::start(&bus, &home, &["--replay", &replay]).await;

        // No grant: NotAllowed, naming the app, the category and the fix.
        let (code, _out, err) = busctl(&bus, &["GetActiveWindow"]);
        assert_ne!(code, 0);
        assert!(
            err.contains("exe:/usr/bin/busctl")
                && err.contains("windows")
                && err.contains("policy.toml"),
            "{err}"
        );
        let conn = bus.connect().await;
        let p = Context1Proxy::new(&conn).await.expect("proxy");
        match p.get_active_window().await {
            Err(zbus::Error::MethodError(name, _, _)) => {
                assert_eq!(name.as_str(), "org.contextd.Error.NotAllowed")
            }
            other => panic!("expected NotAllowed, got {other:?}"),
        }

        // Grant busctl `windows` (not titles): the replayed active window, no title.
        home.write_policy(&[
            ("exe:/usr/bin/busctl", &["windows"]),
            (&my_app_id(), &["windows"]),
        ]);
        let out = eventually(10, "grant applies", || async {
            let (code, out, _) = busctl(&bus, &["GetActiveWindow"]);
            (code == 0).then_some(out)
        })
        .await;
        assert!(
            out.contains("\"org.mozilla.firefox\"") && out.contains("\"w2\""),
            "{out}"
        );
        assert!(
            !out.contains("Breaking news"),
            "title leaked without windows.titles: {out}"
        );
        let windows = p.list_windows().await.expect("list");
        assert_eq!(windows.len(), 2);
        assert!(windows.iter().all(|w| !w.contains_key("title")));

        // With windows.titles, titles appear.
        home.write_policy(&[(&my_app_id(), &["windows.titles"])]);
        let windows = eventually(10, "titles granted", || async {
            let w = p.list_windows().await.ok()?;
            w.iter().all(|w| w.contains_key("title")).then_some(w)
        })
        .await;
        let titles: Vec<Value> = windows
            .iter()
            .map(|w| dict_to_json(w)["title"].clone())
            .collect();
        assert_eq!(
            titles,
            vec![Value::from("notes.txt"), Value::from("Breaking news")]
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_policy_keeps_the_last_good_one_and_names_the_line() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let replay = replay_file(&home);
        let _d = Daemon::start(&bus, &home, &["--replay", &replay]).await;
        let conn = bus.connect().await;
        let p = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "active window", || async {
            p.get_active_window().await.ok()
        })
        .await;

        home.write_policy_text(
            "[[grant]]\napp = \"x.y\"\ncategories = [\"windows\", \"no-such\"]\n",
        );
        let err = eventually(10, "policy error reported", || async {
            let sources = p.list_sources().await.ok()?;
            sources
                .iter()
                .map(dict_to_json)
                .find(|s| s["name"] == "policy")
                .and_then(|s| {
                    s.get("last_error")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
        })
        .await;
        // An app (this test program) reads that the source failed, not the
        // file's path nor its lines.
        assert!(
            !err.contains("policy.toml")
                && !err.contains("no-such")
                && !err.contains(&home.dir.path().display().to_string()),
            "an app read the policy error: {err}"
        );
        // The user's own tool reads the error as it is.
        let (st, out, stderr) = run_cmd(
            Command::new(contextctl_bin())
                .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
                .args(["sources", "--json"]),
            30,
        );
        assert!(st.success(), "contextctl sources: {stderr}");
        let sources: Value = serde_json::from_str(&out).expect("JSON");
        let err = sources
            .as_array()
            .and_then(|v| v.iter().find(|s| s["name"] == "policy"))
            .and_then(|s| s["last_error"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            err.contains("policy.toml:3:") && err.contains("no-such"),
            "{out}"
        );
        // The last good policy is still in force.
        assert!(p.get_active_window().await.is_ok());

        // Fixing the file clears the error; removing the grant denies at once.
        home.write_policy(&[("org.other.App", &["windows"])]);
        eventually(10, "grant removed", || async {
            p.get_active_window().await.is_err().then_some(())
        })
        .await;
        let sources = p.list_sources().await.expect("sources");
        let policy = sources
            .iter()
            .map(dict_to_json)
            .find(|s| s["name"] == "policy")
            .expect("policy source");
        assert!(policy.get("last_error").is_none(), "{policy}");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_lists_withheld_categories_and_bad_arguments_are_typed() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let replay = replay_file(&home);
        let _d = Daemon::start(&bus, &home, &["--replay", &replay]).await;
        let conn = bus.connect().await;
        let p = Context1Proxy::new(&conn).await.expect("proxy");
        let snap = eventually(10, "snapshot with windows", || async {
            let s = dict_to_json(&p.get_snapshot().await.ok()?);
            (s["windows"].as_array()?.len() == 2).then_some(s)
        })
        .await;
        let withheld: Vec<&str> = snap["withheld"]
            .as_array()
            .expect("withheld")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for c in [
            "windows.titles",
            "media.capture",
            "session",
            "notifications",
        ] {
            assert!(withheld.contains(&c), "{c} not withheld: {snap}");
        }
        assert!(!withheld.contains(&"windows"));
        assert!(!snap.to_string().contains("notes.txt"));

        let cats: Vec<Value> = p
            .list_categories()
            .await
            .expect("categories")
            .iter()
            .map(dict_to_json)
            .collect();
        let windows = cats
            .iter()
            .find(|c| c["name"] == "windows")
            .expect("windows");
        assert_eq!(windows["allowed"], Value::Bool(true));
        assert!(
            cats.iter()
                .all(|c| !c["description"].as_str().unwrap_or("").is_empty())
        );

        for (args, want) in [
            (vec!["nope"], "org.contextd.Error.InvalidArgs"),
            (vec![], "org.contextd.Error.InvalidArgs"),
            (vec!["power"], "org.contextd.Error.NotAllowed"),
        ] {
            match p.subscribe(&args).await {
                Err(zbus::Error::MethodError(name, msg, _)) => {
                    assert_eq!(name.as_str(), want, "{args:?}: {msg:?}")
                }
                other => panic!("{args:?}: expected {want}, got {other:?}"),
            }
        }
        // The daemon is unaffected.
        assert!(p.get_active_window().await.is_ok());
    })
    .await
}
