//! The privacy dashboard in a real browser (Debian's Chromium, driven by
//! Selenium through chromedriver): opened from `contextctl dashboard`'s
//! one-time link; a decision changed in the grid reaches `Consent1` and
//! ends a live subscription; a reader is ended from the "Now" page; an MCP
//! read shows on the timeline without a reload; a prompt is answered in
//! the page and the waiting MCP call goes on. The link works once; a
//! request without the cookie or without the session's path, from another
//! origin or without the CSRF token is refused; the pages request nothing
//! but the dashboard; axe-core finds no serious or critical problem.
//! Screenshots of every page are saved under the test's output directory.
//!
//! And as attacks: a page on another loopback port, opened in the same
//! browser, captures nothing it can replay (cookies are not scoped by
//! port); the browser `contextctl dashboard` starts gets no ticket on its
//! command line (`/proc/PID/cmdline` is world-readable), only a 0600 file
//! that opens the dashboard once.

use crate::common;
use crate::mcp_support;

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use common::dashboard::Browser;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use futures_util::StreamExt;
use serde_json::{Value, json};

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
        let landed = b.get(&url);
        b.wait_text("Decisions per app and category", 10);
        assert!(b.text().contains(&me), "the grid lists this app");
        b.shot("apps.png");
        // The session's pages: /s/CAP/.
        let session = landed[base.len()..].trim_end_matches('/').to_owned();
        assert!(
            session.starts_with("/s/") && session.len() > 40,
            "landed at {landed}"
        );
        let sbase = format!("{base}{session}");

        // The link is spent; without the cookie or the path, from
        // elsewhere or without the CSRF token, nothing goes.
        let get = |path: &str, hdrs: &[(&str, &str)]| {
            tokio::task::block_in_place(|| mcp_support::http(addr, "GET", path, hdrs, b""))
        };
        let (status, _, body) = get(open_path, &[]);
        assert_eq!(status, 403, "the link used twice: {body}");
        assert!(body.contains("used already"), "{body}");
        let (status, _, _) = get("/", &[]);
        assert_eq!(status, 403, "no cookie");
        let (status, _, _) = get(&format!("{session}/"), &[]);
        assert_eq!(status, 403, "the session's path without its cookie");
        let cookies = b.cmd(json!({"op": "cookies"}))["cookies"].clone();
        let c = cookies
            .as_array()
            .and_then(|a| a.iter().find(|c| c["name"] == "contextd_dashboard"))
            .cloned()
            .unwrap_or_else(|| panic!("no session cookie: {cookies}"));
        assert_eq!(c["httpOnly"], true, "{c}");
        assert_eq!(c["sameSite"], "Strict", "{c}");
        assert_eq!(
            c["path"],
            session.as_str(),
            "sent to the session's path only: {c}"
        );
        let cookie = format!("contextd_dashboard={}", c["value"].as_str().expect("value"));
        let (status, _, _) = get("/", &[("Cookie", &cookie)]);
        assert_eq!(status, 403, "the cookie without the session's path");
        let (status, headers, page) = get(&format!("{session}/"), &[("Cookie", &cookie)]);
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
                mcp_support::http(
                    addr,
                    "POST",
                    &format!("{session}/pause"),
                    &h,
                    body.as_bytes(),
                )
                .0
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
            get(
                &format!("{session}/"),
                &[("Cookie", &cookie), ("Host", "evil.example")]
            )
            .0,
            403,
            "another Host (DNS rebinding)"
        );
        assert!(
            !consent.paused().await.expect("Paused"),
            "nothing refused took effect"
        );

        // Now: the readers; end one of the two subscriptions.
        b.get(&format!("{sbase}/now"));
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
        b.get(&format!("{sbase}/"));
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
        b.get(&format!("{sbase}/timeline"));
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
        b.get(&format!("{sbase}/now"));
        b.wait_text("Waiting for your answer", 10);
        // The page says how questions are asked, and why: no agent and no
        // portal backend this bus can start.
        b.wait_text("Questions come as notifications: no trusted consent agent registered; no portal dialog:", 10);
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
            b.get(&format!("{sbase}{path}"));
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

/// A page served on a second loopback port, recording the head of every
/// request it gets (request line, then the header lines).
struct Capture {
    addr: std::net::SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

impl Capture {
    fn start() -> Capture {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let rec = seen.clone();
        // The page asks for more of its own port the ways a page can: a
        // subresource and a script's fetch with credentials.
        let page = "<!DOCTYPE html><html lang=\"en\"><head><title>another port</title></head><body>\
            <p>a local dev server</p><img src=\"/pixel.png\" alt=\"\">\
            <script>fetch('/fetched', {credentials: 'include'});</script></body></html>";
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                    match s.read(&mut b) {
                        Ok(1) => head.push(b[0]),
                        _ => break,
                    }
                }
                let lines: Vec<String> = String::from_utf8_lossy(&head)
                    .split("\r\n")
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect();
                let path = lines
                    .first()
                    .and_then(|l| l.split(' ').nth(1))
                    .unwrap_or_default()
                    .to_owned();
                rec.lock().unwrap_or_else(|e| e.into_inner()).push(lines);
                let (ty, body) = if path == "/" {
                    ("text/html; charset=utf-8", page)
                } else {
                    ("text/plain", "")
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: {ty}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Capture { addr, seen }
    }

