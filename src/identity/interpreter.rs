//! Rule 4a, the interpreter: a process whose executable is an interpreter
//! (`/usr/bin/node`, `/usr/bin/python3.11`, …) is named by what it runs,
//! read from its command line and working directory through the pinned
//! `/proc/PID` directory: `node:@anthropic-ai/claude-code` (the package a
//! script in `node_modules` belongs to), `python3:/home/u/bin/tool.py` (a
//! script by its real path), `python3:http.server` (`python3 -m`).
//!
//! Without this every Node host (Claude Code, Gemini CLI, the MCP
//! Inspector, any npm script) is `exe:/usr/bin/node` and every Python host
//! `exe:/usr/bin/python3.11`: a grant to one is a grant to all, and a
//! prompt cannot tell them apart.
//!
//! What it is worth: a command line is what the process says (it can even
//! rewrite it), so the id is a *claim* ([`IdentitySource::Interpreter`],
//! shown as such). It tells honest apps apart; it binds nothing against
//! code of the same user that chooses to pretend, which could run the
//! interpreter with any script it likes. It never makes an id *stronger*
//! than the executable's: the ids are different subjects, and a grant to
//! `exe:/usr/bin/node` covers no `node:…` id.
//!
//! Which interpreters: system programs of the known families (or those
//! `[identity] interpreters` lists), and those that version managers
//! (nvm, fnm, volta, pyenv, uv, asdf, mise, conda, Homebrew) install, by
//! their layouts ([`version_manager`]), since that is how many developers
//! run their AI hosts.
//!
//! When the script cannot be found (code on the command line, `-c`, `-e`,
//! standard input, a REPL, an option we do not know that takes a value, a
//! file that is gone, a path that is not UTF-8), the executable's id stays.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::procfs::{ProcDir, open_at, read_limited};
use super::system::is_system_executable;
use super::{Identity, IdentityError, Result};
use crate::model::{AppId, IdentitySource};

/// Longest command line we read (`/proc/PID/cmdline`); a longer one is
/// not parsed (the executable's id stays).
const MAX_CMDLINE: usize = 128 * 1024;
/// Longest `package.json` we read for its `name`.
const MAX_PACKAGE_JSON: usize = 1024 * 1024;

/// The families of interpreters whose command lines we can read, and the
/// prefix of the ids they give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Node,
    Python,
    Gjs,
    Perl,
    Ruby,
    Bun,
    Deno,
}

impl Kind {
    /// The prefix of the ids of processes it runs.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Kind::Node => "node",
            Kind::Python => "python3",
            Kind::Gjs => "gjs",
            Kind::Perl => "perl",
            Kind::Ruby => "ruby",
            Kind::Bun => "bun",
            Kind::Deno => "deno",
        }
    }

    /// The family of an executable's file name: `python3.11`, `python`,
    /// `perl5.36.0`, `ruby3.1`, `nodejs`, `gjs-console`.
    fn of_name(name: &str) -> Option<Kind> {
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        Some(match stem {
            "node" | "nodejs" => Kind::Node,
            "python" => Kind::Python,
            "gjs" | "gjs-console" => Kind::Gjs,
            "perl" => Kind::Perl,
            "ruby" => Kind::Ruby,
            "bun" => Kind::Bun,
            "deno" => Kind::Deno,
            _ => return None,
        })
    }

    /// Whether scripts are named by their `node_modules` package.
    fn has_packages(self) -> bool {
        matches!(self, Kind::Node | Kind::Bun | Kind::Deno)
    }
}

/// The interpreters to look into (`[identity] interpreters` of
/// config.toml): names matched against the executable's file name when it
/// is a system program ([`is_system_executable`]), and absolute paths
/// matched exactly (an interpreter installed elsewhere, `~/.nvm/…/node`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreters {
    /// (name, whether a version may follow it: `python3*`).
    names: Vec<(String, bool)>,
    paths: Vec<PathBuf>,
}

/// The default list, as config.toml documents it.
pub(crate) const DEFAULT_INTERPRETERS: &[&str] = &[
    "node",
    "nodejs",
    "python3*",
    "python",
    "gjs",
    "gjs-console",
    "perl",
    "perl5*",
    "ruby*",
    "bun",
    "deno",
];

impl Default for Interpreters {
    fn default() -> Self {
        Interpreters::parse(DEFAULT_INTERPRETERS.iter().copied())
            .unwrap_or_else(|_| Interpreters::none())
    }
}

impl Interpreters {
    /// None: every process is known by its executable.
    pub fn none() -> Self {
        Interpreters {
            names: Vec::new(),
            paths: Vec::new(),
        }
    }

