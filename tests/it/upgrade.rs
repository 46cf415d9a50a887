//! Upgrades keep everything (issue 30, item 4): the database of the
//! previous release, checked in under `tests/fixtures/upgrade-0.1.0/`
//! (how it was made: `tests/fixtures/README.md`; the ignored test
//! `write_fixture` below is the generator), opens in today's daemon. The
//! migrations the fixture lacks run once, a second start runs none, the
//! daemon refuses nothing and loses nothing: the decisions (lasting, for a
//! day, for ten years, a refusal), the refused provider, the MCP token and
//! the timeline read back through contextctl and D-Bus as a user reads
//! them, and every row of the fixture is still in the file.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use contextd::client::json::dict_to_json;
use contextd::client::proxy::History1Proxy;
use serde_json::{Value, json};
use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use crate::common::{
    Bus, Daemon, Home, contextctl_bin, dbusmock, eventually, my_app_id, run_cmd, wait_for_owner,
    with_timeout,
};

/// The fixture of the release before this one (made by 0.1.0's main).
const FIXTURE: &str = "tests/fixtures/upgrade-0.1.0";

/// The fixture's day (a fake clock, so the file is the same whenever it
/// is made).
fn at(hhmm: &str) -> DateTime<Utc> {
    format!("2026-11-20T{hhmm}:00Z").parse().expect("time")
}

fn fixture_dir() -> PathBuf {
    crate::common::root().join(FIXTURE)
}

/// The decisions the fixture holds: app, category, verdict, timed.
const DECISIONS: &[(&str, &str, &str, bool)] = &[
    ("exe:/usr/bin/firefox", "windows", "allow", false),
    ("exe:/usr/bin/gedit", "windows.titles", "allow", true),
    ("exe:/usr/bin/evolution", "notifications", "allow", true),
    ("exe:/usr/bin/spyware", "media.capture", "deny", false),
];
const REFUSED_PROVIDER: &str = "exe:/usr/bin/noisy-provider";
const TOKEN: &str = "fixture-token";
/// Window titles the fixture's timeline holds, in focus order.
const TITLES: &[&str] = &["report.odt", "News", "report.odt"];

