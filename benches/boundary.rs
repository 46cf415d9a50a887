//! The sandbox boundary's bounds, as memory (issues 47 and 48): what an
//! app or a host that floods the broker can make it hold.
//!
//! - **The question flood**: one app sends 30 000 `RequestAccess` calls
//!   over one connection, a quarter of them for `provided.*` kinds nobody
//!   publishes, the rest for every fixed category in turn, with a
//!   notification server up (so that questions stay open). Before the
//!   bounds, every call queued a question and a request object: the
//!   broker went from 14 MB to 204 MB. Target: the broker's RSS after the
//!   flood ≤ 25 MB (the release build), with at most the bound (32) of
//!   questions open; the floor is its RSS before the flood.
//! - **One token's sessions**: 5 000 Streamable HTTP sessions opened by
//!   one token (after 200 to warm up), while another token holds one.
//!   Target: RSS growth ≤ 10 MB, the other token's session still there.
//!
//! Memory is not timing: these figures are printed here with their
//! targets, and the tests (`consent_asking`, `mcp_owners`) check the
//! same bounds on the debug build's growth.

use std::io::{Read, Write};
use std::time::Duration;

use contextd::client::proxy::{Consent1Proxy, Context1Proxy};

use crate::common::{
    Proc, block_on, contextd, create_token, dbusmock, envs, polkit_allowing_manage, rss_kib,
    start_bus, verdict,
};

const FLOOD: usize = 30_000;
const FLOOD_TARGET_KIB: u64 = 25 * 1024;
const SESSIONS: usize = 5_000;
const SESSIONS_TARGET_KIB: u64 = 10 * 1024;
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;

pub(crate) fn main() {
    block_on(2, async {
        flood().await;
        sessions().await;
    });
}

async fn flood() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    let sysdir = dir.path().join("sys");
    std::fs::create_dir_all(&sysdir).expect("mkdir");
    let (_sys, sys_address) = start_bus(&sysdir);
    let _polkit = polkit_allowing_manage(&sys_address).await;
    let _notifications = dbusmock(&address, false, "notification_daemon");
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
    let consent = Consent1Proxy::new(&conn).await.expect("proxy");
    let mut tries = 0;
    while consent.list_pending().await.is_err() {
        tries += 1;
        assert!(tries < 400, "the broker did not answer");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Settled: the sources started, the notification server is known.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    let ctx = Context1Proxy::new(&conn).await.expect("proxy");
    let fixed = [
        "windows",
        "windows.titles",
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
    let mut refused = 0usize;
    for chunk in (0..FLOOD).collect::<Vec<_>>().chunks(1000) {
        let calls = chunk.iter().map(|i| {
            let ctx = &ctx;
            let cat = if i % 4 == 0 {
                format!("provided.flood-{i}")
            } else {
                fixed[i % fixed.len()].to_owned()
            };
            async move { ctx.request_access(&[cat.as_str()], "flood").await.is_err() }
        });
        refused += futures_util::future::join_all(calls)
            .await
            .into_iter()
            .filter(|r| *r)
            .count();
    }
    let open = consent.list_pending().await.map(|p| p.len()).unwrap_or(0);
    let after = rss_kib(pid);
    println!("boundary: the question flood ({FLOOD} RequestAccess calls from one app)");
    println!(
        "  broker RSS after the flood   {:>7.1} MB   target ≤ {:.0} MB   {}   (floor: {:.1} MB before it, {:.2}×)",
        after as f64 / 1024.0,
        FLOOD_TARGET_KIB as f64 / 1024.0,
        verdict(after <= FLOOD_TARGET_KIB),
        before as f64 / 1024.0,
        after as f64 / before.max(1) as f64,
    );
    println!(
        "  questions open               {open:>7}      bound 32         {}   ({refused} calls refused at once)",
        verdict(open <= 32),
    );
    drop(daemon);
}

/// One HTTP/1.1 `POST /mcp` on a new connection (in `session` when
/// given): the status and the whole response.
fn post(addr: &str, token: &str, session: Option<&str>, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let session = session
        .map(|sid| format!("Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-06-18\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         {session}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

fn session_id(response: &str) -> Option<String> {
    response.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    })
}

async fn sessions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_bus, address) = start_bus(dir.path());
    let cfg = dir.path().join("config/contextd");
    std::fs::create_dir_all(&cfg).expect("mkdir");
    std::fs::write(
        cfg.join("config.toml"),
        "[mcp.http]\nlisten = \"127.0.0.1:0\"\n",
    )
    .expect("config");
    let mut daemon = contextd(dir.path());
    daemon.env("DBUS_SESSION_BUS_ADDRESS", &address);
    let daemon = Proc(daemon.spawn().expect("contextd"));
    let pid = daemon.0.id();
    let url_file = dir.path().join("run/contextd/mcp-http.url");
    let addr = crate::common::mcp_http_addr(&url_file, 10).await;
    let mut env = envs(dir.path());
    env.push(("DBUS_SESSION_BUS_ADDRESS".into(), address.clone()));
    let greedy = create_token("greedy", env.clone());
    let modest = create_token("modest", env);
    let (addr2, greedy2, modest2) = (addr.clone(), greedy.clone(), modest.clone());
    let figures = tokio::task::spawn_blocking(move || {
        let (code, kept) = post(&addr2, &modest2, None, INIT);
        assert_eq!(code, 200, "{kept}");
        let kept = session_id(&kept).expect("a session id");
        let open = |n: usize| {
            for _ in 0..n {
                let (code, r) = post(&addr2, &greedy2, None, INIT);
                assert_eq!(code, 200, "{r}");
            }
        };
        open(200);
        let before = rss_kib(pid);
        open(SESSIONS);
        let after = rss_kib(pid);
        (before, after, kept)
    })
    .await
    .expect("the sessions");
    let (before, after, kept) = figures;
    let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;
    let (addr2, modest2) = (addr.clone(), modest.clone());
    let alive =
        tokio::task::spawn_blocking(move || post(&addr2, &modest2, Some(&kept), body).0 == 200)
            .await
            .unwrap_or(false);
    let grew = after.saturating_sub(before);
    println!("boundary: {SESSIONS} Streamable HTTP sessions from one token");
    println!(
        "  broker RSS growth            {:>7.1} MB   target ≤ {:.0} MB   {}   (floor: {:.1} MB after 200, {:.2}×)",
        grew as f64 / 1024.0,
        SESSIONS_TARGET_KIB as f64 / 1024.0,
        verdict(grew <= SESSIONS_TARGET_KIB),
        before as f64 / 1024.0,
        after as f64 / before.max(1) as f64,
    );
    println!(
        "  another token's session      {:>7}               {}",
        if alive { "alive" } else { "GONE" },
        verdict(alive),
    );
    drop(daemon);
}
