//! The timeline: a scripted day gives the right intervals, totals and
//! stable pages; excluded apps, private windows and paused time never reach
//! the database; Forget overwrites; retention purges. (A crash losing at
//! most the last second: tests/it/faults_kill.rs.)

use crate::common;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::dbusmock::Mock;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy, History1Proxy};
use serde_json::{Value, json};

pub(crate) const DAY: &str = "2026-11-21T08:00:00Z";

pub(crate) fn t(hhmm: &str) -> DateTime<Utc> {
    format!("2026-11-21T{hhmm}:00Z").parse().expect("time")
}

fn clock(hhmm: &str) -> String {
    json!({"type": "clock", "at": t(hhmm)}).to_string()
}

fn focus(id: &str) -> String {
    json!({"type": "focus", "id": id}).to_string()
}

fn win(id: &str, app: &str, title: &str) -> String {
    json!({"type": "window", "window": {"id": id, "app_id": app, "title": title}}).to_string()
}

/// 09:00-10:30 editor, 10:30-11:00 browser, 11:00 password manager,
/// 11:10 a private window, 11:20-15:00 editor; microphone 12:00-12:30;
/// locked 13:00-14:00; 15:00 nothing focused.
pub(crate) fn day() -> Vec<String> {
    vec![
        win("ed", "org.gnome.TextEditor", "report.odt"),
        win("fx", "org.mozilla.firefox", "News"),
        win("kp", "org.keepassxc.KeePassXC", "vault.kdbx"),
        win("pv", "org.mozilla.firefox", "Mozilla Firefox Private Browsing"),
        clock("09:00"),
        focus("ed"),
        clock("10:30"),
        focus("fx"),
        clock("11:00"),
        focus("kp"),
        clock("11:10"),
        focus("pv"),
        clock("11:20"),
        focus("ed"),
        clock("12:00"),
        json!({"type": "stream", "stream": {"id": "pw-1-5", "kind": "microphone", "app_id": "exe:/usr/bin/pw-record", "pid": 42, "state": "running"}}).to_string(),
        clock("12:30"),
        json!({"type": "stream-removed", "id": "pw-1-5"}).to_string(),
        clock("13:00"),
        json!({"type": "session", "session": {"active": true, "locked": true}}).to_string(),
        clock("14:00"),
        json!({"type": "session", "session": {"active": true, "locked": false}}).to_string(),
        clock("15:00"),
        focus("none"),
        clock("16:00"),
    ]
}

async fn query_all(h: &History1Proxy<'_>, limit: u32) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let (events, next) = h
            .query(
                t("08:00").timestamp(),
                t("16:00").timestamp(),
                &[],
                &[],
                limit,
                &cursor,
            )
            .await
            .expect("query");
        assert!(events.len() <= limit as usize);
        out.extend(events.iter().map(dict_to_json));
        if next.is_empty() {
            return out;
        }
        cursor = next;
    }
}

fn key_of(home: &Home) -> (contextd::internals::store::DbKey, std::path::PathBuf) {
    let key_file = home.dir.path().join("state/contextd/db.key");
    let key = contextd::internals::store::DbKey::parse(&std::fs::read(&key_file).expect("key"))
        .expect("key");
    (key, key_file)
}

async fn rows(home: &Home, sql: &'static str) -> i64 {
    let (key, key_file) = key_of(home);
    let (db, _t) = contextd::internals::store::Db::open(
        &home.db_path(),
        &key,
        &contextd::internals::store::KeySource::KeyFile(key_file),
    )
    .await
    .expect("open");
    let n: i64 = sqlx::query_scalar(sql)
        .fetch_one(db.pool())
        .await
        .expect("query");
    db.pool().close().await;
    n
}