    fn seen(&self) -> Vec<Vec<String>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The status line's code of one request (the body is not waited for:
/// an event stream never ends).
fn status_of(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &str,
) -> u16 {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => got.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Hole 1: cookies are not scoped by port. After the dashboard is open, a
/// page that another local process serves on another loopback port, in
/// the same browser, sees every request the browser sends it; replayed
/// by a non-browser client with our Origin, nothing it saw opens a page
/// or changes a decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_loopback_port_captures_nothing_it_can_replay() {
    with_timeout(120, async {
        let m = Managed::start("", &[]).await;
        let (bus, home) = (&m.bus, &m.home);
        let conn = bus.connect().await;
        let consent = Consent1Proxy::new(&conn).await.expect("proxy");
        let (ok, out, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["dashboard", "--no-open"])
        });
        assert!(ok, "contextctl dashboard: {err}");
        let url = out.trim().to_owned();
        let base = url.split("/open?").next().expect("base").to_owned();
        let addr: std::net::SocketAddr = base["http://".len()..].parse().expect("addr");

        let mut b = Browser::start();
        let landed = b.get(&url);
        b.wait_text("Who may see what", 10);

        // The same browser visits a page on another loopback port.
        let cap = Capture::start();
        b.get(&format!("http://127.0.0.1:{}/", cap.addr.port()));
        eventually(10, "the other port's page fetched", || async {
            cap.seen()
                .iter()
                .any(|r| r[0].starts_with("GET /fetched "))
                .then_some(())
        })
        .await;
        let seen = cap.seen();
        let all = seen
            .iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            !all.contains("contextd_dashboard") && !all.contains(&format!(":{}/", addr.port())),
            "the other port was sent the dashboard's cookie or address:\n{all}"
        );

        // Replay: every header it saw, our Host and Origin, on every page
        // the dashboard has, and on any dashboard path it saw.
        let mut paths: Vec<String> = ["/", "/now", "/timeline", "/events"]
            .iter()
            .map(|p| p.to_string())
            .collect();
        let mut actions = vec!["/decide".to_owned()];
        for line in seen.iter().flatten() {
            if let Some(at) = line.find(&base) {
                let rest = &line[at + base.len()..];
                let p = rest.split_whitespace().next().unwrap_or("/").to_owned();
                actions.push(format!("{}/decide", p.trim_end_matches('/')));
                paths.push(p);
            }
        }
        let skip = [
            "host",
            "connection",
            "content-length",
            "content-type",
            "origin",
        ];
        let spy = "org.example.Spy";
        for req in &seen {
            let hs: Vec<(String, String)> = req[1..]
                .iter()
                .filter_map(|l| l.split_once(':'))
                .filter(|(k, _)| !skip.contains(&k.trim().to_ascii_lowercase().as_str()))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect();
            let mut csrf = String::new();
            for p in &paths {
                let st = tokio::task::block_in_place(|| status_of(addr, "GET", p, &hs, ""));
                assert_eq!(st, 403, "GET {p} with the other port's headers {hs:?}");
                if p != "/events" {
                    let refs: Vec<(&str, &str)> =
                        hs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    let (_, _, page) = tokio::task::block_in_place(|| {
                        mcp_support::http(addr, "GET", p, &refs, b"")
                    });
                    if let Some(t) = page
                        .split("name=\"csrf\" content=\"")
                        .nth(1)
                        .and_then(|r| r.split('"').next())
                    {
                        csrf = t.to_owned();
                    }
                }
            }
            let mut post = hs.clone();
            post.push(("Origin".into(), base.clone()));
            post.push((
                "Content-Type".into(),
                "application/x-www-form-urlencoded".into(),
            ));
            let form =
                format!("app={spy}&category=notifications.content&decision=allow&csrf={csrf}");
            for action in &actions {
                let st =
                    tokio::task::block_in_place(|| status_of(addr, "POST", action, &post, &form));
                assert_eq!(
                    st, 403,
                    "POST {action} with the other port's headers {post:?}"
                );
            }
        }
        let grants: Vec<Value> = consent
            .list_grants()
            .await
            .expect("ListGrants")
            .iter()
            .map(dict_to_json)
            .collect();
        assert!(
            !grants.iter().any(|g| g["app_id"] == spy),
            "a replayed request changed a decision: {grants:?}"
        );
        // The user's own session still works.
        b.get(&landed);
        b.wait_text("Who may see what", 10);
    })
    .await
}

/// Run `contextctl dashboard` as on a desktop, with `extra` environment.
fn contextctl_dashboard(bus: &Bus, home: &Home, path: &str, extra: &[(&str, &str)]) {
    let mut cmd = Command::new(contextctl_bin());
    cmd.arg("dashboard")
        .env_clear()
        .envs(home.envs(bus))
        .env("PATH", path)
        .env("DISPLAY", ":99")
        .envs(extra.iter().copied());
    let (st, _, err) = run_cmd(&mut cmd, 30);
    assert!(st.success(), "contextctl dashboard: {err}");
}

