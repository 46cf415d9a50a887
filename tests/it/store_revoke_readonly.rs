//! Revocation always wins on a read-only disk too (issue 32): the data
//! directory is an ext4 file system that the kernel makes read-only
//! under the running broker (an error, with `errors=remount-ro`, as on a
//! failing disk). A revoke is in force at once, said (`revocations` in
//! ListSources), kept in its journal off that disk and retried; the
//! dashboard says it; the broker is killed (-9) before the disk takes it; once the disk is
//! writable again a restart still refuses, and writes the revocation.
//!
//! The ext4 image is common::disk's (root and a loop device; elsewhere
//! the test says so and does nothing).

use crate::common;
use crate::store_revoke_full::{granted, refused, source, start};

use std::time::Duration;

use common::dbusmock::Mock;
use common::disk::Ext4;
use common::*;
use contextd::client::json::dict_to_json;
use contextd::client::proxy::{Consent1Proxy, Context1Proxy};
use serde_json::{Value, json};

async fn my_grants(conn: &zbus::Connection) -> Vec<Value> {
    Consent1Proxy::new(conn)
        .await
        .expect("proxy")
        .list_grants()
        .await
        .expect("ListGrants")
        .iter()
        .map(dict_to_json)
        .filter(|g| g["app_id"] == my_app_id().as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_on_a_read_only_disk_holds_is_said_and_outlives_a_kill() {
    with_timeout(180, async {
        let bus = Bus::start();
        let sys = Bus::start();
        let _polkit = Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"]).await;
        let home = Home::new();
        let data = home.dir.path().join("data");
        let Some(mut disk) = Ext4::mount_or_skip(&home.dir.path().join("data.img"), &data, 16)
        else {
            return;
        };
        let mut replay = Replay::new(&home);
        replay.send(
            &json!({"type": "window", "window": {"id": "a", "app_id": "org.a.App", "title": "a"}})
                .to_string(),
        );
        replay.send(&json!({"type": "focus", "id": "a"}).to_string());
        let mut d = start(&bus, &sys, &home, &replay).await;
        let conn = bus.connect().await;
        let (ctx, consent) = granted(&conn).await;
        let me = my_app_id();

        // The disk fails: the kernel makes it read-only.
        assert!(disk.fail(), "the ext4 image did not become read-only");

        // The revoke is in force at once.
        consent
            .revoke(&me, "windows")
            .await
            .expect("a revoke on a read-only disk");
        assert!(
            refused(ctx.get_active_window().await),
            "the read after a revoke on a read-only disk was not refused"
        );
        // Said, and retried (the entry stays while the disk refuses).
        let said = eventually(15, "the revocation said to wait", || {
            let ctx = &ctx;
            async move {
                source(ctx, "revocations")
                    .await
                    .filter(|s| s["available"] == false)
            }
        })
        .await;
        let why = said["last_error"].as_str().unwrap_or_default().to_owned();
        assert!(
            why.contains("not yet stored") && why.contains("pending-revocations"),
            "{said}"
        );
        let journal = home.dir.path().join("run/contextd/pending-revocations");
        let kept = std::fs::read_to_string(&journal).expect("the journal");
        assert!(
            kept.contains("\"revoke\"") && kept.contains(me.as_str()),
            "{kept}"
        );
        // The dashboard says it too.
        let page = common::dashboard::page(&consent, "now").await;
        assert!(
            page.contains("Revocations not stored yet")
                && page.contains("1 revocation(s) are in force"),
            "{page}"
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(refused(ctx.get_active_window().await));
        assert!(
            source(&ctx, "revocations")
                .await
                .is_some_and(|s| s["available"] == false),
            "the revocation is said to be stored on a read-only disk"
        );

        // The broker dies before the disk takes it.
        d.signal(libc::SIGKILL);
        d.wait_exit(Duration::from_secs(10)).expect("killed");
        let first = d.stderr();

        // The disk is writable again (repaired, mounted anew); the
        // restart still refuses, and stores the revocation.
        disk.unmount();
        assert!(disk.mount_again(), "the ext4 image could not be mounted again");
        let mut d = start(&bus, &sys, &home, &replay).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert!(
            refused(ctx.get_active_window().await),
            "a restart resurrected the revoked grant; the first broker said:\n{first}\nthe second:\n{}",
            d.stderr()
        );
        assert_eq!(my_grants(&conn).await, Vec::<Value>::new());
        eventually(15, "the journal written and removed", || {
            let gone = !journal.exists();
            async move { gone.then_some(()) }
        })
        .await;
        assert!(
            d.stderr().contains("a waiting revocation is stored now"),
            "{}",
            d.stderr()
        );

        // Stored: without the journal, a restart refuses too.
        d.signal(libc::SIGTERM);
        d.wait_exit(Duration::from_secs(10)).expect("stopped");
        let _d = start(&bus, &sys, &home, &replay).await;
        let ctx = Context1Proxy::new(&conn).await.expect("proxy");
        assert!(refused(ctx.get_active_window().await));
        assert_eq!(my_grants(&conn).await, Vec::<Value>::new());
    })
    .await
}
