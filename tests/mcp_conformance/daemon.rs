//! `contextd-conformance`: the daemon the official MCP conformance suite
//! runs against (tests/it/mcp_conformance.rs). It is `contextd` itself
//! (the same `main`, arguments and config, included below), with the
//! suite's fixtures ([`fixtures::Fixtures`]) installed as an MCP extension
//! first. Built only with the `conformance` cargo feature, never in a
//! release: the product's library holds no fixture and no switch for one.

#[path = "../../src/bin/contextd.rs"]
mod daemon_main;
mod fixtures;

fn main() -> std::process::ExitCode {
    let fixtures = Box::new(fixtures::Fixtures);
    if contextd::internals::mcp_extension::install(fixtures).is_err() {
        eprintln!("contextd-conformance: an MCP extension was installed already");
        return std::process::ExitCode::from(1);
    }
    daemon_main::main()
}
