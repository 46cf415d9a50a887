//! Claude Desktop's MCP bundle (`make mcpb`, packaging/mcpb/): built by the
//! same code as `make mcpb` (packaging/mcpb/bundle.rs), validated, packed
//! and unpacked by the official MCPB CLI (npm @anthropic-ai/mcpb, pinned in
//! scripts/deps.sh), then installed the way Claude Desktop does it: a host
//! (tests/mcpb/host.mjs) resolves the manifest's command with the MCPB
//! library and starts it with the TypeScript SDK, which passes only
//! `HOME LOGNAME PATH SHELL TERM USER`. The launcher execs the installed
//! `contextctl mcp`; the daemon is activated on the session bus at its
//! default address, in a private mount namespace (tests/mcp/minimal_env.sh),
//! and serves `initialize` and `tools/list` with the manifest's tools. The
//! broker names the host (the process that started the launcher), not the
//! launcher, nor contextctl. Without contextctl the host is told what to
//! install; without a session to start the daemon in, the host's
//! connection fails and the bridge's reason is on the server's stderr
//! (Claude Desktop's log).
//! The registry's server.json is validated against the published schema
//! (tests/fixtures/mcp-registry), with the packed bundle's SHA-256.

use crate::common;

#[path = "../../packaging/mcpb/bundle.rs"]
#[allow(dead_code)]
mod bundle;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

fn repo() -> &'static Path {
    crate::common::root()
}

/// Node 22 (`make test` exports CONTEXTD_NODE; `scripts/deps.sh --node`
/// installs it).
fn node() -> PathBuf {
    std::env::var_os("CONTEXTD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".tools/node22/bin/node"))
}

/// The clone's tools: the MCPB CLI and library, the TypeScript SDK.
fn tools() -> PathBuf {
    repo().join(".tools")
}

fn mcpb_cli() -> PathBuf {
    tools().join("mcpb/node_modules/@anthropic-ai/mcpb/dist/cli/cli.js")
}

fn python() -> PathBuf {
    std::env::var_os("CONTEXTD_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools().join("venv/bin/python"))
}

fn need_tools() {
    assert!(
        node().exists() && mcpb_cli().exists(),
        "Node 22 and the MCPB CLI are missing ({}, {}): run scripts/deps.sh --node",
        node().display(),
        mcpb_cli().display()
    );
}

/// The app id the broker gives the host, a `node` that is not a system
/// program: its executable, as Claude Desktop's would be (or its desktop
/// entry's id when the desktop started it in an `app-…` scope).
fn host_app_id() -> String {
    let real = std::fs::canonicalize(node()).expect("node path");
    format!("exe:{}", real.display())
}

/// `mcpb ARGS…`, which must succeed; its stdout.
fn mcpb(args: &[&Path]) -> String {
    let mut cmd = Command::new(node());
    cmd.arg(mcpb_cli()).args(args);
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "mcpb {args:?} failed ({st}):\n{out}\n{err}");
    out
}

/// The bundle of this build, packed and unpacked: (the .mcpb, the
/// directory Claude Desktop would run it from, with a space in its path as
/// Claude Desktop's "Claude Extensions" has).
fn packed_bundle(work: &Path) -> (PathBuf, PathBuf, Value) {
    let dir = work.join("contextd");
    let catalog = contextd::internals::mcp_tool_catalog();
    bundle::write_bundle(
        &repo().join("packaging/mcpb"),
        &dir,
        env!("CARGO_PKG_VERSION"),
        &catalog,
    )
    .expect("write the bundle's directory");
    let out = mcpb(&[Path::new("validate"), &dir]);
    assert!(out.contains("Manifest schema validation passes!"), "{out}");
    assert!(!out.contains("ERROR"), "{out}");
    let file = work.join("contextd.mcpb");
    let out = mcpb(&[Path::new("pack"), &dir, &file]);
    assert!(
        file.is_file(),
        "mcpb pack wrote no {}:\n{out}",
        file.display()
    );
    let installed = work.join("Claude Extensions/contextd");
    mcpb(&[Path::new("unpack"), &file, &installed]);
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(installed.join("manifest.json")).expect("unpacked manifest"),
    )
    .expect("manifest JSON");
    (file, installed, manifest)
}

/// A directory holding a `contextctl` link to the one under test: what an
/// installed package puts on PATH (the kernel gives the link's target as
/// the process's executable, the sibling of the contextd under test, which
/// the broker trusts as the bridge).
fn installed_bin(work: &Path) -> PathBuf {
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    std::os::unix::fs::symlink(contextctl_bin(), bin.join("contextctl")).expect("link contextctl");
    bin
}

fn parse_report(out: &str, err: &str) -> Value {
    serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("the host's report is not JSON ({e}):\n{out}\n{err}"))
}

fn uid() -> u32 {
    // SAFETY: getuid(2) has no failure mode.
    unsafe { libc::getuid() }
}

