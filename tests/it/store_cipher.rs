//! SQLCipher encrypts with the daemon's own provider (src/store/cipher.rs:
//! ring and the `aes` crate), so the broker never loads OpenSSL's
//! libcrypto (3.5 MB of it stayed resident). The file format is
//! unchanged: `upgrade::the_previous_release_database_keeps_everything`
//! opens a database that 0.1.0 wrote with OpenSSL and reads every row.

use crate::common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_encrypts_with_its_own_provider_and_maps_no_openssl() {
    with_timeout(60, async {
        let bus = Bus::start();
        let home = Home::new();
        for round in 0..2 {
            let mut d = Daemon::start(&bus, &home, &[]).await;
            let maps = std::fs::read_to_string(format!("/proc/{}/maps", d.pid())).expect("maps");
            let crypto: Vec<&str> = maps
                .lines()
                .filter(|l| l.contains("libcrypto") || l.contains("libssl"))
                .collect();
            assert!(crypto.is_empty(), "OpenSSL is mapped: {crypto:#?}");
            d.signal(libc::SIGTERM);
            let st = d.wait_exit(Duration::from_secs(10));
            assert_eq!(st.and_then(|s| s.code()), Some(0), "{st:?}\n{}", d.stderr());
            let log = d.stderr();
            assert!(log.contains("cipher=contextd"), "round {round}: {log}");
            // The second round opens what the first wrote: page 1 and the
            // quick check decrypt and authenticate every page.
            assert!(
                round == 0 || !log.contains("degraded=true"),
                "the file written by the first start no longer opens: {log}"
            );
        }
        assert!(home.db_path().exists());
    })
    .await;
}
