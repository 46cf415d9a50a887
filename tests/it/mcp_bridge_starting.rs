//! A host started while the broker is still starting: the name
//! `org.contextd.Broker1` is taken (the broker takes it before it binds its
//! MCP socket) and there is no activation file (a broker started by hand,
//! `make run`). The bridge waits for the socket instead of saying the
//! broker is not running (the bus daemon answers StartServiceByName with
//! ServiceUnknown for a name without an activation file even while it has
//! an owner, and the bridge once took that for "not running").

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use mcp_support::runtime;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_started_before_the_socket_waits_for_it() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        // The "broker": owns the name, no socket yet.
        let conn = bus.connect().await;
        conn.request_name("org.contextd.Broker1")
            .await
            .expect("own the name");
        let mut bridge = Command::new(contextctl_bin())
            .arg("mcp")
            .env_clear()
            .envs(home.envs(&bus))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("contextctl mcp");
        // The bridge looks for the socket, finds none, and asks the bus;
        // the socket is bound only once it is past that.
        let dir = runtime(&home);
        std::fs::create_dir_all(&dir).expect("runtime dir");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            bridge.try_wait().expect("wait").is_none(),
            "the bridge gave up while the broker starts: {:?}",
            bridge
                .wait_with_output()
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        );
        let listener = UnixListener::bind(dir.join("mcp.sock")).expect("bind the socket");
        let mut stdin = bridge.stdin.take().expect("stdin");
        stdin.write_all(b"{\"ping\":1}\n").expect("write");
        listener.set_nonblocking(true).expect("nonblocking");
        let conn_in = eventually(20, "the bridge connects to the socket", || async {
            listener.accept().ok().map(|(c, _)| c)
        })
        .await;
        conn_in.set_nonblocking(false).expect("blocking");
        conn_in
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut line = String::new();
        BufReader::new(conn_in).read_line(&mut line).expect("read");
        assert_eq!(line, "{\"ping\":1}\n", "the host's line reaches the broker");
        drop(stdin);
        let _ = bridge.kill();
        let _ = bridge.wait();
    })
    .await;
}