/// The day the fixture's daemon replayed: three windows, focus changes, a
/// microphone stream, the screen locked for an hour.
fn day() -> String {
    let win = |id: &str, app: &str, title: &str| {
        json!({"type": "window", "window": {"id": id, "app_id": app, "title": title}}).to_string()
    };
    let clock = |hhmm: &str| json!({"type": "clock", "at": at(hhmm)}).to_string();
    let focus = |id: &str| json!({"type": "focus", "id": id}).to_string();
    [
        win("ed", "org.gnome.TextEditor", "report.odt"),
        win("fx", "org.mozilla.firefox", "News"),
        clock("09:00"),
        focus("ed"),
        clock("10:30"),
        focus("fx"),
        clock("11:00"),
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
    .join("\n")
}

/// Settings under which nothing in the fixture is due for deletion, so
/// that "loses nothing" means it: the fixture's day only gets older.
const KEEP_EVERYTHING: &str =
    "[consent]\nundecided = \"deny\"\naudit_days = 36500\n\n[history]\nretention_days = 36500\n";

/// A broker on a private bus with a polkit that authorises managing
/// consent (contextctl consent/providers need it), this test process
/// allowed to read the timeline and contextctl to read everything.
struct Broker {
    bus: Bus,
    sys: Bus,
    _polkit: dbusmock::Mock,
}

impl Broker {
    async fn new(home: &Home) -> Broker {
        let bus = Bus::start();
        let sys = Bus::start();
        let polkit =
            dbusmock::Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        home.write_config(KEEP_EVERYTHING);
        let ctl = format!(
            "exe:{}",
            std::fs::canonicalize(contextctl_bin())
                .expect("path")
                .display()
        );
        home.write_policy(&[
            (
                &my_app_id(),
                &["history", "windows.titles", "media.capture", "session"],
            ),
            (&ctl, &["history", "windows.titles", "media.capture"]),
        ]);
        Broker {
            bus,
            sys,
            _polkit: polkit,
        }
    }

    async fn start(&self, home: &Home, args: &[&str]) -> Daemon {
        Daemon::start_with(
            &self.bus,
            home,
            args,
            &[("DBUS_SYSTEM_BUS_ADDRESS", &self.sys.address)],
        )
        .await
    }

    /// `contextctl ARGS` in the broker's session: status, stdout, stderr.
    fn ctl(&self, home: &Home, args: &[&str]) -> (i32, String, String) {
        let (st, out, err) = run_cmd(
            Command::new(contextctl_bin())
                .envs(home.envs(&self.bus))
                .env("DBUS_SYSTEM_BUS_ADDRESS", &self.sys.address)
                .args(args),
            30,
        );
        (st.code().unwrap_or(-1), out, err)
    }

    fn ctl_ok(&self, home: &Home, args: &[&str]) -> String {
        let (code, out, err) = self.ctl(home, args);
        assert_eq!(code, 0, "contextctl {args:?}: {err}");
        out
    }
}

/// Stop with SIGTERM (what systemd sends) and wait for a clean exit.
fn stop(mut d: Daemon) -> String {
    d.signal(libc::SIGTERM);
    let st = d
        .wait_exit(Duration::from_secs(20))
        .expect("contextd stops");
    assert!(st.success(), "contextd: {st:?}\n{}", d.stderr());
    d.stderr()
}

/// A log without its colours (ANSI escape sequences).
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The database opened read-only with the key file beside it: no
/// migration runs (`Db::open` would run them).
async fn raw(home: &Home) -> sqlx::SqliteConnection {
    let key_file = home.dir.path().join("state/contextd/db.key");
    let key = contextd::internals::store::DbKey::parse(&std::fs::read(&key_file).expect("key"))
        .expect("key");
    SqliteConnectOptions::new()
        .filename(home.db_path())
        .read_only(true)
        .pragma("key", format!("\"x'{}'\"", key.hex()))
        .disable_statement_logging()
        .connect()
        .await
        .expect("open the database read-only")
}

/// Every row of the tables the user would miss, as text, per table.
const TABLES: &[(&str, &str)] = &[
    (
        "decisions",
        "SELECT quote(app_id)||quote(category)||quote(verdict)||quote(expires_ms)||quote(origin)||quote(created_ms) FROM decisions",
    ),
    (
        "apps",
        "SELECT quote(app_id)||quote(identity_source)||quote(first_seen_ms) FROM apps",
    ),
    (
        "history",
        "SELECT quote(id)||quote(kind)||quote(category)||quote(app_id)||quote(title)||quote(detail)||quote(start_ms)||quote(end_ms) FROM history",
    ),
    (
        "history_hourly",
        "SELECT quote(hour_ms)||quote(app_id)||quote(kind)||quote(ms) FROM history_hourly",
    ),
    (
        "audit",
        "SELECT quote(id)||quote(time_ms)||quote(app_id)||quote(category)||quote(allowed)||quote(reason) FROM audit",
    ),
    (
        "mcp_tokens",
        "SELECT quote(name)||quote(hmac_sha256)||quote(created_ms) FROM mcp_tokens",
    ),
    ("mcp_token_key", "SELECT quote(key) FROM mcp_token_key"),
    (
        "refused_publishers",
        "SELECT quote(app_id)||quote(since_ms) FROM refused_publishers",
    ),
];

async fn rows(home: &Home) -> Vec<(&'static str, Vec<String>)> {
    let mut c = raw(home).await;
    let mut out = Vec::new();
    for (table, sql) in TABLES {
        let mut r: Vec<String> = sqlx::query_scalar(*sql)
            .fetch_all(&mut c)
            .await
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        r.sort();
        out.push((*table, r));
    }
    out
}

/// A decision's `expires_ms` in the rows of [`rows`] (quoted text).
fn expiry(rows: &[(&str, Vec<String>)], app: &str, category: &str) -> Option<i64> {
    let prefix = format!("'{app}''{category}'");
    let decisions = &rows
        .iter()
        .find(|(t, _)| *t == "decisions")
        .expect("decisions")
        .1;
    let row = decisions
        .iter()
        .find(|r| r.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no decision {app} {category} in the fixture: {decisions:?}"));
    // 'allow' or 'deny', then the expiry (NULL or a number), then 'manage'.
    let rest = row[prefix.len()..].split_once('\'').map(|(_, r)| r)?;
    let rest = rest.split_once('\'').map(|(_, r)| r)?;
    let end = rest.find('\'')?;
    rest[..end].parse().ok()
}

/// `_sqlx_migrations`: version, checksum, when it ran, success.
async fn migrations(home: &Home) -> Vec<String> {
    let mut c = raw(home).await;
    sqlx::query_scalar(
        "SELECT version||' '||hex(checksum)||' '||installed_on||' '||success FROM _sqlx_migrations ORDER BY version",
    )
    .fetch_all(&mut c)
    .await
    .expect("_sqlx_migrations")
}

/// The versions of the migrations in this tree (`migrations/NNNN_*.sql`).
fn migration_files() -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(crate::common::root().join("migrations"))
        .expect("migrations/")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".sql")?.split('_').next()?.parse().ok()
        })
        .collect();
    v.sort();
    v
}

