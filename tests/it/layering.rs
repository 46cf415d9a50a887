//! The house rules of DESIGN.md, checked on the source: publishers import
//! neither the store nor each other, the store and the core import no
//! publisher, and the core no wire or storage library. Core decides;
//! publishers convert; the store implements core's traits. And the floors
//! below: no file imports one that imports it back, identity stands on
//! model alone, config knows no source, and the replay (test code) is not
//! in a release build.

use std::collections::{BTreeMap, BTreeSet};

/// `file:line: text` of every non-comment line of the Rust files under
/// `dir` that `hit` matches.
fn lines_matching(dir: &str, hit: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![crate::common::root().join(dir)];
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

/// A module's path from the crate's root: `["core", "read"]`.
type Module = Vec<String>;
/// Each file of src/: its name and its code outside of tests.
type Files = BTreeMap<Module, (String, String)>;
/// Which files each file imports.
type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// The files of `src/` (the library's; the binaries are crates of their
/// own), each with the module path it is (`src/core/read.rs` is
/// `core::read`, `src/core/mod.rs` is `core`), and the code a build
/// compiles outside of tests: comment lines and `#[cfg(test)]` items
/// dropped (a module's tests may use anything).
fn library_files() -> Files {
    let src = crate::common::root().join("src");
    let mut files = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                if p != src.join("bin") {
                    stack.push(p);
                }
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(&src).expect("under src");
            let mut module: Vec<String> = rel
                .with_extension("")
                .iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|l| l == "mod" || l == "lib") {
                module.pop();
            }
            let text = std::fs::read_to_string(&p).expect("read");
            let tests = gated_lines(&text, |attr| attr == "#[cfg(test)]");
            let code: Vec<&str> = text
                .lines()
                .enumerate()
                .filter(|(n, l)| !tests.contains(n) && !l.trim_start().starts_with("//"))
                .map(|(_, l)| l)
                .collect();
            files.insert(module, (format!("src/{}", rel.display()), code.join("\n")));
        }
    }
    files
}

/// Every path `code` names from the crate's root or relatively
/// (`crate::…`, `super::…`, `self::…`), with `use` trees spread out
/// (`use super::{a::B, c}` names `super::a::B` and `super::c`).
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Use trees.
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let tree: String = rest[..end]
            .replace(" as ", "@")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        spread(&tree, "", &mut out);
    }
    // Paths in code: `crate::a::b::f()`, `super::Core`.
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            let before = code[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path.trim_end_matches(':').to_owned());
        }
    }
    out
}

/// `a::{b, c::{d, e}}` under `prefix` as `a::b`, `a::c::d`, `a::c::e`.
fn spread(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let Some(open) = tree.find('{') else {
        let path = tree.split('@').next().unwrap_or(tree);
        out.push(format!("{prefix}{path}"));
        return;
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let head = format!("{prefix}{}", &tree[..open]);
    let (mut depth, mut from) = (0, open + 1);
    for (i, c) in tree.char_indices().take(close).skip(open + 1) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                spread(&tree[from..i], &head, out);
                from = i + 1;
            }
            _ => {}
        }
    }
    if from < close {
        spread(&tree[from..close], &head, out);
    }
}

/// The import graph of the library's files: for each file, the files
/// whose modules it names (the deepest module of each path). A module's
/// face (`core/mod.rs`) declaring and re-exporting its own submodules is
/// not an arrow: that is what a face is; a submodule naming its face
/// (`super::Core`) is.
fn import_graph() -> (Files, Graph) {
    let files = library_files();
    let mut graph = BTreeMap::new();
    for (module, (_, code)) in &files {
        let mut deps = BTreeSet::new();
        for path in crate_paths(code) {
            let mut segments = path.split("::");
            let mut at: Vec<String> = match segments.next() {
                Some("crate") => Vec::new(),
                Some("super") => module[..module.len().saturating_sub(1)].to_vec(),
                Some("self") => module.clone(),
                _ => continue,
            };
            for s in segments {
                if s == "super" {
                    at.pop();
                    continue;
                }
                let mut next = at.clone();
                next.push(s.to_owned());
                if !files.contains_key(&next) {
                    break;
                }
                at = next;
            }
            if !at.starts_with(module) && files.contains_key(&at) {
                deps.insert(at);
            }
        }
        graph.insert(module.clone(), deps);
    }
    (files, graph)
}

