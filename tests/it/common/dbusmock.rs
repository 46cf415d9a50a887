//! python-dbusmock services (Debian's python3-dbusmock) on a private bus:
//! templates (polkitd, notification_daemon, logind, upower,
//! networkmanager, or a template file) and bare objects, restartable,
//! killed on drop (their log printed when the test panics).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zbus::Connection;
use zbus::wire::Variant;

use super::{connect_to, within};

pub const MOCK_IFACE: &str = "org.freedesktop.DBus.Mock";
pub const PROPS_IFACE: &str = "org.freedesktop.DBus.Properties";

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
        Mock::spawn(
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
        Mock::spawn(
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

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `python3 -m dbusmock NAME PATH INTERFACE`: a bare object to fill
    /// with `AddMethod`/`AddProperty`.
    pub async fn object(bus: &str, name: &str, path: &str, iface: &str) -> Mock {
        Mock::spawn(
            bus,
            false,
            name,
            vec![name.into(), path.into(), iface.into()],
        )
        .await
    }

    async fn spawn(bus: &str, system: bool, name: &str, args: Vec<String>) -> Mock {
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

/// The well-known name each template owns.
fn template_name(template: &str) -> &'static str {
    match template {
        "polkitd" => "org.freedesktop.PolicyKit1",
        "notification_daemon" => "org.freedesktop.Notifications",
        "logind" => "org.freedesktop.login1",
        "upower" => "org.freedesktop.UPower",
        "networkmanager" => "org.freedesktop.NetworkManager",
        _ => panic!("unknown dbusmock template {template}"),
    }
}

impl Mock {
    /// Template `template` on the bus at `address`, as a system service
    /// (`system`) or a session one, under the name the template owns.
    pub async fn start(address: &str, system: bool, template: &str) -> Mock {
        Mock::template(address, system, template, template_name(template)).await
    }

    /// python-dbusmock's polkitd on the bus at `address`, authorising
    /// exactly `actions`.
    pub async fn polkit_allowing(address: &str, actions: &[&str]) -> Mock {
        let m = Mock::start(address, true, "polkitd").await;
        m.set_allowed(actions).await;
        m
    }

    /// polkitd: authorise exactly `actions` from now on.
    pub async fn set_allowed(&self, actions: &[&str]) {
        let conn = connect_to(&self.address).await;
        self.call(
            &conn,
            "/org/freedesktop/PolicyKit1/Authority",
            MOCK_IFACE,
            "SetAllowed",
            &(actions.to_vec(),),
        )
        .await;
    }
}
