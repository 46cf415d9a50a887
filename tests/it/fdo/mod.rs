//! Helpers for the tests of the freedesktop sources: a private session bus
//! and a private "system" bus, python-dbusmock services on them, the broker
//! between the two, and waiting for `Changed` signals.

#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use contextd::client::json::{dict_to_json, to_json};
use contextd::client::proxy::{Context1Proxy, Subscription1Proxy};
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use zbus::Connection;

use crate::common::*;

pub const MPRIS_TEST_PLAYER: &str = "org.mpris.MediaPlayer2.contextdtest";
pub const MPRIS_PATH: &str = "/org/mpris/MediaPlayer2";
pub const MPRIS_PLAYER_IFACE: &str = "org.mpris.MediaPlayer2.Player";
pub const GEOCLUE: &str = "org.freedesktop.GeoClue2";
pub const GEOCLUE_MANAGER: &str = "/org/freedesktop/GeoClue2/Manager";

/// A private session bus and a private system bus.
pub struct Buses {
    pub session: Bus,
    pub system: Bus,
}

impl Buses {
    pub fn start() -> Buses {
        Buses {
            session: Bus::start(),
            system: Bus::start(),
        }
    }

    /// The broker's environment: both buses, plus `extra`.
    pub fn envs(&self, home: &Home, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env = home.envs(&self.session);
        env.push((
            "DBUS_SYSTEM_BUS_ADDRESS".into(),
            self.system.address.clone(),
        ));
        for (k, v) in extra {
            env.retain(|(ek, _)| ek != k);
            env.push(((*k).to_owned(), (*v).to_owned()));
        }
        env
    }

    /// Start the broker on both buses and wait for its name.
    pub async fn daemon(&self, home: &Home, extra: &[(&str, &str)]) -> Daemon {
        self.daemon_with(home, extra, &[]).await
    }

    /// [`Buses::daemon`] with command-line arguments.
    pub async fn daemon_with(&self, home: &Home, extra: &[(&str, &str)], args: &[&str]) -> Daemon {
        let d = Daemon::spawn_env(home, self.envs(home, extra), args);
        within(
            15,
            "the broker owns its name",
            wait_for_owner(&self.session, true),
        )
        .await;
        d
    }
}

/// A private bus that can be stopped and started again at the same
/// address (to take the "system bus" away from the broker and back).
pub struct RestartableBus {
    dir: tempfile::TempDir,
    child: Option<Child>,
    pub address: String,
}

impl RestartableBus {
    pub fn start() -> RestartableBus {
        let dir = tempfile::tempdir().expect("tempdir");
        let address = format!("unix:path={}/bus", dir.path().display());
        let mut b = RestartableBus {
            dir,
            child: None,
            address,
        };
        b.restart();
        b
    }

    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "bus already running");
        let config = self.dir.path().join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>"#,
                self.dir.path().display()
            ),
        )
        .expect("bus config");
        let _ = std::fs::remove_file(self.dir.path().join("bus"));
        let mut child = Command::new("dbus-daemon")
            .arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--print-address=1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("address");
        assert!(!line.trim().is_empty(), "dbus-daemon printed no address");
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub async fn connect(&self) -> Connection {
        connect_to(&self.address).await
    }
}

impl Drop for RestartableBus {
    fn drop(&mut self) {
        self.stop();
    }
}

// Not every fdo test names each of these.
#[allow(unused_imports)]
pub use crate::common::dbusmock::{MOCK_IFACE, Mock, PROPS_IFACE};

impl Mock {
    /// The tiny MPRIS player of `tests/fdo/mpris_player.py`.
    pub async fn mpris_player(bus: &str, params: &str) -> Mock {
        let template = &crate::common::repo_file("tests/fdo/mpris_player.py");
        Mock::template_with(bus, false, template, MPRIS_TEST_PLAYER, params).await
    }

    /// GeoClue2 of `tests/fdo/geoclue2.py` on the system bus at `bus`.
    pub async fn geoclue(bus: &str, params: &str) -> Mock {
        let template = &crate::common::repo_file("tests/fdo/geoclue2.py");
        Mock::template_with(bus, true, template, GEOCLUE, params).await
    }
}

