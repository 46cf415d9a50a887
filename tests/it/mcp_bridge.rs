//! `contextctl mcp` itself: bad input through it gets JSON-RPC errors and
//! harms neither the bridge nor the daemon; it starts the daemon through
//! D-Bus activation; the host it reports is its parent, while a process
//! that connects to the socket directly is itself the host.

use crate::common;
use crate::mcp_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use mcp_support::*;
use serde_json::Value;

/// A running `contextctl mcp` whose parent is this test (the host).
struct Bridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Bridge {
    fn spawn(env: Vec<(String, String)>) -> Bridge {
        Bridge::spawn_program(contextctl_bin(), env)
    }

    fn spawn_program(program: &str, env: Vec<(String, String)>) -> Bridge {
        let mut child = Command::new(program)
            .arg("mcp")
            .env_clear()
            .envs(env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn contextctl mcp");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                match l {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Bridge {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(bytes).expect("write to the bridge");
        w.write_all(b"\n").expect("newline");
        w.flush().expect("flush");
    }

    /// The next message from the daemon.
    fn recv(&self) -> Value {
        let l = self
            .lines
            .recv_timeout(Duration::from_secs(15))
            .expect("an answer within 15 s");
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))
    }

    /// The answer to request `id`, skipping notifications.
    fn answer(&self, id: i64) -> Value {
        loop {
            let m = self.recv();
            if m["id"] == id {
                return m;
            }
            assert!(m.get("method").is_some(), "unexpected message {m}");
        }
    }

    fn close_and_wait(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        for _ in 0..1000 {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the bridge did not exit after stdin closed");
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INIT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn code(m: &Value) -> i64 {
    m["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code in {m}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_stdio_gets_errors_and_harms_nothing() {
    with_timeout(120, async {
        let bus = Bus::start();
        let home = Home::new();
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        let mut d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let mut b = Bridge::spawn(home.envs(&bus));
        b.send(INIT);
        assert_eq!(b.answer(1)["result"]["serverInfo"]["name"], "contextd");
        b.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

        b.send(b"{this is not json");
        let m = b.recv();
        assert_eq!(code(&m), -32700, "{m}");
        assert!(m["id"].is_null(), "{m}");
        b.send(br#"{"id":2,"method":"ping"}"#);
        assert_eq!(code(&b.recv()), -32600);
        b.send(br#"{"jsonrpc":"2.0","id":3,"method":"does/not/exist"}"#);
        assert_eq!(code(&b.answer(3)), -32601);
        b.send(br#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":["x"]}}"#);
        assert_eq!(code(&b.answer(4)), -32602);
        b.send(br#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{}}"#);
        assert_eq!(code(&b.answer(5)), -32602);

        // A version the server does not know: it answers with one it
        // supports (the spec's negotiation), on a second connection.
        let mut v = Bridge::spawn(home.envs(&bus));
        v.send(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}"#);
        let m = v.answer(1);
        assert_eq!(m["result"]["protocolVersion"], "2025-11-25", "{m}");
        assert!(v.close_and_wait().success());

        // 10 MiB on one line: refused without being held, and the
        // connection goes on.
        let mut huge = br#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":""#.to_vec();
        huge.resize(10 * 1024 * 1024, b'x');
        huge.extend_from_slice(br#""}}"#);
        b.send(&huge);
        let m = b.recv();
        assert_eq!(code(&m), -32600, "{m}");
        assert!(m["error"]["message"].as_str().is_some_and(|s| s.contains("larger than")), "{m}");
        b.send(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_active_window"}}"#);
        let m = b.answer(7);
        assert_eq!(m["result"]["structuredContent"]["window"]["id"], "w1", "{m}");

        // The host hangs up: the bridge exits cleanly.
        let st = b.close_and_wait();
        assert!(st.success(), "bridge exit: {st}");
        // The daemon is unaffected: alive, and a new host is served.
        assert!(d.child.try_wait().expect("wait").is_none(), "daemon died");
        let mut b2 = Bridge::spawn(home.envs(&bus));
        b2.send(INIT);
        assert!(b2.answer(1)["result"].is_object());
        b2.send(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
        assert!(b2.answer(2)["result"].is_object());
        assert!(b2.close_and_wait().success());
        assert!(!d.stderr().contains("panicked"), "{}", d.stderr());
        d.signal(libc::SIGTERM);
        let st = d.wait_exit(Duration::from_secs(5)).expect("exit");
        assert_eq!(exit_code(st), "exit 0");
    })
    .await;
}

/// Only the `contextctl` installed beside the daemon speaks for its parent:
/// a copy elsewhere, with the same name, is identified as itself, so a
/// program cannot borrow its parent's grants by its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contextctl_elsewhere_is_its_own_host() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        home.deny_undecided();
        // Granted: this test process, the parent of both bridges.
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window"}}"#;

        let mut real = Bridge::spawn(home.envs(&bus));
        real.send(INIT);
        real.answer(1);
        real.send(call);
        let m = real.answer(2);
        assert_eq!(m["result"]["structuredContent"]["window"]["id"], "w1", "{m}");
        assert!(real.close_and_wait().success());

        let dir = tempfile::tempdir().expect("tempdir");
        let copy = dir.path().join("contextctl");
        std::fs::copy(contextctl_bin(), &copy).expect("copy contextctl");
        let copy_id = format!(
            "exe:{}",
            std::fs::canonicalize(&copy).expect("real path").display()
        );
        let mut fake = Bridge::spawn_program(copy.to_str().expect("utf-8 path"), home.envs(&bus));
        fake.send(INIT);
        fake.answer(1);
        fake.send(call);
        let m = fake.answer(2);
        assert_eq!(m["result"]["isError"], true, "{m}");
        let text = m["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains(&copy_id), "the copy must be the host: {m}");
        assert!(!text.contains("w1"), "{m}");
        assert!(fake.close_and_wait().success());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_on_the_socket_itself_is_the_host() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        // Granted: this test process. Connecting without contextctl, it is
        // its own host (its parent, cargo, is not asked about).
        home.write_policy(&[(&my_app_id(), &["windows"])]);
        let mut replay = Replay::new(&home);
        let _d = daemon_with_windows(&bus, &home, &mut replay, &[]).await;
        let sock = runtime(&home).join("mcp.sock");
        let mode = std::fs::metadata(runtime(&home)).map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o777
        });
        assert_eq!(mode.ok(), Some(0o700), "the runtime directory must be 0700");
        let s = UnixStream::connect(&sock).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut w = s.try_clone().expect("clone");
        let mut r = BufReader::new(s);
        let mut send = |b: &[u8]| {
            w.write_all(b).expect("write");
            w.write_all(b"\n").expect("write");
        };
        send(INIT);
        send(br#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"context://windows/active"}}"#);
        let mut got = None;
        for _ in 0..10 {
            let mut line = String::new();
            r.read_line(&mut line).expect("read");
            let m: Value = serde_json::from_str(&line).expect("json");
            if m["id"] == 2 {
                got = Some(m);
                break;
            }
        }
        let m = got.expect("an answer to the read");
        let text = m["result"]["contents"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("\"id\":\"w1\""), "{m}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_starts_the_daemon_through_dbus_activation() {
    with_timeout(60, async {
        let home = Home::new();
        let dir = tempfile::tempdir().expect("tempdir");
        let services = dir.path().join("services");
        std::fs::create_dir_all(&services).expect("mkdir");
        std::fs::write(
            services.join("org.contextd.Broker1.service"),
            format!(
                "[D-BUS Service]\nName=org.contextd.Broker1\nExec={}\n",
                contextd_bin()
            ),
        )
        .expect("service file");
        let address = format!("unix:path={}/bus", dir.path().display());
        std::fs::write(
            dir.path().join("bus.conf"),
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}/bus</listen>
  <servicedir>{}</servicedir>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>"#,
                dir.path().display(),
                services.display()
            ),
        )
        .expect("bus config");
        // The bus passes its environment on to what it activates: the
        // broker's directories come from here.
        let env = home.envs_for(&address);
        let bus = Command::new("dbus-daemon")
            .arg(format!(
                "--config-file={}",
                dir.path().join("bus.conf").display()
            ))
            .arg("--nofork")
            .env_clear()
            .envs(env.clone())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon");
        struct Kill(Vec<u32>);
        impl Drop for Kill {
            fn drop(&mut self) {
                for pid in &self.0 {
                    // SAFETY: kill(2) on a process this test started.
                    unsafe { libc::kill(*pid as i32, libc::SIGTERM) };
                }
            }
        }
        // The bus last: the daemon goes first.
        let mut cleanup = Kill(vec![bus.id()]);
        let bus_path = dir.path().join("bus");
        for _ in 0..500 {
            if bus_path.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!runtime(&home).join("mcp.sock").exists());

        let mut b = Bridge::spawn(env);
        b.send(INIT);
        let m = b.answer(1);
        assert_eq!(m["result"]["serverInfo"]["name"], "contextd", "{m}");
        // The activated daemon is ours to stop.
        let conn = connect_to(&address).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let pid = dbus
            .get_connection_unix_process_id(zbus::names::BusName::try_from(BUS_NAME).expect("name"))
            .await
            .expect("the daemon owns its name");
        cleanup.0.insert(0, pid);
        assert!(b.close_and_wait().success());
        drop(cleanup);
        drop(bus);
    })
    .await;
}

/// An MCP session is listed in `Consent1.ListReaders` with the host's
/// `clientInfo`, and `EndReader` closes it: the bridge sees its socket
/// close and exits; a new session may start (nothing was decided).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_ends_an_mcp_session() {
    with_timeout(60, async {
        // Granted before the start: a policy written later is reloaded
        // when its change is seen, which a first call could beat.
        let me = my_app_id();
        let m = Managed::start("[consent]\nundecided = \"deny\"\n", &[(&me, &["windows"])]).await;
        let (bus, home) = (&m.bus, &m.home);
        let conn = bus.connect().await;
        let consent = contextd::client::proxy::Consent1Proxy::new(&conn)
            .await
            .expect("proxy");

        let mut host = Bridge::spawn(home.envs(bus));
        host.send(INIT);
        host.answer(1);
        let reader = eventually(10, "the session in ListReaders", || async {
            consent
                .list_readers()
                .await
                .ok()?
                .iter()
                .map(contextd::client::json::dict_to_json)
                .find(|r| r["channel"] == "mcp-stdio")
        })
        .await;
        assert_eq!(reader["app_id"], my_app_id(), "{reader}");
        assert_eq!(reader["client"], "raw 1", "{reader}");
        assert_eq!(reader["transport"], "stdio", "{reader}");
        let id = reader["id"].as_u64().expect("id");
        assert!(consent.end_reader(id).await.expect("EndReader"));
        let st = tokio::task::block_in_place(|| {
            for _ in 0..1000 {
                if let Ok(Some(st)) = host.child.try_wait() {
                    return st;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("the bridge did not exit when its session was ended");
        });
        let _ = st;
        assert!(!consent.end_reader(id).await.expect("EndReader"), "gone");
        eventually(10, "no reader left", || async {
            consent.list_readers().await.ok()?.is_empty().then_some(())
        })
        .await;

        // Nothing was decided: a new session works.
        let mut again = Bridge::spawn(home.envs(bus));
        again.send(INIT);
        again.answer(1);
        again.send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_active_window"}}"#);
        let m = again.answer(2);
        assert_eq!(m["result"]["structuredContent"]["window"]["id"], "w1", "{m}");
    })
    .await;
}