    /// Parse the configured entries: `NAME`, `NAME*` (a version may
    /// follow: `python3*` is `python3.11` too) or an absolute path. The
    /// name must be of a family we can read (node, nodejs, python…, gjs,
    /// perl…, ruby…, bun, deno).
    pub fn parse<'a>(
        entries: impl IntoIterator<Item = &'a str>,
    ) -> std::result::Result<Self, String> {
        let mut out = Interpreters::none();
        for entry in entries {
            if entry.starts_with('/') {
                let path = Path::new(entry);
                let known = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(Kind::of_name);
                if known.is_none() {
                    return Err(unknown(entry));
                }
                out.paths.push(path.to_owned());
                continue;
            }
            let (name, versioned) = match entry.strip_suffix('*') {
                Some(n) => (n, true),
                None => (entry, false),
            };
            let plain = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
            if !plain {
                return Err(format!(
                    "interpreter {entry:?}: give a program's file name (a `*` only at the end, for a version) or an absolute path"
                ));
            }
            if Kind::of_name(name).is_none() {
                return Err(unknown(entry));
            }
            out.names.push((name.to_owned(), versioned));
        }
        Ok(out)
    }

    /// The family of the interpreter at `exe` (a path from
    /// `/proc/PID/exe`), if it is one of ours.
    pub(crate) fn kind_of(&self, exe: &str) -> Option<Kind> {
        let path = Path::new(exe);
        let name = path.file_name()?.to_str()?;
        if self.paths.iter().any(|p| p == path) {
            return Kind::of_name(name);
        }
        let listed = self.names.iter().any(|(n, versioned)| {
            name == n
                || (*versioned
                    && name
                        .strip_prefix(n.as_str())
                        .is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit() || b == b'.')))
        });
        (listed && (is_system_executable(path) || version_manager(path).is_some()))
            .then(|| Kind::of_name(name))?
    }
}

/// The version managers whose interpreters are recognised without
/// configuration, each by the directory layout it installs into (below
/// any home or prefix; what the kernel gives as `/proc/PID/exe`, a
/// virtual environment's `python` being a link to one of these). `<v>`
/// is one directory (a version, a distribution, an environment's name).
/// A layout is matched on the path's last directories, so the same
/// interpreter is recognised wherever its manager's root is (`~/.nvm`,
/// `$NVM_DIR`, `~/.local/share/fnm`, `~/.fnm`, …).
const VERSION_MANAGERS: &[(&str, &[&str])] = &[
    // ~/.nvm/versions/node/v22.1.0/bin/node
    ("nvm", &[".nvm", "versions", "node", "<v>", "bin"]),
    ("nvm", &["nvm", "versions", "node", "<v>", "bin"]),
    // ~/.local/share/fnm/node-versions/v22.1.0/installation/bin/node
    ("fnm", &["node-versions", "<v>", "installation", "bin"]),
    // ~/.volta/tools/image/node/22.1.0/bin/node
    ("volta", &["tools", "image", "node", "<v>", "bin"]),
    // ~/.pyenv/versions/3.11.7/bin/python3.11
    ("pyenv", &[".pyenv", "versions", "<v>", "bin"]),
    ("pyenv", &["pyenv", "versions", "<v>", "bin"]),
    // ~/.local/share/uv/python/cpython-3.12.4-linux-x86_64-gnu/bin/python3.12
    ("uv", &["uv", "python", "<v>", "bin"]),
    // ~/.local/share/mise/installs/python/3.12.4/bin/python3 (before
    // asdf, whose layout it shares below the root)
    ("mise", &["mise", "installs", "<v>", "<v>", "bin"]),
    // ~/.asdf/installs/nodejs/22.1.0/bin/node
    ("asdf", &["installs", "<v>", "<v>", "bin"]),
    // ~/miniconda3/bin/python3.12, ~/miniconda3/envs/NAME/bin/python
    ("conda", &["miniconda3", "bin"]),
    ("conda", &["miniconda3", "envs", "<v>", "bin"]),
    ("conda", &["anaconda3", "bin"]),
    ("conda", &["anaconda3", "envs", "<v>", "bin"]),
    ("conda", &["miniforge3", "bin"]),
    ("conda", &["miniforge3", "envs", "<v>", "bin"]),
    ("conda", &["mambaforge", "bin"]),
    ("conda", &["mambaforge", "envs", "<v>", "bin"]),
    ("conda", &["conda", "bin"]),
    ("conda", &["conda", "envs", "<v>", "bin"]),
    ("conda", &["micromamba", "envs", "<v>", "bin"]),
    // /home/linuxbrew/.linuxbrew/Cellar/node/22.1.0/bin/node
    ("homebrew", &[".linuxbrew", "Cellar", "<v>", "<v>", "bin"]),
];

/// Which version manager installed the interpreter at `path`, if one of
/// [`VERSION_MANAGERS`] did: its layout, and the file owned by the user
/// (or root) and writable by no one else. Such an interpreter is the
/// user's own, as much as `/usr/bin/node` is the system's; without this,
/// every script on nvm's node or pyenv's Python was one app, and a grant
/// to one MCP host a grant to all. The id stays a claim (see the module
/// docs): it tells honest hosts apart.
pub(crate) fn version_manager(path: &Path) -> Option<&'static str> {
    let dirs: Vec<&str> = path
        .parent()?
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let manager = VERSION_MANAGERS.iter().find_map(|(name, layout)| {
        let tail = dirs.get(dirs.len().checked_sub(layout.len())?..)?;
        tail.iter()
            .zip(layout.iter())
            .all(|(d, l)| *l == "<v>" || d == l)
            .then_some(*name)
    })?;
    owned_by_user(path).then_some(manager)
}