/// The circles of `graph`: each strongly connected set of two or more
/// files (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        next: usize,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            for w in &self.graph[v] {
                match self.index.get(w).copied() {
                    None => {
                        self.visit(w);
                        let low = self.index[w].1.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some((wi, _)) if self.stack.contains(&w) => {
                        let low = wi.min(self.index[v].1);
                        self.index.entry(v).and_modify(|e| e.1 = low);
                    }
                    Some(_) => {}
                }
            }
            let (vi, vlow) = self.index[v];
            if vi == vlow {
                let at = self.stack.iter().rposition(|x| *x == v).expect("on stack");
                let set: Vec<Vec<String>> = self.stack.drain(at..).cloned().collect();
                if set.len() > 1 {
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

/// No file imports one that (through others) imports it back: a circle
/// means one of its files holds what the others need, and belongs on a
/// lower floor (`core/subject.rs` holds who asks; config.rs knows no
/// source). Each circle is listed with its arrows.
#[test]
fn no_file_imports_one_that_imports_it_back() {
    let (files, graph) = import_graph();
    let name = |m: &Vec<String>| files[m].0.clone();
    let mut report = Vec::new();
    for set in circles(&graph) {
        let mut lines = vec![format!("circle of {} files:", set.len())];
        for m in &set {
            let inside: Vec<String> = graph[m]
                .iter()
                .filter(|d| set.contains(d))
                .map(name)
                .collect();
            lines.push(format!("  {} -> {}", name(m), inside.join(", ")));
        }
        report.push(lines.join("\n"));
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// The 0-based numbers of the lines of `text` inside an item (with its
/// attributes) that a `#[cfg(…)]` matching `gate` compiles only
/// conditionally: from the attribute to the line where the item's
/// brackets close and it ends (`;`, `,` or `}`), as rustfmt lays it out.
fn gated_lines(text: &str, gate: impl Fn(&str) -> bool) -> BTreeSet<usize> {
    let mut gated = BTreeSet::new();
    let mut open: Option<i64> = None;
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(depth) = open.as_mut() {
            gated.insert(n);
            if l.starts_with("#[") && *depth == 0 {
                continue;
            }
            for c in l.chars() {
                match c {
                    '{' | '(' | '[' => *depth += 1,
                    '}' | ')' | ']' => *depth -= 1,
                    _ => {}
                }
            }
            if *depth <= 0 && (l.ends_with(';') || l.ends_with(',') || l.ends_with('}')) {
                open = None;
            }
        } else if l.starts_with("#[cfg(") && gate(l) {
            gated.insert(n);
            open = Some(0);
        }
    }
    gated
}

/// The replay source, its scripted clock and `--replay`/`--fake-clock`
/// are test code: every line of src/ that names them sits in an item
/// compiled only with the cargo feature `replay` (or only in unit tests),
/// so that a release build has none of it. (By hand: `cargo build
/// --release && target/release/contextd --help | grep -c replay` prints 0.)
#[test]
fn replay_is_compiled_only_with_its_feature() {
    let names = [
        "replay::",
        "mod replay",
        "ReplayArgs",
        "SourceEvent::Clock",
        "ManualClock",
        "fake_clock",
        "config.replay",
        "args.replay",
    ];
    let gate = |attr: &str| {
        attr == "#[cfg(test)]"
            || (attr.contains("feature = \"replay\"")
                && !attr.contains("not(feature = \"replay\")"))
    };
    let src = crate::common::root().join("src");
    let (mut seen, mut loose) = (0, Vec::new());
    let mut stack = vec![src.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            // The source itself: its whole module is behind the gate
            // (its `mod replay` line is checked below).
            if p.extension().is_none_or(|x| x != "rs") || p == src.join("sources/replay.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).expect("read");
            let gated = gated_lines(&text, gate);
            let event_rs = p == src.join("core/event.rs");
            for (n, line) in text.lines().enumerate() {
                let l = line.trim();
                let names_it =
                    names.iter().any(|x| l.contains(x)) || (event_rs && l.starts_with("Clock {"));
                if l.starts_with("//") || !names_it {
                    continue;
                }
                seen += 1;
                if !gated.contains(&n) {
                    loose.push(format!("{}:{}: {l}", p.display(), n + 1));
                }
            }
        }
    }
    assert!(
        loose.is_empty(),
        "replay code outside #[cfg(feature = \"replay\")]:\n{}",
        loose.join("\n")
    );
    // The module, the command line's group, the Config field, the event,
    // the daemon's hook: if none were found, the names above went stale.
    assert!(seen >= 8, "only {seen} lines name the replay: names stale?");
}

/// The gate finder itself: an attribute covers its whole item and no
/// more, and `not(feature = "replay")` is no gate.
#[test]
fn gated_lines_cover_the_item_and_stop() {
    let text = "#[cfg(feature = \"replay\")]\nif let Some(x) = a.b(c) {\n    go(x);\n}\nafter();\n#[cfg(not(feature = \"replay\"))]\nfn f() {}\n";
    let gate = |a: &str| a.contains("feature = \"replay\"") && !a.contains("not(");
    assert_eq!(gated_lines(text, gate), BTreeSet::from([0, 1, 2, 3]));
}

/// The circle finder itself: a circle of three is found, a chain is not.
#[test]
fn circles_are_found() {
    let m = |s: &str| vec![s.to_owned()];
    let graph: Graph = BTreeMap::from([
        (m("a"), BTreeSet::from([m("b")])),
        (m("b"), BTreeSet::from([m("c")])),
        (m("c"), BTreeSet::from([m("a"), m("d")])),
        (m("d"), BTreeSet::new()),
    ]);
    let found = circles(&graph);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 3);
}

/// Who a process is stands on the floor below the core: identity/ imports
/// model and nothing else of the crate (not the core, not a publisher,
/// not the store), and no wire or storage library; it reads the kernel.
#[test]
fn identity_imports_only_model() {
    let (files, graph) = import_graph();
    let mut found = Vec::new();
    for (module, deps) in &graph {
        if module.first().is_none_or(|m| m != "identity") {
            continue;
        }
        for d in deps {
            if d.first().is_none_or(|m| m != "identity" && m != "model") {
                found.push(format!("{} -> {}", files[module].0, files[d].0));
            }
        }
    }
    let libs = [
        "zbus",
        "sqlx",
        "rmcp",
        "axum",
        "hyper",
        "maud",
        "tokio",
        "wayland_client",
        "pipewire",
    ];
    found.extend(lines_matching("src/identity", |l| {
        libs.iter()
            .any(|lib| l.contains(&format!("use {lib}")) || l.contains(&format!("{lib}::")))
    }));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Sources read config.toml's settings; config.rs names no source (what
/// a source's section holds is config's type), so the arrow runs one way.
#[test]
fn config_knows_no_source() {
    let (files, graph) = import_graph();
    let config = vec!["config".to_owned()];
    let found: Vec<&String> = graph[&config]
        .iter()
        .filter(|d| d.first().is_some_and(|m| m == "sources"))
        .map(|d| &files[d].0)
        .collect();
    assert!(found.is_empty(), "config.rs imports {found:?}");
}

/// The core's services are narrow handles, not one `Core` every file of
/// the core reaches back up to: no file below core/mod.rs names
/// `super::Core` or `crate::core::Core` (issue 50 item 1): each area is
/// a handle in its own file (`read::Reads`, `watch::Watches`,
/// `manage::Manage`, …), and a handle that needs another holds it.
#[test]
fn core_files_do_not_reach_back_up_to_core() {
    let files = library_files();
    let mut found = Vec::new();
    for (module, (name, code)) in &files {
        if module.len() < 2 || module[0] != "core" {
            continue;
        }
        for path in crate_paths(code) {
            let up = module.len() - 1;
            let names_core = path == "crate::core::Core"
                || (path.ends_with("::Core")
                    && path
                        .trim_end_matches("::Core")
                        .split("::")
                        .all(|s| s == "super")
                    && path.matches("super").count() == up);
            if names_core {
                found.push(format!("{name}: {path}"));
            }
        }
    }
    found.sort();
    found.dedup();
    assert!(
        found.is_empty(),
        "{} files name Core:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// A publisher delivers a reader's change feed through `core::drive`
/// alone (issue 50 item 4): a publisher file that opens a feed
/// (`.watch(Watcher::…)`) hands it to `drive` with a `Sink` naming its
/// back-pressure rule, and none awaits a `Watch` itself, where a rule of
/// its own would be written again.
#[test]
fn publishers_deliver_change_feeds_through_core_drive() {
    let files = library_files();
    let mut found = Vec::new();
    let mut feeds = 0;
    for (module, (name, code)) in &files {
        if !module
            .first()
            .is_some_and(|m| ["dbus", "mcp", "dashboard"].contains(&m.as_str()))
        {
            continue;
        }
        if code.contains("watch.next()") || code.contains("feed.next()") {
            found.push(format!("{name}: awaits a Watch itself"));
        }
        if code.contains(".watch(Watcher::") || code.contains("watch: Watch") {
            feeds += 1;
            if !code.contains("drive(") || !code.contains("impl Sink for") {
                found.push(format!("{name}: opens a feed but does not drive it"));
            }
            if !code.contains("Backpressure::") {
                found.push(format!("{name}: names no back-pressure rule"));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert!(feeds >= 3, "the three publishers' feeds were not found");
}

/// contextctl is a client of the daemon: client/ reaches the core and the
/// MCP publisher through no module of theirs but a narrow one both sides
/// import (the admin socket's requests and answers and the ticket's
/// lifetime are `model::admin`, the never-share rules `model::privacy`),
/// never their internals.
#[test]
fn client_reaches_core_and_mcp_through_no_internals() {
    let (files, graph) = import_graph();
    let mut found = Vec::new();
    for (module, deps) in &graph {
        if module.first().is_none_or(|m| m != "client") {
            continue;
        }
        for d in deps {
            if d.first().is_some_and(|m| m == "core" || m == "mcp") {
                found.push(format!("{} -> {}", files[module].0, files[d].0));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
