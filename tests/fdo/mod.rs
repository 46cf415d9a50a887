//! Helpers for the tests of the freedesktop sources: a private session bus
//! and a private "system" bus, python-dbusmock services on them, the broker
//! between the two, and waiting for `Changed` signals.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use contextd::dbus::proxy::{Context1Proxy, Subscription1Proxy};
use contextd::dbus::variant::{dict_to_json, to_json};
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use zbus::Connection;
use zbus::wire::Variant;

use crate::common::*;

/// `fut`, or a panic *inside* the test's future (so that the guards of the
/// daemon and the mocks, dropped while panicking, print their logs; the
/// outer `with_timeout` drops the future before it panics).
pub async fn within<T>(secs: u64, what: &str, fut: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {secs} s"),
    }
}

pub const MOCK_IFACE: &str = "org.freedesktop.DBus.Mock";
pub const PROPS_IFACE: &str = "org.freedesktop.DBus.Properties";
pub const MPRIS_TEST_PLAYER: &str = "org.mpris.MediaPlayer2.contextdtest";
pub const MPRIS_PATH: &str = "/org/mpris/MediaPlayer2";
pub const MPRIS_PLAYER_IFACE: &str = "org.mpris.MediaPlayer2.Player";

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
        let d = Daemon::spawn_env(home, self.envs(home, extra), &[]);
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

/// A python-dbusmock process (a template, or a bare object), killed on drop.
pub struct Mock {
    child: Option<Child>,
    pub name: String,
    address: String,
    system: bool,
    args: Vec<String>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mock {
    /// `python3 -m dbusmock [--system] --template TEMPLATE` on `bus`.
    pub async fn template(bus: &str, system: bool, template: &str, name: &str) -> Mock {
        Mock::start(
            bus,
            system,
            name,
            vec!["--template".into(), template.into()],
        )
        .await
    }

    /// A template with JSON parameters (`-p`).
    pub async fn template_with(
        bus: &str,
        system: bool,
        template: &str,
        name: &str,
        params: &str,
    ) -> Mock {
        Mock::start(
            bus,
            system,
            name,
            vec![
                "--template".into(),
                template.into(),
                "-p".into(),
                params.into(),
            ],
        )
        .await
    }

    /// The tiny MPRIS player of `tests/fdo/mpris_player.py`.
    pub async fn mpris_player(bus: &str, params: &str) -> Mock {
        let template = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fdo/mpris_player.py");
        Mock::template_with(bus, false, template, MPRIS_TEST_PLAYER, params).await
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `python3 -m dbusmock NAME PATH INTERFACE`: a bare object to fill
    /// with `AddMethod`/`AddProperty`.
    pub async fn object(bus: &str, name: &str, path: &str, iface: &str) -> Mock {
        Mock::start(
            bus,
            false,
            name,
            vec![name.into(), path.into(), iface.into()],
        )
        .await
    }

    async fn start(bus: &str, system: bool, name: &str, args: Vec<String>) -> Mock {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut m = Mock {
            child: None,
            name: name.to_owned(),
            address: bus.to_owned(),
            system,
            args,
            log: dir.path().join("dbusmock.log"),
            _dir: dir,
        };
        m.restart().await;
        m
    }

    /// (Re)start the process and wait until it owns its name.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "mock already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-m", "dbusmock"]);
        if self.system {
            cmd.arg("--system");
        }
        cmd.args(&self.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("DBUS_SYSTEM_BUS_ADDRESS", &self.address)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        self.child = Some(
            cmd.spawn()
                .expect("python3-dbusmock must be installed (make deps)"),
        );
        let conn = within(10, "connect to the mock's bus", connect_to(&self.address)).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let name = zbus::names::BusName::try_from(self.name.as_str()).expect("name");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !within(10, "NameHasOwner", dbus.name_has_owner(name.clone()))
            .await
            .unwrap_or(false)
        {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("dbusmock exited ({st}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "dbusmock did not own {} in 20 s:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kill the process (the service leaves the bus).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Call `method` of `iface` on `path` of this mock.
    pub async fn call<B>(
        &self,
        conn: &Connection,
        path: &str,
        iface: &str,
        method: &str,
        body: &B,
    ) -> zbus::Message
    where
        B: serde::Serialize + zbus::wire::DynamicType,
    {
        within(
            10,
            &format!("{iface}.{method} on the mock"),
            conn.call_method(Some(self.name.as_str()), path, Some(iface), method, body),
        )
        .await
        .unwrap_or_else(|e| panic!("{iface}.{method} on {path}: {e}\n{}", self.log()))
    }

    /// `org.freedesktop.DBus.Properties.Set` (dbusmock emits
    /// `PropertiesChanged` for it).
    pub async fn set(
        &self,
        conn: &Connection,
        path: &str,
        iface: &str,
        name: &str,
        value: Variant<'_>,
    ) {
        self.call(conn, path, PROPS_IFACE, "Set", &(iface, name, value))
            .await;
    }

    /// `org.freedesktop.DBus.Mock.UpdateProperties`: several properties in
    /// one `PropertiesChanged`.
    pub async fn update(
        &self,
        conn: &Connection,
        path: &str,
        iface: &str,
        props: Vec<(&str, Variant<'_>)>,
    ) {
        let map: std::collections::HashMap<&str, Variant<'_>> = props.into_iter().collect();
        self.call(conn, path, MOCK_IFACE, "UpdateProperties", &(iface, map))
            .await;
    }

    /// `org.freedesktop.DBus.Mock.AddProperty` (no signal).
    pub async fn add_property(
        &self,
        conn: &Connection,
        path: &str,
        iface: &str,
        name: &str,
        value: Variant<'_>,
    ) {
        self.call(conn, path, MOCK_IFACE, "AddProperty", &(iface, name, value))
            .await;
    }

    /// `org.freedesktop.DBus.Mock.EmitSignal`.
    pub async fn emit(
        &self,
        conn: &Connection,
        path: &str,
        iface: &str,
        name: &str,
        sig: &str,
        args: Vec<Variant<'_>>,
    ) {
        self.call(
            conn,
            path,
            MOCK_IFACE,
            "EmitSignal",
            &(iface, name, sig, args),
        )
        .await;
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("--- dbusmock {} log ---\n{}", self.name, self.log());
        }
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