/// The file is a regular file of the user's (or root's), and neither its
/// group nor others may write it.
fn owned_by_user(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid(2) has no failure mode and touches no memory.
    let me = unsafe { libc::getuid() };
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && (m.uid() == me || m.uid() == 0) && m.mode() & 0o022 == 0)
}

fn unknown(entry: &str) -> String {
    format!(
        "interpreter {entry:?}: contextd reads the command lines of node, nodejs, python, gjs, perl, ruby, bun and deno (with a version after the name, as in python3.11), not of this one"
    )
}

/// The list in force (set by the daemon from config.toml; the default
/// until then). A process-wide setting, because every source of identities
/// (D-Bus callers, MCP hosts, PipeWire and MPRIS streams, V4L2 users) must
/// name a process alike.
fn configured() -> &'static RwLock<Arc<Interpreters>> {
    static LIST: std::sync::OnceLock<RwLock<Arc<Interpreters>>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| RwLock::new(Arc::new(Interpreters::default())))
}

/// Use `list` from now on (the daemon calls this at start).
pub(crate) fn set_interpreters(list: Interpreters) {
    *configured().write().unwrap_or_else(|e| e.into_inner()) = Arc::new(list);
}

pub(super) fn current() -> Arc<Interpreters> {
    configured()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// What a command line says is run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target<'a> {
    /// A file, as given (relative to the working directory, or absolute).
    Script(&'a str),
    /// A module (`python3 -m NAME`).
    Module(&'a str),
}

/// How an interpreter's options are written. Short options may be
/// clustered (`-Bu`); a value follows attached (`-Xdev`) or as the next
/// argument (`-X dev`).
struct Grammar {
    /// Short options taking a value, attached or as the next argument.
    short_value: &'static str,
    /// Short options whose value is only the rest of the cluster (`perl
    /// -Mstrict`, `-0777`), if any.
    short_attached: &'static str,
    /// Short options after which no script file runs (code on the command
    /// line, help, a change of directory or a search of `$PATH`).
    short_none: &'static str,
    /// The short option that names a module to run (`python3 -m`).
    short_module: Option<char>,
    /// Long options taking the next argument as their value (unless
    /// written `--opt=value`).
    long_value: &'static [&'static str],
    /// Long options after which no script file runs.
    long_none: &'static [&'static str],
    /// Subcommands that run the script named next (`deno run`, `bun run`).
    run: &'static [&'static str],
    /// Subcommands that run no script file of ours (`bun x`, `deno task`).
    no_run: &'static [&'static str],
}

const NODE: Grammar = Grammar {
    short_value: "rC",
    short_attached: "",
    short_none: "epichv",
    short_module: None,
    long_value: &[
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "--conditions",
        "--title",
        "--input-type",
        "--env-file",
        "--env-file-if-exists",
        "--redirect-warnings",
        "--openssl-config",
        "--icu-data-dir",
        "--diagnostic-dir",
        "--report-dir",
        "--report-directory",
        "--report-filename",
        "--report-signal",
        "--disable-warning",
        "--watch-path",
        "--localstorage-file",
        "--cpu-prof-dir",
        "--cpu-prof-name",
        "--heap-prof-dir",
        "--heap-prof-name",
        "--trace-event-categories",
        "--trace-event-file-pattern",
        "--unhandled-rejections",
        "--dns-result-order",
        "--experimental-policy",
        "--policy-integrity",
        "--secure-heap",
        "--secure-heap-min",
        "--stack-trace-limit",
        "--max-http-header-size",
        "--heapsnapshot-signal",
        "--tls-cipher-list",
        "--tls-keylog",
        "--test-reporter",
        "--test-reporter-destination",
        "--test-name-pattern",
        "--test-shard",
        "--experimental-config-file",
    ],
    long_none: &[
        "--eval",
        "--print",
        "--interactive",
        "--check",
        "--help",
        "--version",
        "--v8-options",
        "--test",
        "--run",
    ],
    run: &[],
    no_run: &[],
};

const PYTHON: Grammar = Grammar {
    short_value: "XW",
    short_attached: "",
    short_none: "chV?",
    short_module: Some('m'),
    long_value: &["--check-hash-based-pycs"],
    long_none: &[
        "--help",
        "--version",
        "--help-env",
        "--help-xoptions",
        "--help-all",
    ],
    run: &[],
    no_run: &[],
};

const GJS: Grammar = Grammar {
    short_value: "I",
    short_attached: "",
    short_none: "ch",
    short_module: None,
    long_value: &[
        "--include-path",
        "--coverage-prefix",
        "--coverage-output",
        "--jsversion",
    ],
    long_none: &["--command", "--help", "--version"],
    run: &[],
    no_run: &[],
};

