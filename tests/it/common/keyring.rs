//! A real Secret Service on a test's private session bus: GNOME Keyring
//! (`gnome-keyring-daemon --components=secrets`, its login keyring
//! created and unlocked with a password on stdin), and what it holds.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};

use zbus::wire::{OwnedObjectPath, OwnedVariant, Variant};

use super::{Bus, Home, eventually};

const SECRETS: &str = "org.freedesktop.secrets";

/// gnome-keyring-daemon in the foreground, killed on drop.
pub struct Keyring(Child);

impl Keyring {
    pub async fn start(bus: &Bus, home: &Home) -> Keyring {
        let mut child = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(home.envs(bus))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (make deps installs gnome-keyring)");
        // The login keyring's password, then EOF: it is created unlocked.
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"test password").expect("password");
        drop(stdin);
        let keyring = Keyring(child);
        let conn = bus.connect().await;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await.expect("proxy");
        eventually(10, "gnome-keyring owns org.freedesktop.secrets", || {
            let dbus = dbus.clone();
            async move {
                let name = zbus::names::BusName::try_from(SECRETS).ok()?;
                dbus.name_has_owner(name).await.ok().filter(|b| *b)
            }
        })
        .await;
        keyring
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The unlocked items with `application=contextd`.
pub async fn contextd_items(bus: &Bus) -> Vec<OwnedObjectPath> {
    let conn = bus.connect().await;
    let attrs: HashMap<&str, &str> = [("application", "contextd")].into();
    let reply = conn
        .call_method(
            Some(SECRETS),
            "/org/freedesktop/secrets",
            Some("org.freedesktop.Secret.Service"),
            "SearchItems",
            &(attrs,),
        )
        .await
        .expect("SearchItems");
    let (unlocked, _locked): (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) =
        reply.body().deserialize().expect("reply");
    unlocked
}

/// The secret of the item at `item`, through a `plain` session.
pub async fn secret(bus: &Bus, item: &OwnedObjectPath) -> Vec<u8> {
    let conn = bus.connect().await;
    let reply = conn
        .call_method(
            Some(SECRETS),
            "/org/freedesktop/secrets",
            Some("org.freedesktop.Secret.Service"),
            "OpenSession",
            &("plain", Variant::from("")),
        )
        .await
        .expect("OpenSession");
    let (_, session): (OwnedVariant, OwnedObjectPath) = reply.body().deserialize().expect("reply");
    let reply = conn
        .call_method(
            Some(SECRETS),
            item.as_str(),
            Some("org.freedesktop.Secret.Item"),
            "GetSecret",
            &(&session,),
        )
        .await
        .expect("GetSecret");
    let ((_, _, value, _),): ((OwnedObjectPath, Vec<u8>, Vec<u8>, String),) =
        reply.body().deserialize().expect("secret");
    value
}
