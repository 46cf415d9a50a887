//! The database key in a real Secret Service: GNOME Keyring
//! (`gnome-keyring-daemon --components=secrets`, its login keyring created
//! and unlocked with a password on stdin) on the test's private session bus.
//! No key file is written; the item `application=contextd` holds the key,
//! and the next start opens the database with it.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use zbus::wire::OwnedObjectPath;

const SECRETS: &str = "org.freedesktop.secrets";

/// gnome-keyring-daemon in the foreground, killed on drop.
struct Keyring(Child);

impl Keyring {
    async fn start(bus: &Bus, home: &Home) -> Keyring {
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
async fn contextd_items(bus: &Bus) -> Vec<OwnedObjectPath> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_lives_in_gnome_keyring_and_opens_the_database_again() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        let _keyring = Keyring::start(&bus, &home).await;
        let key_file = home.dir.path().join("state/contextd/db.key");

        let mut d = Daemon::start(&bus, &home, &[]).await;
        d.signal(libc::SIGTERM);
        let st = d.wait_exit(Duration::from_secs(5));
        assert_eq!(st.and_then(|s| s.code()), Some(0), "{st:?}\n{}", d.stderr());
        let log = d.stderr();
        assert!(
            log.contains("stored a new database key in the Secret Service")
                && log.contains("the Secret Service item application=contextd"),
            "{log}"
        );
        assert!(!key_file.exists(), "no key file beside the keyring");
        assert_eq!(contextd_items(&bus).await.len(), 1);

        // A restart finds the item and opens the same database with it (a
        // different key would stop the start: the file cannot be read).
        let mut d = Daemon::start(&bus, &home, &[]).await;
        d.signal(libc::SIGTERM);
        let st = d.wait_exit(Duration::from_secs(5));
        assert_eq!(st.and_then(|s| s.code()), Some(0), "{st:?}\n{}", d.stderr());
        let log = d.stderr();
        assert!(
            !log.contains("stored a new database key")
                && log.contains("the Secret Service item application=contextd"),
            "{log}"
        );
        assert!(!key_file.exists());
        assert_eq!(contextd_items(&bus).await.len(), 1, "one item, reused");
    })
    .await
}
