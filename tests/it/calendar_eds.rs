//! `calendar` follows a real Evolution Data Server (its registry and
//! calendar factory, D-Bus activated on the test's private bus with a
//! private HOME): the test makes a local calendar and task list with EDS's
//! own API (PyGObject, `tests/calendar/eds.py`); the events that have not
//! ended (one going on now, one later, a daily series in Berlin time) and
//! the open task show, the past, far and completed ones do not; a
//! subscriber hears a changed title and a removed event; titles, places
//! and people only with `calendar.details`, on D-Bus and over MCP;
//! without EDS the calendar is `unavailable` (never an error of the
//! daemon), and when EDS is killed and comes back the calendar comes
//! back.

use crate::common;
use crate::fdo;
use crate::mcp_support;
use crate::vocabulary_jsonld as jsonld;

use std::path::Path;
use std::process::Command;

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Context1Proxy, Provider1Proxy};
use fdo::{Changes, until_source};
use mcp_support::*;
use serde_json::Value;

const REGISTRY: &str = "org.gnome.evolution.dataserver.Sources5";
const FACTORY: &str = "org.gnome.evolution.dataserver.Calendar8";

/// A private home for EDS, and D-Bus service files that start its
/// registry and calendar factory in it (and nothing else of the system's).
struct Eds {
    dir: tempfile::TempDir,
}

impl Eds {
    fn new() -> Eds {
        let dir = tempfile::tempdir().expect("tempdir");
        let services = dir.path().join("services");
        std::fs::create_dir_all(&services).expect("mkdir");
        for (name, exe) in [
            (REGISTRY, "/usr/libexec/evolution-source-registry"),
            (FACTORY, "/usr/libexec/evolution-calendar-factory"),
        ] {
            assert!(
                Path::new(exe).exists(),
                "{exe} is missing: install evolution-data-server (make deps)"
            );
            let env: Vec<String> = Eds::env_of(dir.path())
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            std::fs::write(
                services.join(format!("{name}.service")),
                format!(
                    "[D-BUS Service]\nName={name}\nExec=/usr/bin/env {} {exe}\n",
                    env.join(" ")
                ),
            )
            .expect("service file");
        }
        Eds { dir }
    }

    fn env_of(p: &Path) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", p.join("home").display().to_string()),
            ("XDG_CONFIG_HOME", p.join("config").display().to_string()),
            ("XDG_DATA_HOME", p.join("data").display().to_string()),
            ("XDG_CACHE_HOME", p.join("cache").display().to_string()),
        ]
    }

    /// The bus configuration that makes EDS activatable.
    fn bus_config(&self) -> String {
        format!(
            "<servicedir>{}</servicedir>",
            self.dir.path().join("services").display()
        )
    }

    /// `eds.py ARGS` as an EDS client of `bus` (which starts EDS when it
    /// is not running).
    fn py(&self, bus: &Bus, args: &[&str]) -> String {
        let script = &crate::common::repo_file("tests/calendar/eds.py");
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.arg(script)
            .args(args)
            .env_clear()
            .envs(Eds::env_of(self.dir.path()))
            .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        let (st, out, err) = run_cmd(&mut cmd, 90);
        assert!(st.success(), "eds.py {args:?} failed:\n{out}\n{err}");
        out
    }
}

async fn calendar(ctx: &Context1Proxy<'_>) -> zbus::Result<Value> {
    ctx.get_calendar().await.map(|d| dict_to_json(&d))
}

