//! A host that is gone is gone: an MCP host (this test) runs
//! `contextctl mcp`, calls a tool that needs the user's consent, and
//! closes the bridge's stdin while the prompt is on the screen of a real
//! notification daemon (mako, in a headless sway). The bridge exits and the
//! prompt leaves mako's list within 1 s, and nothing is stored.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::notifyd::{self, Proc, mako_field, makoctl_list};
use common::session::Session;
use common::*;

fn prompts(env: &[(String, String)]) -> usize {
    makoctl_list(env)
        .unwrap_or_default()
        .iter()
        .filter(|n| {
            mako_field(n, "summary")
                .as_str()
                .is_some_and(|s| s.contains("wants to know what you are doing"))
        })
        .count()
}

/// A headless sway session with mako on it, a home that asks for what is
/// undecided, and the session's environment for the broker and clients.
async fn with_mako() -> (Session, Home, Vec<(String, String)>, Proc) {
    let session = Session::start(&["--no-pipewire", "--no-windows"]);
    let home = Home::new();
    home.ask_undecided();
    let env = session_env(&session, &home);
    let mako = notifyd::mako(&env, session.path(), None).await;
    (session, home, env, mako)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_closes_stdin_takes_its_prompt_with_it() {
    with_timeout(120, async {
        let (session, home, env, _mako) = with_mako().await;
        let daemon = Daemon::start_in_session(&session, &home, &[]).await;

        let mut child = Command::new(contextctl_bin())
            .arg("mcp")
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn contextctl mcp");
        let mut stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let bridge = Proc(child);
        let (tx, lines) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut send = |line: &str| {
            stdin.write_all(line.as_bytes()).expect("write");
            stdin.write_all(b"\n").expect("newline");
            stdin.flush().expect("flush");
        };
        send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"gone","version":"1"}}}"#,
        );
        let init = lines
            .recv_timeout(Duration::from_secs(15))
            .expect("initialize answered");
        assert!(init.contains("\"result\""), "{init}");
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        send(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window","arguments":{}}}"#,
        );
        eventually(20, "the consent prompt in mako's list", || async {
            (prompts(&env) == 1).then_some(())
        })
        .await;

        // The host quits: stdin closes.
        drop(stdin);
        let closed = Instant::now();
        let mut bridge = bridge;
        let deadline = closed + Duration::from_secs(1);
        let status = loop {
            if let Some(st) = bridge.0.try_wait().expect("wait") {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "the bridge did not exit within 1 s after its stdin closed"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "bridge: {status:?}");
        loop {
            if prompts(&env) == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the prompt is still in mako's list 1 s after the host left: {:?}",
                makoctl_list(&env)
            );
            std::thread::sleep(Duration::from_millis(20));
        }

        // Withdrawn, not answered: nothing is stored (a withdrawn prompt
        // writes no decision and starts no cool-down).
        eventually(10, "the daemon logs the withdrawn prompt", || async {
            daemon
                .stderr()
                .lines()
                .any(|l| l.contains("prompt ended") && l.contains("NoAnswer(Withdrawn)"))
                .then_some(())
        })
        .await;
    })
    .await;
}

/// A revoked token is a host that is gone: its stateless call waits for
/// the user with the prompt on mako's screen; `contextctl token revoke`
/// returns only once the prompt has left mako's list (the broker withdraws
/// its token's questions before it answers), the call ends without the
/// context, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_takes_its_prompt_off_the_screen_before_it_returns() {
    with_timeout(120, async {
        let (session, home, env, _mako) = with_mako().await;
        let daemon = Daemon::start_in_session(&session, &home, &["--http", "127.0.0.1:0"]).await;
        let ctl = |args: &[&str]| {
            let out = Command::new(contextctl_bin())
                .args(args)
                .env_clear()
                .envs(env.iter().cloned())
                .output()
                .expect("contextctl");
            assert!(
                out.status.success(),
                "contextctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let token = ctl(&["token", "create", "leaver"]);
        let runtime = env
            .iter()
            .find(|(k, _)| k == "XDG_RUNTIME_DIR")
            .map(|(_, v)| std::path::PathBuf::from(v))
            .expect("XDG_RUNTIME_DIR");
        let url = runtime.join("contextd/mcp-http.url");
        let addr: std::net::SocketAddr = eventually(10, "the HTTP address", || async {
            std::fs::read_to_string(&url).ok().and_then(|s| {
                s.trim()
                    .strip_prefix("http://")?
                    .strip_suffix("/mcp")?
                    .parse()
                    .ok()
            })
        })
        .await;
        let call = {
            let token = token.clone();
            std::thread::spawn(move || {
                crate::mcp_support::stateless_tool_call(
                    addr,
                    &token,
                    "get_active_window",
                    br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_active_window","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"Leaver","version":"1"}}}}"#,
                )
            })
        };
        eventually(20, "the consent prompt in mako's list", || async {
            (prompts(&env) == 1).then_some(())
        })
        .await;

        ctl(&["token", "revoke", "leaver"]);
        // Not "soon": already. The revocation answered after the broker
        // closed the notification and mako acknowledged it.
        assert_eq!(
            prompts(&env),
            0,
            "the revoked token's prompt is still on screen: {:?}",
            makoctl_list(&env)
        );
        let (status, _, body) = tokio::task::block_in_place(|| call.join().expect("call"));
        assert!(
            !body.contains("\"app_id\"") && !body.contains("\"title\""),
            "the revoked token's call got context: {status} {body}"
        );
        eventually(10, "the daemon logs the withdrawn prompt", || async {
            daemon
                .stderr()
                .lines()
                .any(|l| l.contains("prompt ended") && l.contains("NoAnswer(Withdrawn)"))
                .then_some(())
        })
        .await;
    })
    .await;
}