/// Decrypt every page of the SQLCipher file (AES-256-CBC, raw key, 80
/// reserved bytes: IV then HMAC) with openssl, and return the plaintext.
fn decrypted_pages(home: &Home) -> Vec<u8> {
    let (key, _) = key_of(home);
    let file = std::fs::read(home.db_path()).expect("db");
    let page = 4096;
    let mut out = Vec::new();
    for (i, p) in file.chunks(page).enumerate() {
        if p.len() < page {
            break;
        }
        let start = if i == 0 { 16 } else { 0 };
        let data = &p[start..page - 80];
        let iv: String = p[page - 80..page - 64]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = tempfile::tempdir().expect("tmp");
        let inp = dir.path().join("in");
        std::fs::write(&inp, data).expect("write");
        let (st, _o, e) = run_cmd(
            Command::new("openssl")
                .args([
                    "enc",
                    "-d",
                    "-aes-256-cbc",
                    "-nopad",
                    "-K",
                    &key.hex(),
                    "-iv",
                    &iv,
                    "-in",
                ])
                .arg(&inp)
                .args(["-out"])
                .arg(dir.path().join("out")),
            10,
        );
        assert!(st.success(), "openssl: {e}");
        out.extend(std::fs::read(dir.path().join("out")).expect("out"));
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_day_queries_summarises_pages_and_forgets() {
    with_timeout(120, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["history", "windows.titles", "media.capture", "session"])]);
        let mut replay = Replay::new(&home);
        for l in day() {
            replay.send(&l);
        }
        let mut d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &replay.arg(), "--fake-clock", DAY],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let conn = bus.connect().await;
        let h = History1Proxy::new(&conn).await.expect("proxy");
        assert!(h.recording().await.expect("prop"));

        let all = eventually(10, "the day is recorded", || async {
            let all = query_all(&h, 1000).await;
            (all.len() == 5).then_some(all)
        })
        .await;
        let got: Vec<(String, String, String, String)> = all
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap_or("").to_owned(),
                    e["app_id"].as_str().unwrap_or("").to_owned(),
                    e["start"].as_str().unwrap_or("").to_owned(),
                    e["end"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let iso = |h: &str| format!("2026-11-21T{h}:00.000Z");
        assert_eq!(
            got,
            vec![
                ("focus".into(), "org.gnome.TextEditor".into(), iso("09:00"), iso("10:30")),
                ("focus".into(), "org.mozilla.firefox".into(), iso("10:30"), iso("11:00")),
                ("focus".into(), "org.gnome.TextEditor".into(), iso("11:20"), iso("15:00")),
                ("capture".into(), "exe:/usr/bin/pw-record".into(), iso("12:00"), iso("12:30")),
                ("locked".into(), "".into(), iso("13:00"), iso("14:00")),
            ]
        );
        assert_eq!(all[0]["title"], "report.odt");
        assert_eq!(all[3]["detail"]["device"], "microphone");

        // Pages of two: complete, in order, no repeats; the same twice.
        let paged = query_all(&h, 2).await;
        assert_eq!(paged, all);
        assert_eq!(query_all(&h, 2).await, paged);

        let summary: Vec<Value> = h
            .summary(t("08:00").timestamp(), t("16:00").timestamp())
            .await
            .expect("summary")
            .iter()
            .map(dict_to_json)
            .collect();
        let of = |app: &str| summary.iter().find(|s| s["app_id"] == app).cloned().unwrap_or(Value::Null);
        assert_eq!(of("org.gnome.TextEditor")["focus_s"], json!(5.0 * 3600.0 + 600.0));
        assert_eq!(of("org.mozilla.firefox")["focus_s"], json!(1800.0));
        assert_eq!(of("exe:/usr/bin/pw-record")["capture_s"], json!(1800.0));
        assert_eq!(summary[0]["app_id"], "org.gnome.TextEditor", "most focused first");

        // Paused: nothing is recorded.
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        consent.set_paused(true).await.expect("pause");
        eventually(5, "Recording goes false", || async {
            (!h.recording().await.ok()?).then_some(())
        })
        .await;
        replay.send(&clock("16:10"));
        replay.send(&focus("ed"));
        replay.send(&clock("16:20"));
        // The daemon reads the FIFO on its own time: resume only once it
        // has applied the paused lines (a status for a made-up source,
        // after them in the same feed, shows in ListSources), or the
        // focus at 16:10 could be applied after the resume and recorded.
        replay.send(&json!({"type": "source-status", "source": "mark-paused", "available": true}).to_string());
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        eventually(10, "the paused lines applied", || async {
            let sources = ctx.list_sources().await.ok()?;
            sources.iter().map(dict_to_json).any(|s| s["name"] == "mark-paused").then_some(())
        })
        .await;
        consent.set_paused(false).await.expect("resume");

        // A planted title in the last hour, then Forget the last hour.
        replay.send(&win("pl", "org.example.Notes", "PLANTED-FORGET-ME-42"));
        replay.send(&clock("16:30"));
        replay.send(&focus("pl"));
        replay.send(&clock("16:50"));
        replay.send(&focus("none"));
        replay.send(&clock("17:00"));
        let h2 = &h;
        eventually(10, "planted event recorded", || async move {
            let (ev, _) = h2
                .query(t("16:00").timestamp(), t("17:00").timestamp(), &[], &[], 100, "")
                .await
                .ok()?;
            (ev.len() == 1).then_some(())
        })
        .await;
        // Let the batch land, then stop so that every page is in the file.
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        assert!(contains(&decrypted_pages(&home), "PLANTED-FORGET-ME-42"), "control: decryption works");
        assert_eq!(rows(&home, "SELECT count(*) FROM history WHERE app_id LIKE '%keepass%' OR title LIKE '%Private%'").await, 0);
        assert_eq!(rows(&home, "SELECT count(*) FROM history WHERE start_ms >= 1763741400000 AND start_ms < 1763742600000").await, 0, "paused time");
        let before = rows(&home, "SELECT count(*) FROM history").await;

        let _d = Daemon::start_with(
            &bus,
            &home,
            &["--replay", &home.dir.path().join("none.jsonl").display().to_string(), "--fake-clock", "2026-11-21T17:00:00Z"],
            &[("DBUS_SYSTEM_BUS_ADDRESS", &sys.address)],
        )
        .await;
        let h = History1Proxy::new(&conn).await.expect("proxy");
        let removed = h
            .forget(t("16:00").timestamp(), t("17:00").timestamp(), &[], &[])
            .await
            .expect("forget");
        assert_eq!(removed, 1);
        let (ev, _) = h.query(t("08:00").timestamp(), t("17:00").timestamp(), &[], &[], 100, "").await.expect("q");
        assert_eq!(ev.len() as i64, before - 1);
        let pages = decrypted_pages(&home);
        assert!(!contains(&pages, "PLANTED-FORGET-ME-42"), "the forgotten title is still in the file");
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_purges_old_events_and_readers_need_history() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let r = home.dir.path().join("day.jsonl");
        std::fs::write(&r, day().join("\n")).expect("replay");
        let mut d = Daemon::start(
            &bus,
            &home,
            &["--replay", &r.display().to_string(), "--fake-clock", DAY],
        )
        .await;
        let conn = bus.connect().await;
        let h = History1Proxy::new(&conn).await.expect("proxy");
        // Without `history`: refused, even with `windows`.
        assert_eq!(
            error_name(h.query(0, 0, &[], &[], 10, "").await),
            "org.contextd.Error.NotAllowed"
        );
        assert_eq!(
            error_name(h.query(0, 0, &[], &[], 10, "not-a-cursor").await),
            "org.contextd.Error.InvalidArgs"
        );
        // An inverted period is an error, not an empty answer.
        assert_eq!(
            error_name(h.query(2_000_000, 1_000_000, &[], &[], 10, "").await),
            "org.contextd.Error.InvalidArgs"
        );
        assert_eq!(
            error_name(h.summary(2_000_000, 1_000_000).await),
            "org.contextd.Error.InvalidArgs"
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        assert!(rows(&home, "SELECT count(*) FROM history").await >= 5);

        // Twenty days later the purge at start removes them (14 days kept).
        let empty = home.dir.path().join("empty.jsonl");
        std::fs::write(&empty, "").expect("write");
        let mut d = Daemon::start(
            &bus,
            &home,
            &[
                "--replay",
                &empty.display().to_string(),
                "--fake-clock",
                "2026-12-11T08:00:00Z",
            ],
        )
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        assert_eq!(rows(&home, "SELECT count(*) FROM history").await, 0);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contextctl_history_and_summary_read_the_day() {
    with_timeout(90, async {
        let bus = Bus::start();
        let home = Home::new();
        let ctl_id = format!(
            "exe:{}",
            std::fs::canonicalize(contextctl_bin())
                .expect("path")
                .display()
        );
        home.write_policy(&[(&ctl_id, &["history", "windows.titles", "media.capture"])]);
        // The day is yesterday or earlier in real time; contextctl asks
        // relative to the real clock, so replay it 20 hours back.
        let base = Utc::now() - chrono::Duration::hours(20);
        let shift = |l: &str| -> String {
            let mut v: Value = serde_json::from_str(l).expect("json");
            if v["type"] == "clock" {
                let at: DateTime<Utc> = v["at"].as_str().expect("at").parse().expect("time");
                v["at"] = json!(base + (at - t("08:00")));
            }
            v.to_string()
        };
        let r = home.dir.path().join("day.jsonl");
        std::fs::write(
            &r,
            day()
                .iter()
                .map(|l| shift(l))
                .collect::<Vec<_>>()
                .join("\n"),
        )
        .expect("replay");
        let _d = Daemon::start(
            &bus,
            &home,
            &[
                "--replay",
                &r.display().to_string(),
                "--fake-clock",
                &base.to_rfc3339(),
            ],
        )
        .await;
        let run = |args: &[&str]| {
            let (st, out, err) = run_cmd(
                Command::new(contextctl_bin())
                    .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
                    .args(args),
                20,
            );
            (st.code().unwrap_or(-1), out, err)
        };
        let out = eventually(10, "history recorded", || async {
            let (code, out, _) = run(&["history", "--since", "2d"]);
            (code == 0 && out.contains("report.odt")).then_some(out)
        })
        .await;
        assert!(out.lines().next().unwrap_or("").contains("START"), "{out}");
        assert!(
            !out.contains("KeePassXC") && !out.contains("Private"),
            "{out}"
        );
        let (code, out, err) = run(&["summary"]);
        assert_eq!(code, 0, "{err}");
        let editor = out
            .lines()
            .find(|l| l.contains("org.gnome.TextEditor"))
            .unwrap_or_default();
        assert!(editor.contains("5h10m") && editor.contains('█'), "{out}");
        let (code, _, err) = run(&["forget"]);
        assert_eq!(code, 1);
        assert!(err.contains("--last"), "{err}");
    })
    .await
}

/// The attack on the timeline: private windows, a password manager and
/// a user-ruled app had the focus, and notifications with one-time codes
/// and a card number arrived (bodies recorded too); the database file,
/// every page decrypted with its key, holds none of them, while the
/// ordinary controls beside them and the rest of each notification are
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_shared_secrets_never_reach_the_database() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_config(
            "[consent]\nundecided = \"deny\"\n\n[history]\nnotification_bodies = true\n\n[privacy]\napps = [\"org.example.Diary\"]\ntitles = [\"salary\"]\n",
        );
        home.write_policy(&[(&my_app_id(), &["history", "windows.titles", "notifications.content"])]);
        let note = |id: &str, app: &str, summary: &str, body: &str| {
            json!({"type": "notification", "notification": {"id": id, "app_name": app, "summary": summary, "body": body}}).to_string()
        };
        let lines = vec![
            clock("09:00"),
            win("c1", "org.gnome.TextEditor", "CONTROL-ROW-TITLE.txt"),
            focus("c1"),
            clock("09:10"),
            win("p1", "firefox", "SECRET-PRIV1 — Mozilla Firefox Private Browsing"),
            focus("p1"),
            clock("09:20"),
            win("p2", "chromium", "SECRET-PRIV2 - Chromium (Incognito)"),
            focus("p2"),
            clock("09:30"),
            win("s1", "org.keepassxc.KeePassXC", "SECRET-VAULT3.kdbx - KeePassXC"),
            focus("s1"),
            clock("09:40"),
            win("u1", "org.gnome.Calc", "SECRET-SAL4 salary.ods"),
            focus("u1"),
            clock("09:50"),
            win("u2", "org.example.Diary", "SECRET-DIARY5"),
            focus("u2"),
            clock("10:00"),
            note("n1", "Messages", "G-482913 is your Google verification code", "CONTROL-NOTE-BODY"),
            note("n2", "Messages", "339120 is your Amazon OTP", "Ihr Bestätigungscode: 583920"),
            note("n3", "Shop", "CONTROL-CARD-SUMMARY", "Card 4111 1111 1111 1111 charged"),
            note("n4", "KeePassXC", "SECRET-KPN6", "SECRET-KPB7"),
            note("n5", "Mail", "CONTROL-ORDER 12345678 shipped", "CONTROL-MAIL-BODY"),
            win("c2", "org.gnome.TextEditor", "CONTROL-LAST-ROW.txt"),
            focus("c2"),
            clock("10:10"),
            focus("none"),
            clock("10:20"),
        ];
        let r = home.dir.path().join("secrets.jsonl");
        std::fs::write(&r, lines.join("\n")).expect("replay");
        let mut d = Daemon::start(
            &bus,
            &home,
            &["--replay", &r.display().to_string(), "--fake-clock", DAY],
        )
        .await;
        let conn = bus.connect().await;
        let h = History1Proxy::new(&conn).await.expect("proxy");
        eventually(15, "the controls are recorded", || async {
            let text = query_all(&h, 1000)
                .await
                .iter()
                .map(Value::to_string)
                .collect::<String>();
            (text.contains("CONTROL-LAST-ROW") && text.contains("CONTROL-MAIL-BODY")).then_some(())
        })
        .await;
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(5)).expect("stopped");
        let pages = decrypted_pages(&home);
        for control in [
            "CONTROL-ROW-TITLE.txt",
            "CONTROL-LAST-ROW.txt",
            "is your Google verification code",
            "CONTROL-NOTE-BODY",
            "is your Amazon OTP",
            "CONTROL-CARD-SUMMARY",
            "CONTROL-ORDER 12345678 shipped",
            "[code hidden]",
            "[card number hidden]",
        ] {
            assert!(contains(&pages, control), "control {control:?} not in the database");
        }
        for secret in [
            "SECRET-", "482913", "339120", "583920", "4111 1111", "Private Browsing",
            "Incognito", "salary",
        ] {
            assert!(!contains(&pages, secret), "{secret:?} is in the database");
        }
    })
    .await
}