const PERL: Grammar = Grammar {
    short_value: "I",
    short_attached: "MmxiolCdDV0",
    short_none: "eEhvS",
    short_module: None,
    long_value: &[],
    long_none: &["--help", "--version"],
    run: &[],
    no_run: &[],
};

const RUBY: Grammar = Grammar {
    short_value: "IrE",
    short_attached: "FKxi0TW",
    short_none: "eChS",
    short_module: None,
    long_value: &[
        "--enable",
        "--disable",
        "--encoding",
        "--external-encoding",
        "--internal-encoding",
        "--dump",
        "--backtrace-limit",
        "--crash-report",
    ],
    long_none: &["--help", "--version", "--copyright"],
    run: &[],
    no_run: &[],
};

const BUN: Grammar = Grammar {
    short_value: "rcdl",
    short_attached: "",
    short_none: "eph",
    short_module: None,
    long_value: &[
        "--preload",
        "--config",
        "--env-file",
        "--tsconfig-override",
        "--port",
        "--conditions",
        "--define",
        "--loader",
        "--main-fields",
        "--extension-order",
        "--jsx-factory",
        "--jsx-fragment",
        "--jsx-import-source",
        "--jsx-runtime",
    ],
    long_none: &[
        "--eval",
        "--print",
        "--cwd",
        "--help",
        "--version",
        "--filter",
    ],
    run: &["run"],
    no_run: &[
        "x", "test", "install", "i", "add", "a", "remove", "rm", "update", "link", "unlink", "pm",
        "build", "init", "create", "c", "upgrade", "repl", "exec", "outdated", "publish", "patch",
        "audit", "info", "why",
    ],
};

const DENO: Grammar = Grammar {
    short_value: "cL",
    short_attached: "",
    short_none: "h",
    short_module: None,
    long_value: &[
        "--config",
        "--import-map",
        "--lock",
        "--cert",
        "--location",
        "--seed",
        "--log-level",
        "--ext",
    ],
    long_none: &["--help", "--version", "--eval"],
    run: &["run", "serve"],
    no_run: &[
        "task",
        "test",
        "eval",
        "repl",
        "install",
        "uninstall",
        "compile",
        "fmt",
        "lint",
        "check",
        "info",
        "doc",
        "bench",
        "upgrade",
        "x",
        "add",
        "remove",
        "publish",
        "jupyter",
        "init",
        "vendor",
        "coverage",
        "completions",
        "types",
        "lsp",
        "clean",
        "outdated",
        "cache",
    ],
};

impl Kind {
    fn grammar(self) -> &'static Grammar {
        match self {
            Kind::Node => &NODE,
            Kind::Python => &PYTHON,
            Kind::Gjs => &GJS,
            Kind::Perl => &PERL,
            Kind::Ruby => &RUBY,
            Kind::Bun => &BUN,
            Kind::Deno => &DENO,
        }
    }
}

/// What the command line `args` (without `argv[0]`) of an interpreter of
/// `kind` runs, if it is a file or module.
fn target<'a>(kind: Kind, args: &[&'a str]) -> Option<Target<'a>> {
    let g = kind.grammar();
    let mut it = args.iter().copied();
    let mut subcommand_seen = g.run.is_empty();
    while let Some(arg) = it.next() {
        if arg == "--" {
            let next = it.next()?;
            return subcommand_seen.then_some(Target::Script(next));
        }
        if arg == "-" || arg.is_empty() {
            return None;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            let name = format!("--{name}");
            if g.long_none.contains(&name.as_str()) {
                return None;
            }
            if !long.contains('=') && g.long_value.contains(&name.as_str()) {
                it.next()?;
            }
            continue;
        }
        if let Some(cluster) = arg.strip_prefix('-') {
            for (i, c) in cluster.char_indices() {
                let rest = cluster.get(i + c.len_utf8()..).unwrap_or("");
                if g.short_none.contains(c) {
                    return None;
                }
                if g.short_module == Some(c) {
                    let module = if rest.is_empty() { it.next()? } else { rest };
                    return Some(Target::Module(module));
                }
                if g.short_value.contains(c) {
                    if rest.is_empty() {
                        it.next()?;
                    }
                    break;
                }
                if g.short_attached.contains(c) {
                    break;
                }
            }
            continue;
        }
        if !subcommand_seen {
            if g.run.contains(&arg) {
                subcommand_seen = true;
                continue;
            }
            if g.no_run.contains(&arg) {
                return None;
            }
        }
        return Some(Target::Script(arg));
    }
    None
}

