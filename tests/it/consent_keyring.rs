//! The database key in a real Secret Service: GNOME Keyring
//! (`gnome-keyring-daemon --components=secrets`, its login keyring created
//! and unlocked with a password on stdin) on the test's private session bus.
//! No key file is written; the item `application=contextd` holds the key,
//! and the next start opens the database with it.

use crate::common;

use std::time::Duration;

use common::keyring::{Keyring, contextd_items};
use common::*;

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
