//! The privacy dashboard in a real browser (Debian's Chromium, driven by
//! Selenium through chromedriver): opened from `contextctl dashboard`'s
//! one-time link; a decision changed in the grid reaches `Consent1` and
//! ends a live subscription; a reader is ended from the "Now" page; an MCP
//! read shows on the timeline without a reload; a prompt is answered in
//! the page and the waiting MCP call goes on. The link works once; a
//! request without the cookie, from another origin or without the CSRF
//! token is refused; the pages request nothing but the dashboard; axe-core
//! finds no serious or critical problem. Screenshots of every page are
//! saved under the test's output directory.

mod common;
mod mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// The browser driver (tests/dashboard/browser.py) as a line protocol.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    fn start() -> Browser {
        let axe = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(".tools/axe/node_modules/axe-core/axe.min.js");
        assert!(
            axe.exists(),
            "no axe-core: run scripts/deps.sh --node ({})",
            axe.display()
        );
        let mut child = Command::new("/usr/bin/python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dashboard/browser.py"))
            .arg(&axe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect(
                "start the browser driver (python3-selenium, chromium-driver: scripts/deps.sh)",
            );
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Browser {
            child,
            stdin,
            stdout,
        }
    }

    fn cmd(&mut self, c: Value) -> Value {
        tokio::task::block_in_place(|| {
            writeln!(self.stdin, "{c}").expect("to the browser");
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("from the browser");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("browser answered {line:?}: {e}"));
            assert_eq!(v["ok"], true, "browser: {c} failed: {v}");
            v
        })
    }

    fn get(&mut self, url: &str) {
        self.cmd(json!({"op": "get", "url": url}));
    }

    fn text(&mut self) -> String {
        self.cmd(json!({"op": "text"}))["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn wait_text(&mut self, text: &str, secs: u64) {
        let found =
            self.cmd(json!({"op": "wait_text", "text": text, "timeout": secs}))["found"] == true;
        if !found {
            let now = self.text();
            panic!("{text:?} did not show within {secs} s; the page says:\n{now}");
        }
    }

    fn shot(&mut self, name: &str) {
        let p = out_dir().join(name);
        self.cmd(json!({"op": "screenshot", "path": p}));
    }

    /// Serious and critical axe-core violations of the page.
    fn axe(&mut self) -> Vec<Value> {
        self.cmd(json!({"op": "axe"}))["violations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the screenshots go: `target/tmp/dashboard/`.
fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The Python MCP host (over `contextctl mcp`) calling one tool.
fn mcp_call(bus: &Bus, home: &Home, tool: &str) -> Command {
    mcp_support::client_command(
        bus,
        home,
        &[
            "--transport",
            "stdio",
            "--mode",
            "legacy",
            "--scenario",
            "call",
            "--tool",
            tool,
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_dashboard_in_a_real_browser() {
    with_timeout(240, async {
        let m = Managed::start("[consent]\nprompt_timeout_s = 60\n", &[]).await;
        let (bus, home) = (&m.bus, &m.home);

        // This test program is an app with two live subscriptions.
        let me = my_app_id();
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        consent
            .set_grant(&me, "windows", "allow", 0)
            .await
            .expect("grant");
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface("org.contextd.Subscription1")
            .member("Revoked")
            .build()
            .expect("rule");
        let mut revoked = zbus::MessageStream::for_match_rule(rule, &conn, None)
            .await
            .expect("match");
        ctx.subscribe(&["windows"]).await.expect("subscribe 1");
        ctx.subscribe(&["windows"]).await.expect("subscribe 2");
        let readers: Vec<Value> = consent
            .list_readers()
            .await
            .expect("ListReaders")
            .iter()
            .map(dict_to_json)
            .collect();
        let mine: Vec<&Value> = readers.iter().filter(|r| r["app_id"] == me).collect();
        assert_eq!(mine.len(), 2, "{readers:?}");
        assert!(
            mine.iter()
                .all(|r| r["transport"] == "subscription" && r["categories"] == json!(["windows"])),
            "{mine:?}"
        );

        // The one-time link, as the user gets it.
        let (ok, out, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["dashboard", "--no-open"])
        });
        assert!(ok, "contextctl dashboard: {err}");
        let url = out.trim().to_owned();
        let base = url.split("/open?").next().expect("base").to_owned();
        assert!(base.starts_with("http://127.0.0.1:"), "{url}");
        let addr: std::net::SocketAddr = base["http://".len()..].parse().expect("addr");
        let open_path = &url[base.len()..];

        let mut b = Browser::start();
        b.get(&url);
        b.wait_text("Decisions per app and category", 10);
        assert!(b.text().contains(&me), "the grid lists this app");
        b.shot("apps.png");

        // The link is spent; without the cookie, from elsewhere or without
        // the CSRF token, nothing goes.
        let get = |path: &str, hdrs: &[(&str, &str)]| {
            tokio::task::block_in_place(|| mcp_support::http(addr, "GET", path, hdrs, b""))
        };
        let (status, _, body) = get(open_path, &[]);
        assert_eq!(status, 403, "the link used twice: {body}");
        assert!(body.contains("used already"), "{body}");
        let (status, _, _) = get("/", &[]);
        assert_eq!(status, 403, "no cookie");
        let cookies = b.cmd(json!({"op": "cookies"}))["cookies"].clone();
        let c = cookies
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == "contextd_dashboard"))
            .cloned()
            .unwrap_or_else(|| panic!("no session cookie: {cookies}"));
        assert_eq!(c["httpOnly"], true, "{c}");
        assert_eq!(c["sameSite"], "Strict", "{c}");
        let cookie = format!("contextd_dashboard={}", c["value"].as_str().expect("value"));
        let (status, headers, page) = get("/", &[("Cookie", &cookie)]);
        assert_eq!(status, 200);
        let csp = header(&headers, "content-security-policy").unwrap_or_default();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
            "{csp}"
        );
        let csrf = page
            .split("name=\"csrf\" content=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("csrf token in the page")
            .to_owned();
        let post = |hdrs: &[(&str, &str)], body: &str| {
            let mut h = vec![("Content-Type", "application/x-www-form-urlencoded")];
            h.extend_from_slice(hdrs);
            tokio::task::block_in_place(|| {
                mcp_support::http(addr, "POST", "/pause", &h, body.as_bytes()).0
            })
        };
        let form = format!("paused=true&csrf={csrf}");
        assert_eq!(post(&[("Cookie", &cookie)], &form), 403, "no Origin");
        assert_eq!(
            post(
                &[("Cookie", &cookie), ("Origin", "http://evil.example")],
                &form
            ),
            403,
            "a foreign Origin"
        );
        assert_eq!(
            post(&[("Cookie", &cookie), ("Origin", &base)], "paused=true"),
            403,
            "no CSRF token"
        );
        assert_eq!(post(&[("Origin", &base)], &form), 403, "no cookie");
        assert_eq!(
            get("/", &[("Cookie", &cookie), ("Host", "evil.example")]).0,
            403,
            "another Host (DNS rebinding)"
        );
        assert!(
            !consent.paused().await.expect("Paused"),
            "nothing refused took effect"
        );

        // Now: the readers; end one of the two subscriptions.
        b.get(&format!("{base}/now"));
        b.wait_text("Live subscriptions and MCP sessions", 10);
        b.shot("now.png");
        let id = &mine[0]["id"];
        b.cmd(json!({"op": "click", "label": format!("End reader {id}: {me} (subscription)")}));
        let m = within(10, "Revoked after End", revoked.next()).await;
        let (_, reason): (String, String) = m
            .expect("stream")
            .expect("message")
            .body()
            .deserialize()
            .expect("body");
        assert_eq!(reason, "the user ended this subscription");
        eventually(10, "one reader left", || async {
            let n = consent
                .list_readers()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .filter(|r| r["app_id"] == me)
                .count();
            (n == 1).then_some(())
        })
        .await;

        // Apps: deny windows in the grid → ListGrants says so, and the
        // other subscription ends.
        b.get(&format!("{base}/"));
        b.cmd(json!({"op": "select", "app": me, "category": "windows", "value": "deny"}));
        eventually(5, "the grid's deny in ListGrants", || async {
            consent
                .list_grants()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|g| g["app_id"] == me && g["category"] == "windows" && g["decision"] == "deny")
                .then_some(())
        })
        .await;
        let m = within(10, "Revoked after the deny", revoked.next()).await;
        let (cat, reason): (String, String) = m
            .expect("stream")
            .expect("message")
            .body()
            .deserialize()
            .expect("body");
        assert_eq!(cat, "windows");
        assert!(reason.contains("withdrawn"), "{reason}");

        // Timeline: an MCP read shows without a reload.
        let host = mcp_support::python_app_id();
        consent
            .set_grant(&host, "windows", "allow", 0)
            .await
            .expect("grant the host");
        b.get(&format!("{base}/timeline"));
        b.wait_text("Who read what", 10);
        b.cmd(json!({"op": "mark"}));
        let report = tokio::task::block_in_place(|| {
            mcp_support::client_report(mcp_call(bus, home, "get_active_window"))
        });
        assert!(report["call"]["ok"].is_object(), "{report}");
        b.wait_text("tools/call get_active_window", 10);
        assert_eq!(
            b.cmd(json!({"op": "marked"}))["marked"],
            true,
            "the timeline updated itself, without a reload"
        );
        b.shot("timeline.png");

        // A prompt answered in the page: no agent and no notification
        // daemon here, so the open dashboard is the only way to answer.
        b.get(&format!("{base}/now"));
        b.wait_text("Waiting for your answer", 10);
        let waiting = {
            let cmd = mcp_call(bus, home, "get_power");
            std::thread::spawn(move || mcp_support::client_report(cmd))
        };
        eventually(20, "the host's prompt in ListPending", || async {
            consent
                .list_pending()
                .await
                .ok()?
                .iter()
                .map(dict_to_json)
                .any(|p| p["app_id"] == host)
                .then_some(())
        })
        .await;
        b.wait_text("asks for power", 10);
        b.shot("now-pending.png");
        b.cmd(json!({"op": "click", "label": format!("Allow once: {host} reading power")}));
        let report = tokio::task::block_in_place(|| waiting.join().expect("host thread"));
        assert!(
            report["call"]["ok"].is_object(),
            "the waiting call went on once allowed in the page: {report}"
        );

        // Accessibility of every page.
        for (page, path) in [("apps", "/"), ("now", "/now"), ("timeline", "/timeline")] {
            b.get(&format!("{base}{path}"));
            let v = b.axe();
            assert!(
                v.is_empty(),
                "axe-core on {page}: {}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
        }

        // Nothing but the dashboard was requested.
        let urls = b.cmd(json!({"op": "requests"}))["urls"].clone();
        let urls: Vec<&str> = urls
            .as_array()
            .expect("urls")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(urls.len() > 5, "{urls:?}");
        let foreign: Vec<&&str> = urls
            .iter()
            .filter(|u| {
                !u.starts_with(&format!("{base}/"))
                    && !u.starts_with("data:")
                    && !u.starts_with("about:")
            })
            .collect();
        assert!(
            foreign.is_empty(),
            "requests beyond the dashboard: {foreign:?}"
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_listens_on_loopback_only() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_config("[dashboard]\nlisten = \"0.0.0.0:0\"\n");
        let mut d = Daemon::spawn(&bus, &home, &[]);
        let st = d
            .wait_exit(Duration::from_secs(20))
            .expect("the daemon refuses to start");
        assert!(!st.success());
        let err = d.stderr();
        assert!(err.contains("not a loopback address"), "{err}");
    })
    .await
}