impl ProcDir {
    /// Step 4a: the id of what an interpreter of `kind` runs, or `None`
    /// when it cannot be told (the executable's id then stays). Errors only
    /// when the process went away during the lookup.
    pub(super) fn interpreter_id(&self, kind: Kind) -> Result<Option<Identity>> {
        let cmdline = match self.read(c"cmdline", MAX_CMDLINE) {
            Ok(c) => c,
            Err(e @ IdentityError::ProcessGone { .. }) => return Err(e),
            Err(e) => {
                tracing::debug!(pid = self.pid, error = %e, "command line unreadable");
                return Ok(None);
            }
        };
        let Ok(text) = std::str::from_utf8(&cmdline) else {
            return Ok(None);
        };
        let args: Vec<&str> = text
            .strip_suffix('\0')
            .unwrap_or(text)
            .split('\0')
            .collect();
        let Some(target) = args.get(1..).and_then(|a| target(kind, a)) else {
            return Ok(None);
        };
        let what = match target {
            Target::Module(m) => is_module_name(m).then(|| m.to_owned()),
            Target::Script(s) => self.script(kind, s)?,
        };
        let Some(what) = what else {
            return Ok(None);
        };
        match AppId::new(format!("{}:{what}", kind.prefix())) {
            Ok(app_id) => Ok(Some(Identity {
                app_id,
                source: IdentitySource::Interpreter,
                pid: self.pid,
                executable: None,
            })),
            Err(_) => Ok(None),
        }
    }

    /// The name of `script` (as the command line gives it): its package's
    /// name for Node, Bun and Deno when it lies in one under
    /// `node_modules`, else its real path. Relative paths are taken from
    /// the process's working directory, absolute ones from its root, both
    /// opened through the pinned `/proc/PID`.
    fn script(&self, kind: Kind, script: &str) -> Result<Option<String>> {
        let (base, rel) = match script.strip_prefix('/') {
            Some(rel) => (c"root", rel.trim_start_matches('/')),
            None => (c"cwd", script),
        };
        let base = match open_at(&self.dir, base, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(b) => b,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::ENOENT)) => {
                return Err(IdentityError::ProcessGone { pid: self.pid });
            }
            Err(_) => return Ok(None),
        };
        let root = match open_at(&self.dir, c"root", libc::O_PATH | libc::O_DIRECTORY) {
            Ok(r) => r,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::ENOENT)) => {
                return Err(IdentityError::ProcessGone { pid: self.pid });
            }
            Err(_) => return Ok(None),
        };
        let Ok(rel) = CString::new(if rel.is_empty() { "." } else { rel }) else {
            return Ok(None);
        };
        // Follows symlinks (an npm bin shim, a venv's entry point) to the
        // file that runs.
        let Ok(file) = open_at(&base, &rel, libc::O_PATH) else {
            return Ok(None);
        };
        let Ok(meta) = file.metadata() else {
            return Ok(None);
        };
        if !meta.is_file() && !meta.is_dir() {
            return Ok(None);
        }
        let (Some(real), Some(root_path)) = (fd_path(&file), fd_path(&root)) else {
            return Ok(None);
        };
        // The path as the process sees it: below its root.
        let shown = if root_path == Path::new("/") {
            real.clone()
        } else {
            match real.strip_prefix(&root_path) {
                Ok(inner) => Path::new("/").join(inner),
                Err(_) => return Ok(None),
            }
        };
        if kind.has_packages() {
            let start = if meta.is_dir() {
                Some(real.as_path())
            } else {
                real.parent()
            };
            if let Some(name) = start.and_then(package_name) {
                return Ok(Some(name));
            }
        }
        Ok(shown.to_str().map(str::to_owned))
    }
}

/// The path of an open fd, from `/proc/self/fd/N` (the kernel's path of
/// the file, with symlinks resolved, as this process sees it).
fn fd_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
    // A deleted file or one outside our root has no usable path.
    let bytes = link.as_os_str().as_bytes();
    (bytes.starts_with(b"/") && !bytes.ends_with(b" (deleted)")).then_some(link)
}

/// The `name` of the package that `dir` (a script's directory) lies in, if
/// that is one installed under `node_modules` (`…/node_modules/NAME` or
/// `…/node_modules/@SCOPE/NAME`): the innermost such directory above the
/// script, and the `name` its `package.json` gives.
///
/// Only installed packages: their names are the registry's, one per
/// package. A project of one's own (`node index.js` in a checkout) is named
/// by its script's path, because every project's `package.json` may say
/// `"name": "my-app"`, and a grant to one must not cover the others.
fn package_name(dir: &Path) -> Option<String> {
    let package_dir = dir.ancestors().find(|d| {
        let parent = d.parent();
        let in_modules = |p: Option<&Path>| {
            p.and_then(Path::file_name)
                .is_some_and(|n| n == "node_modules")
        };
        let scoped = d
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('@'));
        in_modules(parent) || (scoped && in_modules(parent.and_then(Path::parent)))
    })?;
    // O_NONBLOCK: a FIFO called package.json must not hang us; only a
    // regular file is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(package_dir.join("package.json"))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let text = read_limited(file, MAX_PACKAGE_JSON).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
    let name = json.get("name")?.as_str()?;
    is_package_name(name).then(|| name.to_owned())
}

/// npm's rules for a package name, loosely: at most 214 bytes, an optional
/// `@scope/`, then URL-safe characters, not starting with `.` or `_`.
fn is_package_name(name: &str) -> bool {
    let bare = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, bare)) if is_name_part(scope) => bare,
            _ => return false,
        },
        None => name,
    };
    name.len() <= 214 && is_name_part(bare) && !bare.starts_with(['.', '_'])
}