/// Everything in `s` that could be a ticket (a long run of URL-safe
/// base64).
fn ticket_like(s: &str) -> Vec<String> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| w.len() >= 16)
        .map(str::to_owned)
        .collect()
}

/// The link in a link page (`<meta http-equiv="refresh" content="0;url=…">`).
fn link_in(page: &str) -> String {
    page.split("url=")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("no link in {page}"))
        .replace("&amp;", "&")
}

/// Hole 2: `/proc/PID/cmdline` is readable by every user. The browser
/// `contextctl dashboard` starts (through `$BROWSER` or `xdg-open`) gets
/// no ticket on its command line, only a file of the user's alone that
/// opens the dashboard once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_link_never_travels_in_argv() {
    with_timeout(120, async {
        use std::os::unix::fs::MetadataExt;
        let m = Managed::start("", &[]).await;
        let (bus, home) = (&m.bus, &m.home);
        let (ok, out, err) = tokio::task::block_in_place(|| {
            mcp_support::contextctl(bus, home, &["dashboard", "--no-open"])
        });
        assert!(ok, "{err}");
        let base = out.trim().split("/open?").next().expect("base").to_owned();
        let addr: std::net::SocketAddr = base["http://".len()..].parse().expect("addr");

        // Fake browsers that record their argv: xdg-open first on PATH,
        // and one named by $BROWSER.
        let fake = tempfile::tempdir().expect("tempdir");
        let script = |name: &str| {
            let p = fake.path().join(name);
            let log = fake.path().join(format!("{name}.argv"));
            std::fs::write(
                &p,
                format!(
                    "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > {}.tmp && mv {0}.tmp {0}\n",
                    log.display()
                ),
            )
            .expect("write");
            let mut perm = std::fs::metadata(&p).expect("meta").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).expect("chmod");
            (p, log)
        };
        let (_, xdg_log) = script("xdg-open");
        let (browser, browser_log) = script("fake-browser");
        let path = format!(
            "{}:{}",
            fake.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let browser = browser.display().to_string();
        // Whatever in an argv looks like a ticket redeems nothing.
        let mut argvs = Vec::new();
        for (extra, log) in [
            (vec![], &xdg_log),
            (vec![("BROWSER", browser.as_str())], &browser_log),
        ] {
            tokio::task::block_in_place(|| contextctl_dashboard(bus, home, &path, &extra));
            let argv = eventually(10, "the fake browser ran", || async {
                std::fs::read_to_string(log).ok()
            })
            .await;
            for t in ticket_like(&argv) {
                let (st, _, _) = tokio::task::block_in_place(|| {
                    mcp_support::http(addr, "GET", &format!("/open?ticket={t}"), &[], b"")
                });
                assert_eq!(st, 403, "{t} from argv {argv:?} opened the dashboard");
            }
            assert!(!argv.contains("ticket="), "a ticket in argv: {argv}");
            argvs.push(argv);
        }

        // Each got a file:// path of a 0600 file in the private runtime dir.
        let files: Vec<std::path::PathBuf> = argvs
            .iter()
            .map(|a| {
                let f = a
                    .lines()
                    .find_map(|l| l.strip_prefix("file://"))
                    .unwrap_or_else(|| panic!("no file:// in {a:?}"));
                std::path::PathBuf::from(f)
            })
            .collect();
        for f in &files {
            let dir = f.parent().expect("dir");
            assert_eq!(dir, mcp_support::runtime(home), "{}", f.display());
            assert_eq!(std::fs::metadata(f).expect("file").mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(dir).expect("dir").mode() & 0o777, 0o700);
        }

        // The user's browser opens the first: the dashboard, once.
        let mut b = Browser::start();
        b.get(&format!("file://{}", files[0].display()));
        b.wait_text("Who may see what", 10);
        let landed = b.cmd(json!({"op": "url"}))["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(landed.starts_with(&format!("{base}/s/")), "{landed}");
        let spent = link_in(&std::fs::read_to_string(&files[0]).expect("read"));
        let (st, _, _) = tokio::task::block_in_place(|| {
            mcp_support::http(addr, "GET", &spent[base.len()..], &[], b"")
        });
        assert_eq!(st, 403, "the link the browser used, again");
        // The second, read as the user reads it: works once.
        let link = link_in(&std::fs::read_to_string(&files[1]).expect("read"));
        assert!(link.starts_with(&format!("{base}/open?ticket=")), "{link}");
        for want in [200, 403] {
            let (st, hs, _) = tokio::task::block_in_place(|| {
                mcp_support::http(addr, "GET", &link[base.len()..], &[], b"")
            });
            assert_eq!(st, want, "{link}");
            assert_eq!(
                header(&hs, "set-cookie").is_some(),
                want == 200,
                "a session, the first time only: {hs:?}"
            );
        }
    })
    .await
}
