//! The house rules of DESIGN.md, checked on the source: publishers import
//! neither the store nor each other, the store and the core import no
//! publisher, and the core no wire or storage library. Core decides;
//! publishers convert; the store implements core's traits.

use std::path::Path;

/// `file:line: text` of every non-comment line of the Rust files under
/// `dir` that `hit` matches.
fn lines_matching(dir: &str, hit: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("read");
                for (n, line) in text.lines().enumerate() {
                    let l = line.trim();
                    if !l.starts_with("//") && hit(l) {
                        out.push(format!("{}:{}: {l}", p.display(), n + 1));
                    }
                }
            }
        }
    }
    out
}

/// Uses of `crate::M` for any `M` of `modules`.
fn imports(dir: &str, modules: &[&str]) -> Vec<String> {
    lines_matching(dir, |l| {
        modules.iter().any(|m| l.contains(&format!("crate::{m}")))
    })
}

#[test]
fn dbus_imports_neither_the_store_nor_mcp() {
    let found = imports("src/dbus", &["store", "mcp", "dashboard"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn mcp_imports_neither_the_store_nor_dbus() {
    let found = imports("src/mcp", &["store", "dbus", "dashboard"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn dashboard_imports_neither_the_store_nor_another_publisher() {
    let found = imports("src/dashboard", &["store", "dbus", "mcp"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn store_and_core_import_no_publisher() {
    let mut found = imports("src/store", &["mcp", "dbus", "dashboard"]);
    found.extend(imports("src/core", &["mcp", "dbus", "dashboard"]));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn core_uses_no_wire_or_storage_library() {
    let libs = [
        "zbus",
        "sqlx",
        "rmcp",
        "axum",
        "maud",
        "wayland_client",
        "pipewire",
    ];
    let found = lines_matching("src/core", |l| {
        libs.iter()
            .any(|lib| l.contains(&format!("use {lib}")) || l.contains(&format!("{lib}::")))
    });
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// No two modules of one layer use each other: each pair of files in
/// `src/core`, `src/mcp`, `src/store` and `src/dbus` depends one way at
/// most (a cycle means one of them holds what both need).
#[test]
fn no_two_modules_of_a_layer_use_each_other() {
    let mut cycles = Vec::new();
    for layer in ["core", "mcp", "store", "dbus"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src")
            .join(layer);
        let mut modules: Vec<String> = std::fs::read_dir(&dir)
            .expect("read_dir")
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let m = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
                (m != "mod").then_some(m)
            })
            .collect();
        modules.sort();
        let uses = |from: &str, to: &str| -> bool {
            let file = dir.join(format!("{from}.rs"));
            let file = if file.exists() {
                file
            } else {
                dir.join(from).join("mod.rs")
            };
            let Ok(text) = std::fs::read_to_string(&file) else {
                return false;
            };
            // Only the module's own code: its tests may use anything.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            code.lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("//"))
                .any(|l| {
                    [
                        format!("super::{to}::"),
                        format!("super::{to};"),
                        format!("super::{to}}}"),
                        format!("super::{to},"),
                        format!("super::{{{to}"),
                        format!("crate::{layer}::{to}::"),
                        format!("crate::{layer}::{to};"),
                    ]
                    .iter()
                    .any(|p| l.contains(p.as_str()))
                })
        };
        for (i, a) in modules.iter().enumerate() {
            for b in &modules[i + 1..] {
                if uses(a, b) && uses(b, a) {
                    cycles.push(format!("src/{layer}: {a} <-> {b}"));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}