fn is_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// A Python module path: dotted identifiers.
fn is_module_name(m: &str) -> bool {
    m.len() <= 255
        && m.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::test_support::FakeProc;

    fn t(kind: Kind, args: &[&'static str]) -> Option<Target<'static>> {
        target(kind, args)
    }

    #[test]
    fn python_command_lines() {
        let s = Target::Script;
        let m = Target::Module;
        assert_eq!(t(Kind::Python, &["tool.py", "-c", "x"]), Some(s("tool.py")));
        assert_eq!(
            t(Kind::Python, &["-u", "-X", "dev", "-W", "ignore", "a.py"]),
            Some(s("a.py"))
        );
        assert_eq!(
            t(Kind::Python, &["-Xdev", "-Wignore", "-Bu", "a.py"]),
            Some(s("a.py"))
        );
        assert_eq!(
            t(Kind::Python, &["-E", "-s", "-m", "http.server", "80"]),
            Some(m("http.server"))
        );
        assert_eq!(t(Kind::Python, &["-um", "pkg"]), Some(m("pkg")));
        assert_eq!(t(Kind::Python, &["-mpkg.mod"]), Some(m("pkg.mod")));
        assert_eq!(
            t(Kind::Python, &["--check-hash-based-pycs", "never", "a.py"]),
            Some(s("a.py"))
        );
        assert_eq!(t(Kind::Python, &["--", "a.py"]), Some(s("a.py")));
        for none in [
            &["-c", "print(1)"][..],
            &["-Ic", "print(1)"],
            &["-"],
            &[],
            &["-u"],
            &["-X"],
            &["-m"],
            &["--version"],
            &["-V"],
        ] {
            assert_eq!(t(Kind::Python, none), None, "{none:?}");
        }
    }

    #[test]
    fn node_command_lines() {
        let s = Target::Script;
        assert_eq!(
            t(
                Kind::Node,
                &[
                    "--no-warnings",
                    "--max-old-space-size=4096",
                    "/usr/lib/node_modules/x/cli.js",
                    "-e",
                    "y"
                ]
            ),
            Some(s("/usr/lib/node_modules/x/cli.js"))
        );
        assert_eq!(
            t(Kind::Node, &["-r", "ts-node/register", "main.ts"]),
            Some(s("main.ts"))
        );
        assert_eq!(
            t(
                Kind::Node,
                &["--require", "dotenv/config", "--import", "tsx", "m.js"]
            ),
            Some(s("m.js"))
        );
        assert_eq!(t(Kind::Node, &["--require=x", "m.js"]), Some(s("m.js")));
        assert_eq!(t(Kind::Node, &["--", "m.js"]), Some(s("m.js")));
        for none in [
            &["-e", "1"][..],
            &["-pe", "1"],
            &["--eval", "1"],
            &["--print=1"],
            &["-i"],
            &[],
            &["-"],
            &["-r", "x"],
        ] {
            assert_eq!(t(Kind::Node, none), None, "{none:?}");
        }
    }

    #[test]
    fn other_command_lines() {
        let s = Target::Script;
        assert_eq!(
            t(
                Kind::Gjs,
                &["-m", "/usr/share/org.gnome.Maps/org.gnome.Maps"]
            ),
            Some(s("/usr/share/org.gnome.Maps/org.gnome.Maps"))
        );
        assert_eq!(t(Kind::Gjs, &["-I", "/x", "a.js"]), Some(s("a.js")));
        assert_eq!(t(Kind::Gjs, &["-c", "print(1)"]), None);
        assert_eq!(
            t(Kind::Perl, &["-w", "-Mstrict", "-I", "lib", "x.pl"]),
            Some(s("x.pl"))
        );
        assert_eq!(t(Kind::Perl, &["-Ilib", "-0777", "x.pl"]), Some(s("x.pl")));
        assert_eq!(t(Kind::Perl, &["-ne", "print"]), None);
        assert_eq!(
            t(Kind::Ruby, &["-w", "-r", "json", "-Ilib", "x.rb"]),
            Some(s("x.rb"))
        );
        assert_eq!(t(Kind::Ruby, &["-e", "1"]), None);
        assert_eq!(t(Kind::Ruby, &["-S", "rake"]), None);
        assert_eq!(t(Kind::Bun, &["run", "--smol", "x.ts"]), Some(s("x.ts")));
        assert_eq!(t(Kind::Bun, &["x.ts"]), Some(s("x.ts")));
        assert_eq!(t(Kind::Bun, &["x", "cowsay"]), None);
        assert_eq!(
            t(
                Kind::Deno,
                &["run", "--allow-read", "-c", "deno.json", "main.ts"]
            ),
            Some(s("main.ts"))
        );
        assert_eq!(t(Kind::Deno, &["task", "dev"]), None);
    }

    #[test]
    fn names_of_interpreters() {
        let list = Interpreters::default();
        // Debian's interpreters are system programs.
        for (exe, kind) in [
            ("/usr/bin/python3.11", Kind::Python),
            ("/usr/bin/perl", Kind::Perl),
        ] {
            if Path::new(exe).exists() {
                assert_eq!(list.kind_of(exe), Some(kind), "{exe}");
            }
        }
        // Not in a system directory: the name alone is not enough.
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = dir.path().join("node");
        std::fs::write(&fake, "").expect("write");
        assert_eq!(list.kind_of(fake.to_str().expect("utf-8")), None);
        // Unless the user lists the path.
        let mine = Interpreters::parse([fake.to_str().expect("utf-8")]).expect("parse");
        assert_eq!(
            mine.kind_of(fake.to_str().expect("utf-8")),
            Some(Kind::Node)
        );
        assert_eq!(list.kind_of("/usr/bin/python3-config"), None);
        // The layouts of version managers are recognised without a list.
        for (rel, manager) in [
            (".nvm/versions/node/v22.1.0/bin/node", "nvm"),
            (
                ".local/share/fnm/node-versions/v20.3.0/installation/bin/node",
                "fnm",
            ),
            (".volta/tools/image/node/22.1.0/bin/node", "volta"),
            (".pyenv/versions/3.11.7/bin/python3.11", "pyenv"),
            (
                ".local/share/uv/python/cpython-3.12.4-linux-x86_64-gnu/bin/python3.12",
                "uv",
            ),
            (".asdf/installs/nodejs/22.1.0/bin/node", "asdf"),
            (
                ".local/share/mise/installs/python/3.12.4/bin/python3",
                "mise",
            ),
            ("miniconda3/envs/agents/bin/python", "conda"),
            ("anaconda3/bin/python3.11", "conda"),
            (".linuxbrew/Cellar/node/22.1.0/bin/node", "homebrew"),
        ] {
            let exe = dir.path().join(rel);
            std::fs::create_dir_all(exe.parent().expect("parent")).expect("mkdir");
            std::fs::write(&exe, "").expect("write");
            assert_eq!(version_manager(&exe), Some(manager), "{rel}");
            assert!(
                list.kind_of(exe.to_str().expect("utf-8")).is_some(),
                "{rel}"
            );
        }
        // Near misses: another name, another layout, a file others write.
        for rel in [
            ".nvm/versions/node/v22.1.0/bin/bash",
            ".nvm/versions/node/bin/node",
            "pyenv-ish/versions/3.11/bin/python3",
            "Downloads/bin/node",
        ] {
            let exe = dir.path().join(rel);
            std::fs::create_dir_all(exe.parent().expect("parent")).expect("mkdir");
            std::fs::write(&exe, "").expect("write");
            assert_eq!(list.kind_of(exe.to_str().expect("utf-8")), None, "{rel}");
        }
        let shared = dir.path().join(".pyenv/versions/3.12.0/bin/python3.12");
        std::fs::create_dir_all(shared.parent().expect("parent")).expect("mkdir");
        std::fs::write(&shared, "").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert_eq!(version_manager(&shared), None, "writable by others");
        assert!(Interpreters::parse(["bash"]).is_err());
        assert!(Interpreters::parse(["/usr/bin/bash"]).is_err());
        assert!(Interpreters::parse(["py*thon"]).is_err());
        assert!(Interpreters::parse(["ruby*", "/opt/x/bin/node22"]).is_ok());
    }

    fn fake_interpreter(proc: &FakeProc, pid: u32, exe: &str, cmdline: &[&str], cwd: &Path) {
        let dir = proc.process(pid, "0::/user.slice/user-1000.slice/session-2.scope\n", exe);
        let mut line = cmdline.join("\0");
        line.push('\0');
        std::fs::write(dir.join("cmdline"), line).expect("cmdline");
        std::os::unix::fs::symlink(cwd, dir.join("cwd")).expect("cwd");
    }

    #[test]
    fn fake_scripts_packages_and_modules() {
        let proc = FakeProc::new();
        let list =
            Interpreters::parse(["/opt/node/bin/node", "/opt/py/bin/python3.11"]).expect("list");
        let root = |pid: u32| proc.dir.path().join(format!("{pid}/root"));
        let file = |pid: u32, rel: &str| {
            let p = root(pid).join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "").expect("write");
            p
        };
        let resolve =
            |pid| super::super::resolve_with(proc.dir.path(), pid, &list).expect("resolves");

        // A Python script, by its real path as the process sees it.
        file(10, "home/u/bin/tool.py");
        let cwd = root(10).join("home/u");
        fake_interpreter(
            &proc,
            10,
            "/opt/py/bin/python3.11",
            &["python3", "-u", "bin/tool.py", "--x"],
            &cwd,
        );
        let id = resolve(10);
        assert_eq!(id.app_id.as_str(), "python3:/home/u/bin/tool.py");
        assert_eq!(id.source, IdentitySource::Interpreter);

        // python3 -m.
        fake_interpreter(
            &proc,
            11,
            "/opt/py/bin/python3.11",
            &["python3", "-m", "mcp_server_time"],
            &cwd,
        );
        assert_eq!(resolve(11).app_id.as_str(), "python3:mcp_server_time");

        // -c: nothing to name it by but the executable.
        fake_interpreter(
            &proc,
            12,
            "/opt/py/bin/python3.11",
            &["python3", "-c", "pass"],
            &cwd,
        );
        let id = resolve(12);
        assert_eq!(id.app_id.as_str(), "exe:/opt/py/bin/python3.11");
        assert_eq!(id.source, IdentitySource::Executable);

        // A script that is not there.
        fake_interpreter(
            &proc,
            13,
            "/opt/py/bin/python3.11",
            &["python3", "gone.py"],
            &cwd,
        );
        assert_eq!(resolve(13).app_id.as_str(), "exe:/opt/py/bin/python3.11");

        // An installed npm package, through its bin shim (a symlink).
        file(20, "usr/lib/node_modules/@anthropic-ai/claude-code/cli.js");
        std::fs::write(
            root(20).join("usr/lib/node_modules/@anthropic-ai/claude-code/package.json"),
            r#"{"name": "@anthropic-ai/claude-code", "version": "1.0.0"}"#,
        )
        .expect("package.json");
        std::fs::create_dir_all(root(20).join("usr/bin")).expect("mkdir");
        std::os::unix::fs::symlink(
            "../lib/node_modules/@anthropic-ai/claude-code/cli.js",
            root(20).join("usr/bin/claude"),
        )
        .expect("shim");
        fake_interpreter(
            &proc,
            20,
            "/opt/node/bin/node",
            &["node", "--no-warnings", "/usr/bin/claude"],
            &root(20),
        );
        assert_eq!(
            resolve(20).app_id.as_str(),
            "node:@anthropic-ai/claude-code"
        );

        // A script deeper in a package, below a package.json with no name.
        file(21, "n/node_modules/inspector/build/esm/index.js");
        std::fs::write(
            root(21).join("n/node_modules/inspector/build/esm/package.json"),
            r#"{"type":"module"}"#,
        )
        .expect("write");
        std::fs::write(
            root(21).join("n/node_modules/inspector/package.json"),
            r#"{"name":"inspector"}"#,
        )
        .expect("write");
        fake_interpreter(
            &proc,
            21,
            "/opt/node/bin/node",
            &["node", "/n/node_modules/inspector/build/esm/index.js"],
            &root(21),
        );
        assert_eq!(resolve(21).app_id.as_str(), "node:inspector");

        // A FIFO for a package.json is not waited on: the script's path.
        file(23, "m/node_modules/fifo/index.js");
        let fifo = std::ffi::CString::new(
            root(23)
                .join("m/node_modules/fifo/package.json")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .expect("path");
        // SAFETY: a NUL-terminated path; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        fake_interpreter(
            &proc,
            23,
            "/opt/node/bin/node",
            &["node", "/m/node_modules/fifo/index.js"],
            &root(23),
        );
        assert_eq!(
            resolve(23).app_id.as_str(),
            "node:/m/node_modules/fifo/index.js"
        );

        // A project of one's own: its path, not the name anyone can give it.
        file(22, "home/u/proj/index.js");
        std::fs::write(
            root(22).join("home/u/proj/package.json"),
            r#"{"name":"my-app"}"#,
        )
        .expect("write");
        fake_interpreter(
            &proc,
            22,
            "/opt/node/bin/node",
            &["node", "index.js"],
            &root(22).join("home/u/proj"),
        );
        assert_eq!(resolve(22).app_id.as_str(), "node:/home/u/proj/index.js");

        // A grant to the interpreter is no grant to what it runs.
        let policy = crate::core::policy::Policy::parse(
            "[[grant]]\napp = \"exe:/opt/node/bin/node\"\ncategories = [\"*\"]\n",
            "policy.toml",
        )
        .expect("policy");
        let now = chrono::Utc::now();
        let windows = crate::model::Category::Windows;
        assert!(!policy.allows(&resolve(20).app_id, &windows, now));
        assert!(!policy.allows(&resolve(22).app_id, &windows, now));

        // Not an interpreter of the list: the executable.
        fake_interpreter(
            &proc,
            30,
            "/opt/other/bin/node",
            &["node", "/x.js"],
            &root(30),
        );
        assert_eq!(resolve(30).app_id.as_str(), "exe:/opt/other/bin/node");
    }

    #[test]
    fn package_names() {
        for ok in [
            "x",
            "@anthropic-ai/claude-code",
            "@google/gemini-cli",
            "a.b-c_d~e",
        ] {
            assert!(is_package_name(ok), "{ok}");
        }
        for bad in [
            "", "@", "@x", "@x/", ".x", "_x", "a b", "a/b", "../x", "x\n",
        ] {
            assert!(!is_package_name(bad), "{bad}");
        }
        assert!(is_module_name("http.server"));
        assert!(!is_module_name("../x"));
        assert!(!is_module_name("a..b"));
        assert!(!is_module_name(""));
    }
}