#[test]
fn the_packed_bundle_serves_its_tools_to_a_host_with_six_variables() {
    need_tools();
    let work = tempfile::tempdir().expect("tempdir");
    let (_, installed, manifest) = packed_bundle(work.path());

    // The manifest: what issue 30 asks for, and its tools are tools/list's.
    assert_eq!(manifest["server"]["type"], "binary", "{manifest:#}");
    assert_eq!(
        manifest["compatibility"]["platforms"],
        serde_json::json!(["linux"])
    );
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert!(installed.join("icon.png").is_file());
    let launcher = installed.join("server/contextctl-mcp");
    assert!(launcher.is_file(), "no launcher in the unpacked bundle");

    let home = Home::new();
    home.deny_undecided();
    // The host may see the session, nothing else: a read of the power
    // state is refused under the host's own id.
    home.write_policy(&[(host_app_id().as_str(), &["session"])]);
    let bin = installed_bin(work.path());
    let ns = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new("unshare");
    if uid() != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .arg("bash")
        .arg(repo().join("tests/mcp/minimal_env.sh"))
        .arg(contextd_bin())
        .arg(ns.path())
        .arg(node())
        .arg(repo().join("tests/mcpb/host.mjs"))
        .arg(tools())
        .arg(&installed)
        .arg(r#"["get_session_state","get_power"]"#)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
    for (k, v) in home.envs_for("") {
        if k != "DBUS_SESSION_BUS_ADDRESS" && k != "XDG_RUNTIME_DIR" {
            cmd.env(k, v);
        }
    }
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "the host failed ({st}):\n{err}\n{out}");
    let r = parse_report(&out, &err);
    assert!(r["error"].is_null(), "{r:#}\n{err}");

    // Claude Desktop's command: the launcher in the unpacked directory.
    assert_eq!(r["config"]["command"], "/bin/sh", "{r:#}");
    assert_eq!(
        r["config"]["args"],
        serde_json::json!([launcher.display().to_string()]),
        "{r:#}"
    );
    // It became the contextctl under test (exec: same process), which got
    // only the six variables.
    let exe = std::fs::canonicalize(contextctl_bin()).expect("contextctl path");
    assert_eq!(
        r["process"]["exe"],
        exe.display().to_string(),
        "the server process is not contextctl: {r:#}"
    );
    let environ: BTreeSet<&str> = r["process"]["environ"]
        .as_array()
        .unwrap_or_else(|| panic!("no environ: {r:#}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        environ,
        BTreeSet::from(["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"])
    );

    // initialize and tools/list: the tools of the manifest, in its order,
    // with its descriptions.
    assert_eq!(r["server"]["serverInfo"]["name"], "contextd", "{r:#}");
    let listed: Vec<(&str, &str)> = r["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {r:#}"))
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default(),
                t["description"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let declared: Vec<(&str, &str)> = manifest["tools"]
        .as_array()
        .expect("manifest tools")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default(),
                t["description"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(!declared.is_empty());
    assert_eq!(listed, declared, "tools/list and the manifest differ");

    // The broker asked about the host, not about the launcher's shell nor
    // about contextctl: the granted category reads, the other is refused
    // naming the host.
    let session = &r["calls"]["get_session_state"];
    assert_ne!(session["isError"], Value::Bool(true), "{session}");
    let power = &r["calls"]["get_power"];
    assert_eq!(power["isError"], Value::Bool(true), "{power}");
    let text = power.to_string();
    assert!(
        text.contains(&host_app_id()),
        "refused under another id: {power}"
    );
}

#[test]
fn without_contextctl_the_host_is_told_what_to_install() {
    need_tools();
    let work = tempfile::tempdir().expect("tempdir");
    let (_, installed, _) = packed_bundle(work.path());
    let home = Home::new();
    let ns = tempfile::tempdir().expect("tempdir");
    // No contextctl anywhere the launcher looks, whatever this machine has
    // installed: an empty /usr/local/bin, and in /usr/bin a file that is
    // not executable over any contextctl (an overlay: the machine's
    // /usr/bin is untouched).
    let script = r#"
set -eu
ns=$1; shift
mount -t tmpfs tmpfs /usr/local/bin
mount -t tmpfs tmpfs "$ns"
mkdir "$ns/upper" "$ns/work"
mount -t overlay overlay -o "lowerdir=/usr/bin,upperdir=$ns/upper,workdir=$ns/work" /usr/bin
: > /usr/bin/contextctl
exec env -i HOME="$HOME" LOGNAME=contextd-test PATH=/usr/local/bin:/usr/bin:/bin \
    SHELL=/bin/sh TERM=dumb USER=contextd-test "$@"
"#;
    let mut cmd = Command::new("unshare");
    if uid() != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .args(["sh", "-c", script, "sh"])
        .arg(ns.path())
        .arg(node())
        .arg(repo().join("tests/mcpb/host.mjs"))
        .arg(tools())
        .arg(&installed)
        .arg("[]")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.dir.path());
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "the host failed ({st}):\n{err}\n{out}");
    let r = parse_report(&out, &err);
    // What Claude Desktop shows: initialize failed, with the reason.
    let error = r["error"]
        .as_str()
        .unwrap_or_else(|| panic!("the host connected without contextctl: {r:#}"));
    assert!(
        error.contains("contextd is not installed") && error.contains("apt install"),
        "{r:#}"
    );
    assert!(r["server"].is_null(), "{r:#}");
    // And its log of the server says the same.
    let stderr = r["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("contextd is not installed"), "{r:#}");
}

#[test]
fn without_a_session_the_bridge_says_why_on_stderr() {
    need_tools();
    let work = tempfile::tempdir().expect("tempdir");
    let (_, installed, _) = packed_bundle(work.path());
    let home = Home::new();
    let bin = installed_bin(work.path());
    // contextctl is installed, but no login session runs: an empty
    // /run/user, so no runtime directory, no session bus, no daemon to
    // reach or start.
    let script = r#"
set -eu
mkdir -p /run/user
mount -t tmpfs -o mode=0755 tmpfs /run/user
exec env -i HOME="$HOME" LOGNAME=contextd-test PATH="$PATH" \
    SHELL=/bin/sh TERM=dumb USER=contextd-test "$@"
"#;
    let mut cmd = Command::new("unshare");
    if uid() != 0 {
        cmd.arg("--map-root-user");
    }
    cmd.args(["--mount", "--propagation", "private", "--"])
        .args(["sh", "-c", script, "sh"])
        .arg(node())
        .arg(repo().join("tests/mcpb/host.mjs"))
        .arg(tools())
        .arg(&installed)
        .arg("[]")
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", home.dir.path());
    let (st, out, err) = run_cmd(&mut cmd, 120);
    assert!(st.success(), "the host failed ({st}):\n{err}\n{out}");
    let r = parse_report(&out, &err);
    assert!(
        r["error"].is_string() && r["server"].is_null(),
        "the host connected without a daemon: {r:#}"
    );
    // The bridge's reason, in Claude Desktop's log of the server.
    let stderr = r["stderr"].as_str().unwrap_or_default();
    assert!(
        stderr.contains("contextd") && stderr.contains("session"),
        "{r:#}"
    );
}

#[test]
fn server_json_is_valid_against_the_published_schema() {
    need_tools();
    let work = tempfile::tempdir().expect("tempdir");
    let (file, _, manifest) = packed_bundle(work.path());
    let src = repo().join("packaging/mcpb");
    let sha = bundle::sha256_hex(&file).expect("sha256");
    let url = "https://contextd.org/download/{version}/contextd.mcpb";
    let server =
        bundle::server_json(&src, env!("CARGO_PKG_VERSION"), url, &sha).expect("server.json");
    let path = work.path().join("server.json");
    std::fs::write(&path, server.to_string()).expect("write server.json");

    let package = &server["packages"][0];
    assert_eq!(package["registryType"], "mcpb");
    assert_eq!(package["fileSha256"], sha.as_str());
    assert_eq!(server["version"], manifest["version"]);
    assert_eq!(
        package["identifier"],
        format!(
            "https://contextd.org/download/{}/contextd.mcpb",
            env!("CARGO_PKG_VERSION")
        )
    );

    let schema = repo().join("tests/fixtures/mcp-registry/server.schema.2025-12-11.json");
    assert_eq!(
        server["$schema"],
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    );
    // Draft 7 with its format checks (jsonschema comes with PyPI mcp in
    // the venv of scripts/deps.sh --python). A server.json the schema
    // refuses must be refused too, so that a pass means something.
    let check = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
v = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
doc = json.load(open(sys.argv[2]))
errors = [f"{list(e.path)}: {e.message}" for e in v.iter_errors(doc)]
bad = dict(doc, name="no slash", description="x" * 101)
refused = len(list(v.iter_errors(bad)))
print(json.dumps({"errors": errors, "refused": refused}))
"#;
    let mut cmd = Command::new(python());
    cmd.args(["-c", check]).arg(&schema).arg(&path);
    let (st, out, err) = run_cmd(&mut cmd, 60);
    assert!(
        st.success(),
        "the schema check failed ({st}):\n{out}\n{err}"
    );
    let r: Value = serde_json::from_str(out.trim()).expect("check output");
    assert_eq!(
        r["errors"],
        serde_json::json!([]),
        "server.json: {r}\n{server:#}"
    );
    assert_eq!(
        r["refused"], 2,
        "the schema let a bad server.json pass: {r}"
    );
}

/// The launcher is POSIX sh (Claude Desktop runs it with /bin/sh, dash on
/// Debian and Ubuntu): it parses, and shellcheck (scripts/deps.sh installs
/// it) finds nothing in it as sh.
#[test]
fn the_launcher_is_clean_posix_sh() {
    let launcher = repo().join("packaging/mcpb").join(bundle::LAUNCHER);
    let (st, out, err) = run_cmd(Command::new("dash").arg("-n").arg(&launcher), 30);
    assert!(st.success(), "dash -n: {out}{err}");
    let (st, out, err) = run_cmd(
        Command::new("shellcheck")
            .args(["--shell=sh", "--severity=style"])
            .arg(&launcher),
        60,
    );
    assert!(st.success(), "shellcheck ({st}):\n{out}{err}");
}