/// The snapshot as the caller on `conn` sees it.
pub async fn snapshot(conn: &Connection) -> Value {
    let p = Context1Proxy::new(conn).await.expect("proxy");
    dict_to_json(
        &within(10, "GetSnapshot", p.get_snapshot())
            .await
            .expect("GetSnapshot"),
    )
}

/// The record of source `name` in `ListSources`.
pub async fn source(conn: &Connection, name: &str) -> Option<Value> {
    let p = Context1Proxy::new(conn).await.expect("proxy");
    within(10, "ListSources", p.list_sources())
        .await
        .expect("ListSources")
        .iter()
        .map(dict_to_json)
        .find(|s| s["name"] == name)
}

/// Wait until the snapshot satisfies `pred`; returns it.
pub async fn until_snapshot(conn: &Connection, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(10, what, || async {
        let s = snapshot(conn).await;
        pred(&s).then_some(s)
    })
    .await
}

/// Wait until source `name` is (un)available; returns its record.
pub async fn until_source(conn: &Connection, name: &str, available: bool) -> Value {
    eventually(
        15,
        &format!("source {name} available={available}"),
        || async {
            source(conn, name)
                .await
                .filter(|s| s["available"] == available)
        },
    )
    .await
}

/// A subscription's `Changed` signals as (category, data).
pub struct Changes {
    stream: std::pin::Pin<Box<dyn Stream<Item = (String, Value)> + Send>>,
    _sub: Subscription1Proxy<'static>,
}

impl Changes {
    pub async fn subscribe(conn: &Connection, categories: &[&str]) -> Changes {
        let ctx = Context1Proxy::new(conn).await.expect("proxy");
        let path = within(10, "Subscribe", ctx.subscribe(categories))
            .await
            .expect("Subscribe");
        let sub = Subscription1Proxy::builder(conn)
            .path(path)
            .build()
            .await
            .expect("subscription proxy");
        let stream = sub
            .receive_changed()
            .await
            .expect("Changed stream")
            .filter_map(|sig| async move {
                let args = sig.args().ok()?;
                let data = Value::Object(
                    args.data()
                        .iter()
                        .map(|(k, v)| (k.clone(), to_json(v)))
                        .collect(),
                );
                Some((args.category().to_string(), data))
            });
        Changes {
            stream: Box::pin(stream),
            _sub: sub,
        }
    }

    /// The first change that satisfies `pred` within `secs`, and how long
    /// it took from the call.
    pub async fn until(
        &mut self,
        secs: u64,
        what: &str,
        pred: impl Fn(&str, &Value) -> bool,
    ) -> (Value, Duration) {
        let t = Instant::now();
        let deadline = t + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.stream.next()).await {
                Ok(Some((cat, data))) => {
                    if pred(&cat, &data) {
                        return (data, t.elapsed());
                    }
                }
                Ok(None) => panic!("subscription ended while waiting for: {what}"),
                Err(_) => panic!("no Changed within {secs} s for: {what}"),
            }
        }
    }

    /// No change at all within `ms`.
    pub async fn none_within(&mut self, ms: u64) -> Option<(String, Value)> {
        tokio::time::timeout(Duration::from_millis(ms), self.stream.next())
            .await
            .ok()
            .flatten()
    }
}

/// The grant line for `contextctl`.
pub fn contextctl_app() -> String {
    let p = std::fs::canonicalize(contextctl_bin()).expect("contextctl path");
    format!("exe:{}", p.display())
}

/// `contextctl ARGS` on the session bus of `buses`; (stdout, stderr).
pub fn contextctl(buses: &Buses, home: &Home, args: &[&str]) -> (String, String) {
    let (st, out, err) = run_cmd(
        Command::new(contextctl_bin())
            .args(args)
            .env_clear()
            .envs(home.envs(&buses.session))
            .env("RUST_LOG", "off"),
        20,
    );
    assert!(st.success(), "contextctl {args:?} failed: {err}");
    (out, err)
}
