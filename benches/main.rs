//! `make bench` and `make soak`: every bench, one binary.
//!
//! Each bench was a binary of its own, and each linked the whole crate:
//! `make test` builds the benches (to keep them compiling and linted), and
//! ten links were a sixth of its build. Now each bench is a module with a
//! `main`, and this binary runs the ones named on its command line, each
//! in a process of its own (this binary again with one name), so that a
//! bench starts as clean as it did alone: `cargo bench --bench benches --
//! broker wayland`. Without a name it runs every bench of `make bench`
//! (the soak is only run by name: it fails on errors, the benches never).

mod common;
#[path = "../tests/it/pipewire_client/mod.rs"]
mod pipewire_client;

mod boundary;
mod broker;
mod dashboard;
mod fdo;
mod history;
mod mcp;
mod pipewire;
mod provider;
mod readers;
mod shells;
mod soak;
mod v4l2;
mod wayland;

use std::process::{Command, ExitCode};

/// Every bench by name, in `make bench`'s order.
const BENCHES: &[(&str, fn())] = &[
    ("broker", broker::main),
    ("pipewire", pipewire::main),
    ("fdo", fdo::main),
    ("wayland", wayland::main),
    ("mcp", mcp::main),
    ("history", history::main),
    ("provider", provider::main),
    ("dashboard", dashboard::main),
    ("v4l2", v4l2::main),
    ("shells", shells::main),
    ("readers", readers::main),
    ("boundary", boundary::main),
    ("soak", soak::main),
];

/// What runs without a name.
const NOT_BY_DEFAULT: &[&str] = &["soak"];

fn bench(name: &str) -> Option<fn()> {
    BENCHES.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

fn main() -> ExitCode {
    // cargo bench passes `--bench`; a bench's own arguments follow its name.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let names: Vec<&str> = match args.first() {
        None => BENCHES
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| !NOT_BY_DEFAULT.contains(n))
            .collect(),
        // One name (and maybe its own arguments): run it here.
        Some(first) if args.len() == 1 || bench(&args[1]).is_none() => {
            let Some(run) = bench(first) else {
                let known: Vec<&str> = BENCHES.iter().map(|(n, _)| *n).collect();
                eprintln!("no bench {first:?}; the benches: {}", known.join(" "));
                return ExitCode::from(2);
            };
            run();
            return ExitCode::SUCCESS;
        }
        Some(_) => args.iter().map(String::as_str).collect(),
    };
    // Several: each in a process of its own, in order; all run, and the
    // status says whether any failed.
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("this binary's path: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = Vec::new();
    for name in names {
        if bench(name).is_none() {
            eprintln!("no bench {name:?}");
            failed.push(name);
            continue;
        }
        match Command::new(&exe).arg(name).status() {
            Ok(st) if st.success() => {}
            Ok(st) => {
                eprintln!("bench {name}: {st}");
                failed.push(name);
            }
            Err(e) => {
                eprintln!("bench {name}: {e}");
                failed.push(name);
            }
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("failed: {}", failed.join(" "));
        ExitCode::FAILURE
    }
}
