//! The dashboard's first paint with 200 apps × the grid's categories, and
//! the daemon's memory with a page of it open.
//!
//! First paint is measured in Debian's Chromium (tests/dashboard/browser.py)
//! as the page's first contentful paint. The floor is the same bytes (the
//! grid's HTML, CSS and script, fetched from the dashboard once) served by
//! a bare static server in this process: the ratio is what the broker's
//! rendering and checks add. Floor and dashboard alternate, in blocks.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Proc, block_on, contextd, polkit_allowing_manage, rss_kib, start_bus};
use contextd::client::proxy::Consent1Proxy;
use serde_json::{Value, json};

const APPS: usize = 200;
/// Paints of each page per round.
const ROUNDS: usize = 10;
const REPS: usize = 3;

struct Browser {
    _child: Proc,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Browser {
    fn start() -> Browser {
        let root = crate::common::root();
        let mut child = Command::new("/usr/bin/python3")
            .arg(root.join("tests/dashboard/browser.py"))
            .arg(root.join(".tools/axe/node_modules/axe-core/axe.min.js"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("browser driver (scripts/deps.sh --node)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Browser {
            _child: Proc(child),
            stdin,
            stdout,
        }
    }

    fn cmd(&mut self, c: Value) -> Value {
        writeln!(self.stdin, "{c}").expect("to the browser");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("from the browser");
        let v: Value = serde_json::from_str(&line).expect("browser JSON");
        assert_eq!(v["ok"], true, "{c}: {v}");
        v
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A bare static server of `files` (path → (type, body)); `/events` is an
/// event stream that stays open, as the dashboard's.
async fn static_server(files: Arc<Vec<(String, &'static str, Vec<u8>)>>) -> std::net::SocketAddr {
    use axum::response::IntoResponse;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let files = files.clone();
        async move {
            if uri.path() == "/events" {
                let s = futures_util::stream::pending::<
                    Result<axum::response::sse::Event, std::convert::Infallible>,
                >();
                return axum::response::sse::Sse::new(s).into_response();
            }
            match files.iter().find(|(p, _, _)| *p == uri.path()) {
                Some((_, mime, body)) => {
                    ([(axum::http::header::CONTENT_TYPE, *mime)], body.clone()).into_response()
                }
                None => axum::http::StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

fn fetch(addr: std::net::SocketAddr, path: &str, cookie: &str) -> Vec<u8> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let at = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
    buf.split_off(at)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn main() {
    block_on(2, async {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_bus, address) = start_bus(dir.path());
        let sysdir = dir.path().join("sys");
        std::fs::create_dir_all(&sysdir).expect("mkdir");
        let (_sys, sys_address) = start_bus(&sysdir);
        let _polkit = polkit_allowing_manage(&sys_address).await;
        let mut daemon = contextd(dir.path());
        daemon
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &sys_address);
        let daemon = Proc(daemon.spawn().expect("contextd"));
        let pid = daemon.0.id();
        let conn = zbus::connection::Builder::address(address.as_str())
            .build()
            .await
            .expect("bus");
        let mut tries = 0;
        let consent = loop {
            match Consent1Proxy::new(&conn).await {
                Ok(p) => match p.list_apps().await {
                    Ok(_) => break p,
                    Err(e) if tries > 200 => panic!("Consent1 never answered: {e}"),
                    Err(_) => {}
                },
                Err(e) if tries > 200 => panic!("no Consent1: {e}"),
                Err(_) => {}
            }
            tries += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // 200 apps with a decision in each of the seed categories' columns.
        let cats = ["windows", "media.capture", "power", "network", "session"];
        for i in 0..APPS {
            let app = format!("org.example.App{i:03}");
            for (j, c) in cats.iter().enumerate() {
                let d = ["allow", "deny", "ask"][(i + j) % 3];
                consent.set_grant(&app, c, d, 0).await.expect("SetGrant");
            }
        }
        let rss_before = rss_kib(pid);
        let url = consent.open_dashboard().await.expect("OpenDashboard");
        let base = url.split("/open?").next().expect("base").to_owned();
        let addr: std::net::SocketAddr = base["http://".len()..].parse().expect("addr");

        let mut b = tokio::task::block_in_place(Browser::start);
        // The session's pages are under /s/CAP/, where the link lands.
        let landed = tokio::task::block_in_place(|| b.cmd(json!({"op": "get", "url": url})))["url"]
            .as_str()
            .expect("landed")
            .to_owned();
        let session = landed[base.len()..].to_owned();
        let cookie = tokio::task::block_in_place(|| b.cmd(json!({"op": "cookies"})))["cookies"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|c| c["name"] == "contextd_dashboard")
                    .cloned()
            })
            .expect("cookie");
        let cookie = format!(
            "contextd_dashboard={}",
            cookie["value"].as_str().expect("value")
        );
        let page = tokio::task::block_in_place(|| fetch(addr, &session, &cookie));
        let files = Arc::new(vec![
            ("/".to_owned(), "text/html; charset=utf-8", page.clone()),
            (
                "/assets/dashboard.css".to_owned(),
                "text/css; charset=utf-8",
                tokio::task::block_in_place(|| fetch(addr, "/assets/dashboard.css", &cookie)),
            ),
            (
                "/assets/dashboard.js".to_owned(),
                "text/javascript; charset=utf-8",
                tokio::task::block_in_place(|| fetch(addr, "/assets/dashboard.js", &cookie)),
            ),
        ]);
        let floor_addr = static_server(files).await;

        // Three rounds of ROUNDS paints each, floor and dashboard
        // alternating; each figure is printed min/median/max of the
        // rounds, the verdict on the median.
        let mut cells = 0;
        let (mut ratios, mut rss_open) = (Vec::new(), Vec::new());
        println!(
            "dashboard first paint, {APPS} apps, {REPS} x {ROUNDS} paints of each (floor: the same bytes from a bare server):"
        );
        for rep in 0..REPS {
            let (mut floor, mut dash, mut dcl_floor, mut dcl_dash) =
                (vec![], vec![], vec![], vec![]);
            for _ in 0..ROUNDS {
                for (url, out, dcl) in [
                    (format!("http://{floor_addr}/"), &mut floor, &mut dcl_floor),
                    (landed.clone(), &mut dash, &mut dcl_dash),
                ] {
                    let v =
                        tokio::task::block_in_place(|| b.cmd(json!({"op": "paint", "url": url})));
                    let d = v["dcl"].as_f64().unwrap_or(f64::NAN);
                    out.push(v["fcp"].as_f64().unwrap_or(d));
                    dcl.push(d);
                    cells = v["cells"].as_u64().unwrap_or(0);
                }
            }
            // The page open (its event stream too) while the daemon is measured.
            tokio::time::sleep(Duration::from_millis(500)).await;
            rss_open.push(rss_kib(pid) as f64 / 1024.0);
            let (f50, d50) = (pct(&mut floor, 0.5), pct(&mut dash, 0.5));
            let (f99, d99) = (pct(&mut floor, 0.99), pct(&mut dash, 0.99));
            ratios.push(d50 / f50);
            println!(
                "  run {}: first contentful paint p50 {d50:.1} ms (floor {f50:.1} ms) = {:.2}×; max {d99:.1} ms (floor max {f99:.1} ms); DOMContentLoaded p50 {:.1} ms (floor {:.1} ms)",
                rep + 1,
                d50 / f50,
                pct(&mut dcl_dash, 0.5),
                pct(&mut dcl_floor, 0.5)
            );
        }
        println!(
            "  {} columns ({cells} cells, {} KiB of HTML); first paint / floor p50: {}",
            cells / APPS as u64,
            page.len() / 1024,
            common::spread(&ratios)
        );
        let (a, m, c) = common::min_median_max(&rss_open);
        println!(
            "  daemon RSS: {:.1} MB with {APPS} apps; with the dashboard open min {a:.1} MB  median {m:.1} MB  max {c:.1} MB (budget 20 MB: {})",
            rss_before as f64 / 1024.0,
            common::verdict(m <= 20.0)
        );
        drop(b);
        drop(daemon);
    });
}
