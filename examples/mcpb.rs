//! `make mcpb`'s generator (not an example to copy): writes Claude
//! Desktop's bundle directory and the MCP registry's server.json from
//! packaging/mcpb/ and the code (see packaging/mcpb/bundle.rs).
//!
//! ```text
//! cargo run --example mcpb -- bundle SRC OUT_DIR
//! cargo run --example mcpb -- server-json SRC BUNDLE.mcpb URL OUT.json
//! ```

#[path = "../packaging/mcpb/bundle.rs"]
mod bundle;

use std::path::Path;
use std::process::ExitCode;

const USAGE: &str =
    "usage: mcpb bundle SRC OUT_DIR | mcpb server-json SRC BUNDLE.mcpb URL OUT.json";

fn run(args: &[String]) -> std::io::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    match args {
        [cmd, src, out] if cmd == "bundle" => {
            let catalog = contextd::internals::mcp_tool_catalog();
            bundle::write_bundle(Path::new(src), Path::new(out), version, &catalog)
        }
        [cmd, src, mcpb, url, out] if cmd == "server-json" => {
            let sha = bundle::sha256_hex(Path::new(mcpb))?;
            let server = bundle::server_json(Path::new(src), version, url, &sha)?;
            let mut text = serde_json::to_string_pretty(&server).map_err(std::io::Error::other)?;
            text.push('\n');
            std::fs::write(out, text)
        }
        _ => Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, USAGE)),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpb: {e}");
            ExitCode::FAILURE
        }
    }
}