/// Put the fixture into a fresh user's directories, with the modes a
/// real key file has (git keeps no 0600).
fn install_fixture(home: &Home) {
    use std::os::unix::fs::PermissionsExt;
    let from = fixture_dir();
    for (dir, mode) in [("data/contextd", 0o700), ("state/contextd", 0o700)] {
        let to = home.dir.path().join(dir);
        std::fs::create_dir_all(&to).expect("mkdir");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).expect("chmod");
        for e in std::fs::read_dir(from.join(dir)).expect("fixture dir") {
            let e = e.expect("entry");
            let dest = to.join(e.file_name());
            std::fs::copy(e.path(), &dest).expect("copy fixture");
            std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
    }
}

/// The fixture's timeline through History1, as a reader asks for it.
async fn timeline(bus: &Bus) -> Vec<Value> {
    let conn = bus.connect().await;
    let h = History1Proxy::new(&conn).await.expect("proxy");
    let (events, _) = h
        .query(
            at("08:00").timestamp(),
            at("17:00").timestamp(),
            &[],
            &[],
            1000,
            "",
        )
        .await
        .expect("History1.Query");
    events.iter().map(dict_to_json).collect()
}

#[tokio::test]
async fn the_previous_release_database_keeps_everything() {
    with_timeout(180, async {
        let home = Home::new();
        install_fixture(&home);
        let files = migration_files();
        let before_migrations = migrations(&home).await;
        let before_rows = rows(&home).await;
        assert!(
            before_rows
                .iter()
                .all(|(t, r)| !r.is_empty() || *t == "audit"),
            "the fixture holds something in every table: {before_rows:?}"
        );
        let broker = Broker::new(&home).await;

        // First start on the old file: it opens, and the migrations the
        // fixture lacks run, each once.
        let d = broker.start(&home, &[]).await;

        // The decisions, through contextctl.
        let list: Value =
            serde_json::from_str(&broker.ctl_ok(&home, &["--json", "consent", "list"]))
                .expect("consent list JSON");
        let grants = list["grants"].as_array().expect("grants");
        for (app, category, verdict, timed) in DECISIONS {
            let expires_ms = expiry(&before_rows, app, category);
            assert_eq!(expires_ms.is_some(), *timed, "{app} {category}");
            let g = grants
                .iter()
                .find(|g| g["app_id"] == *app && g["category"] == *category);
            // The day-long grant has run out since the fixture was made:
            // the daemon keeps its row (checked below) and no longer
            // applies or lists it, as on the day after.
            if expires_ms.is_some_and(|e| e <= Utc::now().timestamp_millis()) {
                assert!(g.is_none(), "an expired grant is listed: {list:#}");
                continue;
            }
            let g = g.unwrap_or_else(|| panic!("{app} {category} lost: {list:#}"));
            assert_eq!(g["decision"], *verdict, "{g}");
            assert_eq!(g.get("expires").is_some(), *timed, "{app} {category}: {g}");
        }
        // The refused provider and the token.
        let providers = broker.ctl_ok(&home, &["--json", "providers"]);
        assert!(providers.contains(REFUSED_PROVIDER), "{providers}");
        let tokens = broker.ctl_ok(&home, &["--json", "token", "list"]);
        assert!(tokens.contains(TOKEN), "{tokens}");
        // The timeline, through D-Bus.
        let events = timeline(&broker.bus).await;
        let titles: Vec<&str> = events
            .iter()
            .filter(|e| e["kind"] == "focus")
            .filter_map(|e| e["title"].as_str())
            .collect();
        assert_eq!(titles, TITLES, "{events:#?}");
        for kind in ["capture", "locked"] {
            assert!(
                events.iter().any(|e| e["kind"] == kind),
                "no {kind} event: {events:#?}"
            );
        }
        let log = plain(&stop(d));
        assert!(
            !log.lines().any(|l| l.contains(" ERROR ")
                || (l.contains(" WARN ")
                    && ["database", "migrat", "key", "store"]
                        .iter()
                        .any(|w| l.contains(w)))),
            "the daemon complained about the old database:\n{log}"
        );
        assert!(
            log.contains(&format!("database open path={}", home.db_path().display()))
                && log.contains(&format!("decisions={}", DECISIONS.len())),
            "it opened the fixture with its decisions:\n{log}"
        );

        // Migrations: one row per file, each once; the fixture's rows as
        // they were (none ran again: same checksum, same time).
        let after = migrations(&home).await;
        let versions: Vec<i64> = after
            .iter()
            .filter_map(|r| r.split(' ').next()?.parse().ok())
            .collect();
        assert_eq!(versions, files, "{after:#?}");
        assert!(after.iter().all(|r| r.ends_with(" 1")), "{after:#?}");
        for r in &before_migrations {
            assert!(after.contains(r), "migration {r} ran again: {after:#?}");
        }
        // Nothing lost: every row of the fixture is still there.
        let after_rows = rows(&home).await;
        for ((table, before), (_, now)) in before_rows.iter().zip(&after_rows) {
            for r in before {
                assert!(now.contains(r), "{table}: lost {r}");
            }
        }

        // A second start runs no migration.
        let d = broker.start(&home, &[]).await;
        wait_for_owner(&broker.bus, true).await;
        let (code, _, err) = broker.ctl(&home, &["status"]);
        assert_eq!(code, 0, "{err}");
        stop(d);
        assert_eq!(
            migrations(&home).await,
            after,
            "the second start ran migrations"
        );
    })
    .await
}