fn titles(cal: &Value) -> Vec<String> {
    cal["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["name"].as_str().unwrap_or("-").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Kill the process that owns `name` on the bus (SIGKILL: a crash).
async fn kill_owner(conn: &zbus::Connection, name: &str) {
    let dbus = zbus::fdo::DBusProxy::new(conn).await.expect("DBus");
    let bus_name: zbus::names::BusName<'_> = name.try_into().expect("name");
    let pid = dbus
        .get_connection_unix_process_id(bus_name)
        .await
        .expect("the owner's PID");
    // SAFETY: kill(2) of a process the test's own bus started.
    let r = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(r, 0, "kill {name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_tasks_from_a_real_eds_follow_it_live_and_details_need_their_grant() {
    with_timeout(300, async {
        let eds = Eds::new();
        let bus = Bus::start_with(&eds.bus_config());
        let home = Home::new();
        let me = my_app_id();
        home.write_policy(&[
            (me.as_str(), &["calendar", "calendar.details"][..]),
            ("token:cal", &["calendar"][..]),
        ]);
        let _d = Daemon::start(&bus, &home, &["--http", "127.0.0.1:0"]).await;
        let conn = bus.connect().await;
        let ctx = Context1Proxy::new(&conn).await.expect("Context1");

        // No EDS running: unknown, said as unavailable, not an error of
        // the broker.
        let src = until_source(&conn, "calendar", false).await;
        assert!(
            src["last_error"].as_str().is_some_and(|e| e.contains("not running")),
            "{src}"
        );
        let e = calendar(&ctx).await.expect_err("no calendar yet");
        assert!(e.to_string().contains("Unavailable"), "{e}");

        let now = chrono::Utc::now().timestamp().to_string();
        tokio::task::block_in_place(|| eds.py(&bus, &["setup", &now]));
        until_source(&conn, "calendar", true).await;
        let cal = eventually(30, "the test's events", || async {
            let c = calendar(&ctx).await.ok()?;
            let tasks = c["tasks"].as_array().map_or(0, Vec::len);
            (titles(&c).iter().filter(|t| t.starts_with("EDS-")).count() >= 5 && tasks >= 1)
                .then_some(c)
        })
        .await;
        let t = titles(&cal);
        let ours: Vec<&String> = t.iter().filter(|t| t.starts_with("EDS-")).collect();
        assert_eq!(
            ours,
            ["EDS-NOW-TITLE", "EDS-NEXT-TITLE", "EDS-DAILY", "EDS-DAILY", "EDS-DAILY"],
            "{cal}"
        );
        let events = cal["events"].as_array().expect("events");
        let now_ev = &events[t.iter().position(|x| x == "EDS-NOW-TITLE").expect("now")];
        assert_eq!(now_ev["@type"], "Event");
        assert_eq!(now_ev["ongoing"], true, "{now_ev}");
        assert_eq!(now_ev["location"], "EDS-PLACE", "{now_ev}");
        assert_eq!(now_ev["attendees"], serde_json::json!(["EDS-PERSON"]), "{now_ev}");
        let daily: Vec<&Value> = events.iter().filter(|e| e["name"] == "EDS-DAILY").collect();
        assert!(daily.iter().all(|e| e["recurring"] == true && e["ongoing"] == false));
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
        assert!(
            daily.iter().all(|e| {
                let s = e["startDate"].as_str().unwrap_or("");
                s.contains("T08:00:00") || s.contains("T07:00:00")
            }),
            "{daily:?}"
        );
        let tasks = cal["tasks"].as_array().expect("tasks");
        assert_eq!(tasks.len(), 1, "the completed task is not open: {cal}");
        assert_eq!(tasks[0]["name"], "EDS-TASK");
        assert_eq!(tasks[0]["@type"], "Action");
        assert!(tasks[0]["due"].is_string(), "{cal}");
        // What the broker serves is JSON-LD: an event and a task expand
        // with the vocabulary it serves to schema.org's IRIs and its own,
        // every key (also what the calendar adds to the seed kinds).
        let vocab = Provider1Proxy::new(&conn)
            .await
            .expect("Provider1")
            .vocabulary()
            .await
            .expect("Vocabulary");
        let mut served = serde_json::Map::new();
        served.insert("event".into(), now_ev.clone());
        served.insert("task".into(), tasks[0].clone());
        let expanded = tokio::task::block_in_place(|| jsonld::expand(&served, &vocab));
        for (kind, nodes) in &expanded {
            jsonld::assert_all_iris(nodes, kind);
        }
        jsonld::assert_nothing_dropped(&served, &expanded);
        let keys = |kind: &str| {
            let mut k: Vec<String> = jsonld::node(&expanded, kind).keys().cloned().collect();
            k.sort();
            k
        };
        let iris = |names: &[&str]| {
            let mut k: Vec<String> = names
                .iter()
                .map(|n| match n.strip_prefix("ours:") {
                    Some(t) => format!("{}{t}", jsonld::OURS),
                    None if n.starts_with('@') => (*n).to_owned(),
                    None => format!("{}{n}", jsonld::SCHEMA),
                })
                .collect();
            k.sort();
            k
        };
        assert_eq!(
            keys("event"),
            iris(&[
                "@type", "identifier", "startDate", "endDate", "ours:allDay", "ours:ongoing",
                "ours:recurring", "name", "location", "attendee",
            ]),
            "{now_ev}"
        );
        assert_eq!(
            keys("task"),
            iris(&["@type", "identifier", "ours:due", "actionStatus", "name"]),
            "{}",
            tasks[0]
        );
        let text = cal.to_string();
        assert!(!text.contains("EDS-PAST") && !text.contains("EDS-FAR") && !text.contains("EDS-DONE"), "{text}");

        // Live: a subscriber hears a new title and a removed event.
        let mut changes = Changes::subscribe(&conn, &["calendar"]).await;
        tokio::task::block_in_place(|| eds.py(&bus, &["retitle", "next@test", "EDS-RETITLED"]));
        changes
            .until(20, "the new title", |cat, data| {
                cat == "calendar" && data.to_string().contains("EDS-RETITLED")
            })
            .await;
        tokio::task::block_in_place(|| eds.py(&bus, &["remove", "now@test"]));
        changes
            .until(20, "the event removed", |cat, data| {
                cat == "calendar"
                    && data.to_string().contains("EDS-RETITLED")
                    && !data.to_string().contains("EDS-NOW-TITLE")
            })
            .await;

        // Over MCP, a host granted `calendar` alone sees the times, not
        // the titles (what `withheld` says).
        let addr = http_addr(&home);
        let tok = tokio::task::block_in_place(|| token(&bus, &home, "cal"));
        for tool in ["get_upcoming_events", "list_tasks"] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"limit":2}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"Calendar Test","version":"1"}}}}}}}}"#
            );
            let (code, _, out) =
                tokio::task::block_in_place(|| stateless_tool_call(addr, &tok, tool, body.as_bytes()));
            assert_eq!(code, 200, "{out}");
            let r = messages(&out).last().cloned().unwrap_or_default();
            let sc = &r["result"]["structuredContent"];
            assert_eq!(sc["available"], true, "{r}");
            assert_eq!(sc["withheld"], serde_json::json!(["calendar.details"]), "{r}");
            assert!(!r.to_string().contains("EDS-"), "details without their grant: {r}");
            if tool == "get_upcoming_events" {
                let evs = sc["events"].as_array().expect("events");
                assert_eq!(evs.len(), 2, "a page of two: {r}");
                assert!(sc["nextCursor"].is_string(), "{r}");
            } else {
                assert_eq!(sc["tasks"].as_array().map(Vec::len), Some(1), "{r}");
            }
        }

        // One event by id (the template), the prompt built from the
        // calendar, and the template's completion: still no title.
        let id = calendar(&ctx).await.expect("calendar")["events"][0]["id"]
            .as_str()
            .expect("an id")
            .to_owned();
        let sid = tokio::task::block_in_place(|| http_session(addr, &tok));
        for (n, body) in [
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{{"uri":"context://calendar/events/{id}"}}}}"#
            ),
            r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"whats_next"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"context://calendar/events/{id}"},"argument":{"name":"id","value":""}}}"#.to_owned(),
        ]
        .into_iter()
        .enumerate()
        {
            let (code, msgs) =
                tokio::task::block_in_place(|| http_call(addr, &tok, &sid, body.as_bytes()));
            assert_eq!(code, 200, "{msgs:?}");
            let r = msgs.last().cloned().unwrap_or_default();
            let text = r["result"].to_string();
            assert!(r["result"].is_object(), "{r}");
            assert!(!text.contains("EDS-"), "details without their grant: {r}");
            match n {
                0 => assert!(text.contains("startDate") && text.contains(&id), "{r}"),
                1 => assert!(text.contains("Upcoming events") && text.contains("Open tasks (1)"), "{r}"),
                _ => assert!(text.contains(&id), "{r}"),
            }
        }

        // EDS dies (registry and factory): unavailable, and the calendar
        // unknown; it comes back (a client starts it) and so does the
        // calendar.
        kill_owner(&conn, FACTORY).await;
        kill_owner(&conn, REGISTRY).await;
        until_source(&conn, "calendar", false).await;
        eventually(15, "the calendar unknown", || async {
            calendar(&ctx).await.err().filter(|e| e.to_string().contains("Unavailable"))
        })
        .await;
        let uids = tokio::task::block_in_place(|| eds.py(&bus, &["list"]));
        assert!(uids.contains("contextd-test-cal"), "{uids}");
        until_source(&conn, "calendar", true).await;
        eventually(30, "the events back", || async {
            let c = calendar(&ctx).await.ok()?;
            titles(&c).iter().any(|t| t == "EDS-RETITLED").then_some(())
        })
        .await;
    })
    .await;
}
