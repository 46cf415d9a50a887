//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! npm, pinned in scripts/deps.sh) against the daemon's `/mcp`, in two
//! releases: the newest, run with `--requirements 2026-07-28` and with
//! `--requirements 2025-11-25` (what each revision requires, frozen at its
//! release: every scored scenario must pass, and the unscored ones we serve
//! too: the JSON Schema 2020-12 keywords and the Tasks extension), and
//! 0.1.16, the last 2025-era release, with `--suite all` (its session
//! scenarios are stricter than the newest's).
//!
//! Only with the `conformance` cargo feature (`make test` builds every
//! test with it; `tests/it/main.rs` declares this module only then): the
//! suite calls fixture tools (`test_simple_text`, ...) that contextd does
//! not have, and its client sends no bearer token, so the daemon is
//! `contextd-conformance` (tests/mcp_conformance/: contextd with the
//! fixtures installed as an MCP extension, which also makes a token-less
//! request the subject `token:conformance`), a binary that only that
//! feature builds. Every other test runs `contextd`. Host and Origin are
//! still checked, and the suite checks that itself
//! (`dns-rebinding-protection`).

use crate::common;
use crate::mcp_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use mcp_support::*;

fn node() -> PathBuf {
    std::env::var_os("CONTEXTD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::common::root().join(".tools/node22/bin/node"))
}

/// The suite installed under `.tools/DIR`.
fn suite(dir: &str) -> PathBuf {
    crate::common::root()
        .join(".tools")
        .join(dir)
        .join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// One run of the suite against `url`; its report, after asserting that
/// it passed.
fn run_suite(dir: &str, url: &str, args: &[&str], out: &Path) -> String {
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
            .arg(suite(dir))
            .args(["server", "--url", url])
            .args(args)
            .arg("-o")
            .arg(out)
            .env("PATH", path)
            .current_dir(out.parent().unwrap_or(out)),
        540,
    );
    println!("== {dir} {args:?}\n{stdout}");
    assert!(
        st.success(),
        "conformance suite {dir} {args:?} failed ({}):\n{stdout}\n{stderr}\nthe failed checks:\n{}",
        exit_code(st),
        failed_checks(out).join("\n")
    );
    stdout
}

/// The checks under `out` (each scenario's `checks.json`) that failed,
/// with their message and details: the report names only the scenario,
/// and the results directory is gone with the test's temporary files.
fn failed_checks(out: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![out.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "checks.json") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                let checks: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                for c in checks.as_array().into_iter().flatten() {
                    if c["status"] == "FAILURE" {
                        found.push(format!("{}: {c}", p.display()));
                    }
                }
            }
        }
    }
    found
}

/// The unscored scenarios of a `--requirements` run, as (name, passed).
/// The suite lists them after "Not scored for REVISION" with ✓ or ✗.
fn unscored(report: &str) -> Vec<(String, bool)> {
    report
        .lines()
        .skip_while(|l| !l.starts_with("Not scored"))
        .filter_map(|l| {
            let l = l.trim();
            let (mark, rest) = l.split_at_checked(l.find(' ')?)?;
            let name = rest.split_whitespace().next()?.to_owned();
            match mark {
                "✓" => Some((name, true)),
                "✗" => Some((name, false)),
                _ => None,
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_conformance_suites_pass_every_server_scenario() {
    with_timeout(900, async {
        assert!(
            node().exists() && suite("conformance").exists() && suite("conformance-2025").exists(),
            "Node 22 and the conformance suites are missing: run scripts/deps.sh --node"
        );
        let bus = Bus::start();
        let home = Home::new();
        std::fs::write(
            home.dir.path().join("config/contextd/config.toml"),
            "[mcp.http]\nlisten = \"127.0.0.1:0\"\n",
        )
        .expect("config");
        home.write_policy(&[("token:conformance", &["*"])]);
        let bin = env!("CARGO_BIN_EXE_contextd-conformance");
        let _d = Daemon::spawn_bin(bin, &home, home.envs(&bus), &[]);
        wait_for_owner(&bus, true).await;
        let url = format!("http://{}/mcp", http_addr(&home));
        let out = |name: &str| home.dir.path().join(name);

        for (revision, serves) in [
            // 2026-07-28 does not score the JSON Schema 2020-12 keywords
            // (input schemas keep allOf, if/then/else, $anchor) nor the
            // Tasks extension; we serve both, so both must pass.
            (
                "2026-07-28",
                &["json-schema-2020-12", "tasks-lifecycle"][..],
            ),
            ("2025-11-25", &["json-schema-2020-12"][..]),
        ] {
            let report = run_suite(
                "conformance",
                &url,
                &["--requirements", revision],
                &out(&format!("results-{revision}")),
            );
            assert!(
                report.contains("Total:") && report.contains(" 0 failed"),
                "{revision}: a scenario failed:\n{report}"
            );
            let unscored = unscored(&report);
            let failing: Vec<_> = unscored.iter().filter(|(_, ok)| !ok).collect();
            assert!(
                failing.is_empty(),
                "{revision}: unscored scenarios failed: {failing:?}\n{report}"
            );
            for name in serves {
                assert!(
                    unscored.iter().any(|(n, ok)| n == name && *ok),
                    "{revision}: {name} did not run and pass:\n{report}"
                );
            }
        }

        run_suite(
            "conformance-2025",
            &url,
            &["--suite", "all"],
            &out("results-0.1.16"),
        );
    })
    .await;
}

/// The fixtures are no part of the product: no `cfg` for them in src/,
/// and the `contextd` binary of this very build (with the `conformance`
/// feature on) holds none of their names, while `contextd-conformance`
/// does. A fixture that slipped back into the library (a tool anyone
/// could call, a token-less way in) fails here.
#[test]
fn fixtures_are_not_in_the_product() {
    fn walk(dir: &Path, hits: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, hits);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if text.contains(concat!("feature = \"", "conformance\"")) {
                    hits.push(p.display().to_string());
                }
            }
        }
    }
    let mut hits = Vec::new();
    walk(&crate::common::root().join("src"), &mut hits);
    assert!(hits.is_empty(), "conformance cfg in src: {hits:?}");

    let holds = |bin: &str, what: &str| {
        let bytes = std::fs::read(bin).expect("binary");
        memchr::memmem::find(&bytes, what.as_bytes()).is_some()
    };
    let fixture = concat!("test_simple", "_text");
    assert!(holds(env!("CARGO_BIN_EXE_contextd-conformance"), fixture));
    assert!(!holds(contextd_bin(), fixture));
}
