//! `documents.recent` follows `$XDG_DATA_HOME/recently-used.xbel` as a real
//! GTK 3 app writes it (python3-gi, `Gtk.RecentManager.add_item`, in a
//! headless sway session because GTK reads its settings from a display):
//! a granted reader sees a file GTK added; a file under an excluded path
//! (`~/.ssh`, a default) never shows, neither in the list nor in the
//! timeline; a malformed file is logged once and the last good list stays.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::session::Session;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Context1Proxy, History1Proxy};
use serde_json::Value;

/// `tests/recent/gtk_add.py PATHS` as a GTK app of `session`, with the
/// broker's `HOME` and `XDG_DATA_HOME`.
fn gtk_add(session: &Session, home: &Home, paths: &[&Path]) {
    let script = &crate::common::repo_file("tests/recent/gtk_add.py");
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(script).args(paths).env_clear();
    session.apply(&mut cmd);
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.dir.path())
        .env("XDG_DATA_HOME", home.dir.path().join("data"))
        .env("NO_AT_BRIDGE", "1");
    let (st, out, err) = run_cmd(&mut cmd, 60);
    assert!(st.success(), "gtk_add.py {paths:?} failed:\n{out}\n{err}");
}

async fn documents(ctx: &Context1Proxy<'_>) -> Vec<Value> {
    within(10, "ListRecentDocuments", ctx.list_recent_documents())
        .await
        .expect("ListRecentDocuments")
        .iter()
        .map(dict_to_json)
        .collect()
}

async fn recent_source(ctx: &Context1Proxy<'_>) -> Value {
    within(10, "ListSources", ctx.list_sources())
        .await
        .expect("ListSources")
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == "recent")
        .unwrap_or(Value::Null)
}

/// The `recent` source as the user's own tool reads it (`contextctl
/// sources --json`, with the error as it is; an app reads only that it
/// failed, since a parse error can quote the file).
fn recent_source_ctl(address: &str) -> Value {
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .env("DBUS_SESSION_BUS_ADDRESS", address)
            .args(["sources", "--json"]),
        30,
    );
    assert!(st.success(), "contextctl sources: {err}");
    let v: Value = serde_json::from_str(&out).expect("JSON");
    v.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "recent").cloned())
        .unwrap_or(Value::Null)
}

/// Replace the file by rename, as GTK does.
fn write_xbel(home: &Home, text: &str) {
    let data = home.dir.path().join("data");
    let tmp = data.join("recently-used.xbel.tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, data.join("recently-used.xbel")).expect("rename");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gtk_recent_files_show_excluded_paths_never_and_bad_files_keep_the_list() {
    with_timeout(180, async {
        let session = Session::start(&["--no-pipewire", "--no-windows"]);
        let home = Home::new();
        let h = home.dir.path();
        std::fs::create_dir_all(h.join(".ssh")).expect("mkdir");
        let notes = h.join("notes one.txt");
        let later = h.join("later.md");
        let key = h.join(".ssh/id_canary");
        for f in [&notes, &later, &key] {
            std::fs::write(f, "x").expect("write");
        }
        home.write_policy(&[(&my_app_id(), &["documents.recent", "history"])]);
        let d = Daemon::start_in_session(&session, &home, &[]).await;
        let address = session
            .get("DBUS_SESSION_BUS_ADDRESS")
            .expect("session bus")
            .to_owned();
        let conn = connect_to(&address).await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");
        let hist = History1Proxy::new(&conn).await.expect("History1");
        eventually(15, "the recent source available", || async {
            (recent_source(&ctx).await["available"] == true).then_some(())
        })
        .await;

        // A GTK app adds a file: the reader sees it, with its type and app.
        gtk_add(&session, &home, &[&notes]);
        let docs = eventually(10, "the GTK file listed", || async {
            let docs = documents(&ctx).await;
            docs.iter()
                .any(|d| d["path"] == notes.display().to_string())
                .then_some(docs)
        })
        .await;
        let first = &docs[0];
        assert_eq!(first["name"], "notes one.txt", "{docs:?}");
        assert!(
            first["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with("file:///") && u.ends_with("/notes%20one.txt")),
            "{first}"
        );
        assert_eq!(first["mime_type"], "text/plain", "{first}");
        assert_eq!(first["app"], "gtk_add.py", "{first}");

        // A key under ~/.ssh, then another file: the key never shows.
        gtk_add(&session, &home, &[&key]);
        gtk_add(&session, &home, &[&later]);
        let docs = eventually(10, "the later file listed", || async {
            let docs = documents(&ctx).await;
            (docs.first().map(|d| &d["name"]) == Some(&Value::from("later.md"))).then_some(docs)
        })
        .await;
        let text = serde_json::to_string(&docs).unwrap_or_default();
        assert!(
            !text.contains("id_canary"),
            "an excluded path shows: {text}"
        );
        assert!(text.contains("notes one.txt"), "{text}");
        let xbel = std::fs::read_to_string(h.join("data/recently-used.xbel")).expect("xbel");
        assert!(xbel.contains("id_canary"), "GTK did write it: {xbel}");

        // The timeline records what was used after the list was read, the
        // key never.
        let rows = eventually(15, "the later file in the timeline", || async {
            let (events, _) = hist
                .query(0, 0, &["documents.recent"], &[], 1000, "")
                .await
                .ok()?;
            let rows: Vec<Value> = events.iter().map(dict_to_json).collect();
            rows.iter()
                .any(|r| r["title"] == "later.md")
                .then_some(rows)
        })
        .await;
        let text = serde_json::to_string(&rows).unwrap_or_default();
        assert!(
            !text.contains("id_canary"),
            "an excluded path in the timeline: {text}"
        );
        assert!(
            rows.iter().all(|r| r["kind"] == "recent-document"),
            "{text}"
        );

        // A malformed file: logged once, the last good list stays, and
        // ListSources says why.
        write_xbel(&home, "<xbel><bookmark href=\"file:///broken\"></xbel>");
        let src = eventually(10, "the error in ListSources", || async {
            let s = tokio::task::block_in_place(|| recent_source_ctl(&address));
            s["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("line"))
                .then_some(s)
        })
        .await;
        assert_eq!(src["available"], true, "{src}");
        // An app reads that the file is bad, not what is in it.
        let app_view = recent_source(&ctx).await;
        assert!(
            app_view["last_error"]
                .as_str()
                .is_some_and(|e| !e.contains("line") && !e.contains("broken")),
            "{app_view}"
        );
        write_xbel(&home, "not xml");
        eventually(10, "the second error in ListSources", || async {
            let s = tokio::task::block_in_place(|| recent_source_ctl(&address));
            s["last_error"]
                .as_str()
                .is_some_and(|e| Some(e) != src["last_error"].as_str())
                .then_some(())
        })
        .await;
        let docs = documents(&ctx).await;
        assert_eq!(
            docs.first().map(|d| d["name"].clone()),
            Some(Value::from("later.md")),
            "the last good list: {docs:?}"
        );
        let warnings = d.stderr().matches("keeping the last good list").count();
        assert_eq!(warnings, 1, "logged once:\n{}", d.stderr());

        // GTK writes a good file again: back to normal.
        gtk_add(&session, &home, &[&notes]);
        eventually(10, "the error gone", || async {
            let s = recent_source(&ctx).await;
            (s["available"] == true && s.get("last_error").is_none()).then_some(())
        })
        .await;
    })
    .await;
}
