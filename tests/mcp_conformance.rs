//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! npm, pinned in scripts/deps.sh) against the daemon's `/mcp`: every
//! server scenario must pass, the pending ones included (`--suite all`).
//!
//! Only with the `conformance` cargo feature (`make test` runs it that
//! way): the suite calls fixture tools (`test_simple_text`, ...) that a
//! real build does not have, and its client sends no bearer token, so the
//! daemon runs with `conformance_anonymous = true` (a setting that exists
//! only in that build), which makes a token-less request the subject
//! `token:conformance`. Host and Origin are still checked, and the suite
//! checks that itself (`dns-rebinding-protection`).

#![cfg(feature = "conformance")]

mod common;
mod mcp_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use mcp_support::*;

fn node() -> PathBuf {
    std::env::var_os("CONTEXTD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/node22/bin/node"))
}

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_conformance_suite_passes_every_server_scenario() {
    with_timeout(600, async {
        assert!(
            node().exists() && suite().exists(),
            "Node 22 and the conformance suite are missing: run scripts/deps.sh --node"
        );
        let bus = Bus::start();
        let home = Home::new();
        std::fs::write(
            home.dir.path().join("config/contextd/config.toml"),
            "[mcp.http]\nlisten = \"127.0.0.1:0\"\nconformance_anonymous = true\n",
        )
        .expect("config");
        home.write_policy(&[("token:conformance", &["*"])]);
        let _d = Daemon::start(&bus, &home, &[]).await;
        let addr = http_addr(&home);
        let out = home.dir.path().join("conformance-results");
        let node_bin = node();
        let path = format!(
            "{}:{}",
            node_bin
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            std::env::var("PATH").unwrap_or_default()
        );
        let (st, stdout, stderr) = run_cmd(
            Command::new(&node_bin)
                .arg(suite())
                .args([
                    "server",
                    "--suite",
                    "all",
                    "--url",
                    &format!("http://{addr}/mcp"),
                    "-o",
                ])
                .arg(&out)
                .env("PATH", path)
                .current_dir(home.dir.path()),
            540,
        );
        println!("{stdout}");
        assert!(
            st.success(),
            "conformance suite failed ({}):\n{stdout}\n{stderr}",
            exit_code(st)
        );
    })
    .await;
}
