//! python-dbusmock services (Debian's python3-dbusmock) on a private bus,
//! killed on drop.

use std::process::{Child, Command, Stdio};

use super::{connect_to, eventually};

pub struct Mock {
    child: Child,
    pub address: String,
    pub name: String,
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
    /// Start `template` on the bus at `address`, as a system service
    /// (`system`) or a session one, and wait until it owns its name.
    pub async fn start(address: &str, system: bool, template: &str) -> Mock {
        let name = template_name(template).to_owned();
        let child = Command::new("/usr/bin/python3")
            .args([
                "-m",
                "dbusmock",
                if system { "--system" } else { "--session" },
            ])
            .args(["--template", template])
            .env(
                if system {
                    "DBUS_SYSTEM_BUS_ADDRESS"
                } else {
                    "DBUS_SESSION_BUS_ADDRESS"
                },
                address,
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3-dbusmock must be installed (make deps)");
        let conn = connect_to(address).await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        let bn = zbus::names::BusName::try_from(name.clone()).expect("name");
        eventually(20, &format!("dbusmock {template} owns {name}"), || {
            let dbus = dbus.clone();
            let bn = bn.clone();
            async move {
                dbus.name_has_owner(bn)
                    .await
                    .ok()
                    .filter(|b| *b)
                    .map(|_| ())
            }
        })
        .await;
        Mock {
            child,
            address: address.to_owned(),
            name,
        }
    }

    /// Call a method of the mock's `org.freedesktop.DBus.Mock` interface
    /// (or any other) on `path`.
    pub async fn call<B>(&self, path: &str, iface: &str, method: &str, body: &B) -> zbus::Message
    where
        B: serde::Serialize + zbus::wire::DynamicType,
    {
        let conn = connect_to(&self.address).await;
        conn.call_method(Some(self.name.as_str()), path, Some(iface), method, body)
            .await
            .unwrap_or_else(|e| panic!("{iface}.{method} on {path}: {e}"))
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
        self.call(
            "/org/freedesktop/PolicyKit1/Authority",
            "org.freedesktop.DBus.Mock",
            "SetAllowed",
            &(actions.to_vec(),),
        )
        .await;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.kill();
    }
}
