//! Claude Desktop's MCP bundle and the MCP registry's server.json, made
//! from the files beside this one and from the code: the version is the
//! crate's and the tool list is `tools/list`'s (`mcp_tool_catalog`), so
//! neither is written by hand a second time. Shared by `examples/mcpb.rs`
//! (what `make mcpb` runs) and `tests/it/mcpb.rs` (which builds the same
//! bundle and checks it with the official CLI and a host).
//!
//! The directory holds `manifest.in.json` and `server.in.json` (everything
//! but the version, the tools and the package's address and digest), the
//! launcher `contextctl-mcp` (why a launcher: see its comment) and
//! `icon.png` (drawn by `icon.py`).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Map, Value, json};

/// The launcher, under `server/` in the bundle (`entry_point`).
pub const LAUNCHER: &str = "contextctl-mcp";
/// The icon, at the bundle's root (`icon`).
pub const ICON: &str = "icon.png";

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn read_json(path: &Path) -> io::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(invalid(format!("{}: not a JSON object", path.display()))),
        Err(e) => Err(invalid(format!("{}: {e}", path.display()))),
    }
}

/// The manifest's `tools`: each tool's name and the description the
/// host's model reads in `tools/list`, word for word.
pub fn manifest_tools(catalog: &[Value]) -> io::Result<Vec<Value>> {
    catalog
        .iter()
        .map(|t| match (t["name"].as_str(), t["description"].as_str()) {
            (Some(name), Some(description)) => Ok(json!({
                "name": name,
                "description": description,
            })),
            _ => Err(invalid(format!("a tool without name or description: {t}"))),
        })
        .collect()
}

/// `manifest.in.json` with the version and the tools.
pub fn manifest(src: &Path, version: &str, catalog: &[Value]) -> io::Result<Value> {
    let mut m = read_json(&src.join("manifest.in.json"))?;
    for key in ["version", "tools"] {
        if m.contains_key(key) {
            return Err(invalid(format!(
                "manifest.in.json must not set `{key}`: it comes from the code"
            )));
        }
    }
    m.insert("version".into(), version.into());
    m.insert("tools".into(), manifest_tools(catalog)?.into());
    Ok(Value::Object(m))
}

/// Write the bundle's directory `out` (emptied first): manifest.json, the
/// launcher (0755) and the icon. `mcpb pack out` makes the bundle of it.
pub fn write_bundle(src: &Path, out: &Path, version: &str, catalog: &[Value]) -> io::Result<()> {
    let manifest = manifest(src, version, catalog)?;
    match std::fs::remove_dir_all(out) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(out.join("server"))?;
    let mut text = serde_json::to_string_pretty(&manifest).map_err(io::Error::other)?;
    text.push('\n');
    std::fs::write(out.join("manifest.json"), text)?;
    let launcher = out.join("server").join(LAUNCHER);
    std::fs::copy(src.join(LAUNCHER), &launcher)?;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755))?;
    std::fs::copy(src.join(ICON), out.join(ICON))?;
    Ok(())
}

/// `server.in.json` with the version and, in its one `mcpb` package, the
/// bundle's address (`url`, where `{version}` is the version) and its
/// SHA-256 (`sha256`, lower-case hex), which the registry requires.
pub fn server_json(src: &Path, version: &str, url: &str, sha256: &str) -> io::Result<Value> {
    let mut s = read_json(&src.join("server.in.json"))?;
    s.insert("version".into(), version.into());
    let Some(Value::Array(packages)) = s.get_mut("packages") else {
        return Err(invalid("server.in.json has no `packages` list".into()));
    };
    let [Value::Object(p)] = packages.as_mut_slice() else {
        return Err(invalid(
            "server.in.json must list exactly one package".into(),
        ));
    };
    if p.get("registryType") != Some(&Value::from("mcpb")) {
        return Err(invalid("server.in.json's package is not an mcpb".into()));
    }
    p.insert(
        "identifier".into(),
        url.replace("{version}", version).into(),
    );
    p.insert("version".into(), version.into());
    p.insert("fileSha256".into(), sha256.into());
    Ok(Value::Object(s))
}

/// The lower-case hex SHA-256 of the file at `path`.
pub fn sha256_hex(path: &Path) -> io::Result<String> {
    let bytes = std::fs::read(path)?;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    Ok(digest.as_ref().iter().map(|b| format!("{b:02x}")).collect())
}