/// The generator of the fixture: a daemon of this tree writes a day of
/// timeline (a fake clock), the decisions, a provider refusal and a token
/// into a fresh database, stops cleanly, and the database and its key
/// file are copied to `tests/fixtures/upgrade-VERSION/` (this tree's
/// version). Run it on the release's main before bumping the version;
/// see tests/fixtures/README.md.
#[tokio::test]
#[ignore = "writes the upgrade fixture into the source tree; run by hand at a release"]
async fn write_fixture() {
    with_timeout(120, async {
        let home = Home::new();
        let broker = Broker::new(&home).await;
        let replay = home.dir.path().join("day.jsonl");
        std::fs::write(&replay, day()).expect("replay");
        let d = broker
            .start(
                &home,
                &[
                    "--replay",
                    &replay.display().to_string(),
                    "--fake-clock",
                    &at("08:00").to_rfc3339(),
                ],
            )
            .await;
        for (app, category, verdict, timed) in DECISIONS {
            let mut args = vec![
                "consent",
                if *verdict == "allow" { "grant" } else { "deny" },
                app,
                category,
            ];
            if *timed {
                args.extend([
                    "--for",
                    if *category == "notifications" {
                        "3650d"
                    } else {
                        "1d"
                    },
                ]);
            }
            broker.ctl_ok(&home, &args);
        }
        broker.ctl_ok(&home, &["providers", "refuse", REFUSED_PROVIDER]);
        broker.ctl_ok(&home, &["token", "create", TOKEN]);
        // Reads that the audit log records, and the timeline complete.
        eventually(20, "the day recorded", || async {
            let out = broker.ctl(&home, &["history", "--since", "3650d"]).1;
            (out.contains("News") && out.contains("report.odt")).then_some(())
        })
        .await;
        stop(d);
        let out = crate::common::root().join(format!(
            "tests/fixtures/upgrade-{}",
            env!("CARGO_PKG_VERSION")
        ));
        let _ = std::fs::remove_dir_all(&out);
        for dir in ["data/contextd", "state/contextd"] {
            std::fs::create_dir_all(out.join(dir)).expect("mkdir fixture");
            for e in std::fs::read_dir(home.dir.path().join(dir)).expect("dir") {
                let e = e.expect("entry");
                if e.file_type().expect("type").is_file() {
                    std::fs::copy(e.path(), out.join(dir).join(e.file_name())).expect("copy");
                }
            }
        }
        eprintln!("wrote {}", out.display());
    })
    .await
}
