//! Desktop entries: turn an app id (what a Wayland client told the
//! compositor, or a Flatpak/desktop id) into a human name and an icon.
//!
//! Files: `applications/**/*.desktop` under `$XDG_DATA_HOME` (default
//! `~/.local/share`) and then each of `$XDG_DATA_DIRS` (default
//! `/usr/local/share:/usr/share`), as the XDG Base Directory and Desktop
//! Entry specifications say. A file's desktop file id is its path below
//! `applications/` with `/` turned into `-` (`kde/org.kde.Foo.desktop` is
//! `kde-org.kde.Foo.desktop`); the first directory that has an id wins.
//! Entries that are `Hidden=true` or not `Type=Application` are ignored.
//!
//! Matching an app id, first hit wins:
//! 1. the desktop file id `APP_ID.desktop`;
//! 2. an entry whose `StartupWMClass` is the app id;
//! 3. both again, ignoring ASCII case;
//! 4. an entry whose id's last dotted part is the app id, ignoring case
//!    (`firefox` finds `org.mozilla.firefox.desktop`).
//!
//! That loose matching names windows (whose app id is a claim anyway). An
//! identity the broker shows in a prompt ([`display_of`]) is matched
//! exactly: a sandboxed app only through its own exported entry. Names
//! and icons are cleaned when read (one line, no bidirectional controls,
//! bounded).
//!
//! The index is cached. Before a lookup, at most once every
//! [`RECHECK_EVERY`], the modification times of the `applications`
//! directories (and their subdirectories) are compared with those of the
//! last scan; when one changed (a package installed or removed one: files
//! are added, removed or renamed into place), everything is scanned again.
//! That is one `stat` per directory per interval and no watcher thread; an
//! entry edited in place (same name, no rename) is picked up at the next
//! rescan.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// How often, at most, the directories are checked for changes.
pub(crate) const RECHECK_EVERY: Duration = Duration::from_secs(5);
/// Desktop files larger than this are skipped (they are a few KiB).
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Subdirectory depth below `applications/` that is scanned.
const MAX_DEPTH: usize = 4;
/// Names and icons longer than this are cut (a desktop file is no place
/// for megabytes, but nothing stops one).
const MAX_VALUE_CHARS: usize = 256;

/// What a desktop entry says about an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AppInfo {
    /// The desktop file id, e.g. `org.gnome.TextEditor.desktop`.
    pub(crate) desktop_id: String,
    /// `Name=` (unlocalised).
    pub(crate) name: String,
    /// `Icon=`: an icon name or an absolute path.
    pub(crate) icon: Option<String>,
    /// The program it runs: `TryExec=`, else the first word of `Exec=`
    /// that is not `env` or a `VAR=value` (unquoted), for telling whether
    /// a window's process is this entry's ([`for_window`]).
    pub(crate) program: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    info: AppInfo,
    wm_class: Option<String>,
}

/// The index of desktop entries of some directories.
#[derive(Debug)]
pub(crate) struct DesktopEntries {
    /// The `applications` directories, in precedence order.
    dirs: Vec<PathBuf>,
    entries: Vec<Entry>,
    by_id: HashMap<String, usize>,
    /// (directory, mtime) of every scanned directory, for change checks.
    stamps: Vec<(PathBuf, Option<SystemTime>)>,
    scanned: bool,
    checked: Option<Instant>,
}

/// The `applications` directories of the XDG spec, in precedence order.
pub(crate) fn xdg_application_dirs() -> Vec<PathBuf> {
    let abs = |v: std::ffi::OsString| {
        let p = PathBuf::from(v);
        p.is_absolute().then_some(p)
    };
    let mut dirs = Vec::new();
    let home = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .and_then(abs)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        });
    dirs.extend(home);
    for p in xdg_data_dirs() {
        if !dirs.contains(&p) {
            dirs.push(p);
        }
    }
    dirs.into_iter().map(|d| d.join("applications")).collect()
}

/// `$XDG_DATA_DIRS` as the XDG spec reads it: its absolute entries in
/// order, `/usr/local/share:/usr/share` when unset or empty.
pub(crate) fn xdg_data_dirs() -> Vec<PathBuf> {
    let data_dirs = std::env::var("XDG_DATA_DIRS")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "/usr/local/share:/usr/share".into());
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in data_dirs.split(':').filter(|d| !d.is_empty()) {
        let p = PathBuf::from(d);
        if p.is_absolute() && !dirs.contains(&p) {
            dirs.push(p);
        }
    }
    dirs
}

/// The process-wide index over the XDG directories (used by the Wayland
/// source and by consent prompts).
pub(crate) fn shared() -> &'static Mutex<DesktopEntries> {
    static SHARED: OnceLock<Mutex<DesktopEntries>> = OnceLock::new();
    SHARED.get_or_init(|| Mutex::new(DesktopEntries::new(xdg_application_dirs())))
}

/// Name and icon to show for an app identity in a prompt, when a desktop
/// entry may speak for it. For display only; never an identity.
///
/// A desktop entry is found by a name, and names are free for anyone to
/// take: a copy of `gdbus` called `chromium` in a directory of its own must
/// not be announced as "Chromium Web Browser". So only ids whose name
/// something enforces get an entry's name and icon:
/// - a Flatpak id (the sandbox enforces it; its entry is `ID.desktop`),
/// - `snap.NAME` (snapd enforces it),
/// - `exe:/path` of a system program ([`is_system_executable`]: in
///   `/usr/bin` and the like, root's and writable by nobody else), by the
///   program's file name.
///
/// Every other id leads with itself: an `exe:` path elsewhere, a
/// `systemd:` unit name (chosen by whoever started the process), what an
/// interpreter runs (`node:…`, a claim of its command line) and `token:`.
///
/// [`is_system_executable`]: crate::identity::is_system_executable
pub(crate) fn display_of(app_id: &str) -> Option<AppInfo> {
    if let Some(path) = app_id.strip_prefix("exe:") {
        if !crate::identity::is_system_executable(Path::new(path)) {
            return None;
        }
        return lookup(path.rsplit('/').next()?);
    }
    // A sandboxed app speaks only through its own exported entry, matched
    // exactly: Flatpak exports `ID.desktop` (and only files named by its
    // id), snapd writes `NAME_APP.desktop`, the main app's `NAME_NAME`.
    // No case folding, no `StartupWMClass`, no last dotted part: a Flatpak
    // `org.Mozilla.Firefox` is not Firefox, a Snap `files` is not
    // `org.gnome.Files`.
    if let Some(name) = app_id.strip_prefix("snap.") {
        return exact(&format!("{name}_{name}.desktop"));
    }
    // `systemd:`, `token:` and interpreter ids (`node:…`): no `:` is in a
    // Flatpak id.
    if app_id.contains(':') {
        return None;
    }
    exact(&format!("{app_id}.desktop"))
}

/// The entry whose desktop file id is exactly `desktop_id`.
fn exact(desktop_id: &str) -> Option<AppInfo> {
    let mut entries = shared().lock().unwrap_or_else(|e| e.into_inner());
    entries.refresh(false);
    entries.exact(desktop_id)
}

/// Resolve an app id with the process-wide index.
pub(crate) fn lookup(app_id: &str) -> Option<AppInfo> {
    shared()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .lookup(app_id)
}

/// A value as it may be shown (`core::display::one_line`): one line,
/// without control, bidirectional or invisible characters, cut to
/// [`MAX_VALUE_CHARS`]. Any app, a Flatpak too, can ship a desktop file:
/// its `Name` must not draw a second line or a reversed one in a prompt.
fn cut(s: String) -> String {
    crate::core::display::one_line(&s, MAX_VALUE_CHARS)
}

/// Parse the `[Desktop Entry]` group of a desktop file.
pub(crate) fn parse(desktop_id: &str, text: &str) -> Option<Entry> {
    let mut in_group = false;
    let (mut name, mut icon, mut wm_class, mut kind) = (None, None, None, None);
    let (mut exec, mut try_exec) = (None, None);
    let mut hidden = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            if in_group {
                break;
            }
            in_group = line == "[Desktop Entry]";
            continue;
        }
        if !in_group {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "Name" => name = Some(unescape(v)),
            "Icon" if !v.is_empty() => icon = Some(unescape(v)),
            "StartupWMClass" if !v.is_empty() => wm_class = Some(unescape(v)),
            "Type" => kind = Some(v.to_owned()),
            "Hidden" => hidden = v == "true",
            "Exec" if !v.is_empty() => exec = program_of(&unescape(v)),
            "TryExec" if !v.is_empty() => try_exec = Some(unescape(v)),
            _ => {}
        }
    }
    if hidden || kind.as_deref() != Some("Application") {
        return None;
    }
    Some(Entry {
        info: AppInfo {
            desktop_id: desktop_id.to_owned(),
            name: cut(name.filter(|n| !n.is_empty())?),
            icon: icon.map(cut),
            program: try_exec.or(exec),
        },
        wm_class: wm_class.map(cut),
    })
}

/// The program an `Exec=` line runs: its first word (a word in the
/// spec's double quotes may hold spaces), past `env` and its `VAR=value`
/// words. Field codes and the arguments do not matter here; an `env` with
/// options is not followed (the entry then names no program, and speaks
/// for no executable).
fn program_of(exec: &str) -> Option<String> {
    let mut words = exec_words(exec).into_iter();
    let mut w = words.next()?;
    if w == "env" || w.ends_with("/env") {
        w = words.find(|w| !w.contains('='))?;
        if w.starts_with('-') {
            return None;
        }
    }
    (!w.is_empty() && !w.starts_with('%')).then_some(w)
}

/// The words of an `Exec=` value: split at spaces outside double quotes,
/// quotes removed, `\"` `\\` `\$` and `` \` `` inside them unescaped.
fn exec_words(exec: &str) -> Vec<String> {
    let (mut words, mut cur, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    let mut it = exec.chars();
    while let Some(c) = it.next() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if quoted => cur.extend(it.next()),
            c if c.is_whitespace() && !quoted => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            c => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Where `program` is: itself when absolute, else the first executable
/// file of that name on `PATH`; with every symbolic link resolved, as the
/// kernel names a process's executable.
fn program_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exe = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.starts_with('/') {
        Some(PathBuf::from(program)).filter(|p| is_exe(p))
    } else if program.contains('/') {
        None
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| is_exe(p))
        })
    };
    found.and_then(|p| std::fs::canonicalize(p).ok())
}

/// Whether `info` (the entry a window's claimed app id finds) is the
/// entry of the process the compositor told for that window: the same
/// Flatpak, Snap or systemd-launched app id, or the program the entry
/// runs is the process's executable (or, for an interpreter, its script).
pub(crate) fn speaks_for(info: &AppInfo, process: &crate::model::WindowProcess) -> bool {
    use crate::model::IdentitySource as S;
    let id = process.app_id.as_str();
    let stem = info
        .desktop_id
        .strip_suffix(".desktop")
        .unwrap_or(&info.desktop_id);
    let runs = |path: &str| {
        info.program
            .as_deref()
            .and_then(program_path)
            .is_some_and(|p| p == Path::new(path))
    };
    match process.source {
        S::Flatpak | S::Systemd => stem == id,
        S::Snap => id
            .strip_prefix("snap.")
            .is_some_and(|n| info.desktop_id.starts_with(&format!("{n}_"))),
        S::Executable => id.strip_prefix("exe:").is_some_and(runs),
        S::Interpreter => id.split_once(':').is_some_and(|(_, script)| runs(script)),
        S::Token => false,
    }
}

/// The name and icon of a window whose app id claims `claim`: the entry
/// the claim finds, unless the compositor told the window's process and
/// that entry is not the process's ([`speaks_for`]); then the entry that
/// may speak for the process ([`display_of`]), or none. So a window that
/// claims `org.mozilla.firefox` from a python script is not drawn with
/// Firefox's name and icon; Firefox's own window is.
pub(crate) fn for_window(
    claim: &str,
    process: Option<&crate::model::WindowProcess>,
) -> Option<AppInfo> {
    let info = lookup(claim);
    let Some(p) = process else { return info };
    match info {
        Some(i) if speaks_for(&i, p) => Some(i),
        _ => display_of(p.app_id.as_str()),
    }
}

/// The escapes of the spec's `string` type: `\s \n \t \r \\`.
fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('s') => out.push(' '),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(o) => out.push(o),
            None => out.push('\\'),
        }
    }
    out
}

impl DesktopEntries {
    /// An index over these `applications` directories (first wins),
    /// scanned on first use.
    pub(crate) fn new(dirs: Vec<PathBuf>) -> Self {
        DesktopEntries {
            dirs,
            entries: Vec::new(),
            by_id: HashMap::new(),
            stamps: Vec::new(),
            scanned: false,
            checked: None,
        }
    }

    /// How many entries the index holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Find the desktop entry of `app_id`, rescanning first if the
    /// directories changed (checked at most every [`RECHECK_EVERY`]).
    pub(crate) fn lookup(&mut self, app_id: &str) -> Option<AppInfo> {
        self.refresh(false);
        self.find(app_id)
    }

    /// Rescan if the directories changed; with `force`, check now
    /// whatever the interval.
    pub(crate) fn refresh(&mut self, force: bool) {
        let due =
            force || !self.scanned || self.checked.is_none_or(|t| t.elapsed() >= RECHECK_EVERY);
        if !due {
            return;
        }
        self.checked = Some(Instant::now());
        if self.scanned && !self.changed() {
            return;
        }
        self.scan();
    }

    fn changed(&self) -> bool {
        self.stamps.iter().any(|(d, m)| mtime(d) != *m)
            || self
                .dirs
                .iter()
                .any(|d| !self.stamps.iter().any(|(s, _)| s == d))
    }

    fn scan(&mut self) {
        self.entries.clear();
        self.by_id.clear();
        self.stamps.clear();
        for dir in self.dirs.clone() {
            self.stamps.push((dir.clone(), mtime(&dir)));
            self.scan_dir(&dir, "", 0);
        }
        self.scanned = true;
        tracing::debug!(entries = self.entries.len(), "desktop entries scanned");
    }

    fn scan_dir(&mut self, dir: &Path, prefix: &str, depth: usize) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut names: Vec<(String, PathBuf, bool)> = rd
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let is_dir = e.file_type().ok()?.is_dir();
                Some((name, e.path(), is_dir))
            })
            .collect();
        names.sort();
        for (name, path, is_dir) in names {
            if is_dir {
                if depth < MAX_DEPTH {
                    self.stamps.push((path.clone(), mtime(&path)));
                    self.scan_dir(&path, &format!("{prefix}{name}-"), depth + 1);
                }
                continue;
            }
            if !name.ends_with(".desktop") {
                continue;
            }
            let id = format!("{prefix}{name}");
            if self.by_id.contains_key(&id) {
                continue; // an earlier directory has it
            }
            let small = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_FILE_BYTES);
            let Some(text) = small
                .then(|| std::fs::read(&path).ok())
                .flatten()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
            else {
                continue;
            };
            match parse(&id, &text) {
                Some(e) => {
                    self.by_id.insert(id, self.entries.len());
                    self.entries.push(e);
                }
                // Hidden or not an application: it still shadows later
                // directories' entries of the same id.
                None => {
                    self.by_id.insert(id, usize::MAX);
                }
            }
        }
    }

    /// The entry whose desktop file id is exactly `desktop_id`, if it is
    /// an application (a hidden one shadows later directories' too).
    fn exact(&self, desktop_id: &str) -> Option<AppInfo> {
        self.by_id
            .get(desktop_id)
            .and_then(|i| self.entries.get(*i))
            .map(|e| e.info.clone())
    }

    fn find(&self, app_id: &str) -> Option<AppInfo> {
        if app_id.is_empty() {
            return None;
        }
        let live = |i: &usize| self.entries.get(*i);
        let desktop = format!("{app_id}.desktop");
        if let Some(e) = self.by_id.get(&desktop).and_then(live) {
            return Some(e.info.clone());
        }
        let wm = |ci: bool| {
            self.entries.iter().find(|e| {
                e.wm_class.as_deref().is_some_and(|w| {
                    if ci {
                        w.eq_ignore_ascii_case(app_id)
                    } else {
                        w == app_id
                    }
                })
            })
        };
        if let Some(e) = wm(false) {
            return Some(e.info.clone());
        }
        if let Some(e) = self
            .entries
            .iter()
            .find(|e| e.info.desktop_id.eq_ignore_ascii_case(&desktop))
        {
            return Some(e.info.clone());
        }
        if let Some(e) = wm(true) {
            return Some(e.info.clone());
        }
        self.entries
            .iter()
            .find(|e| {
                e.info
                    .desktop_id
                    .trim_end_matches(".desktop")
                    .rsplit('.')
                    .next()
                    .is_some_and(|last| last.eq_ignore_ascii_case(app_id))
            })
            .map(|e| e.info.clone())
    }
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn app(name: &str, extra: &str) -> String {
        format!(
            "[Desktop Entry]\nType=Application\nName={name}\nIcon=icon-{name}\n{extra}\n[Desktop Action new]\nName=Not this\n"
        )
    }

    #[test]
    fn the_program_of_an_exec_line() {
        assert_eq!(program_of("firefox %u").as_deref(), Some("firefox"));
        assert_eq!(
            program_of("\"/opt/My App/app\" --new").as_deref(),
            Some("/opt/My App/app")
        );
        assert_eq!(
            program_of("env GDK_BACKEND=x11 LANG=C gimp %U").as_deref(),
            Some("gimp")
        );
        assert_eq!(program_of("/usr/bin/env -u X foo"), None, "not followed");
        assert_eq!(program_of("%u"), None);
        assert_eq!(program_of("   "), None);
        let e = parse(
            "a.desktop",
            "[Desktop Entry]\nType=Application\nName=A\nExec=a-bin %F\nTryExec=/usr/bin/a-real\n",
        )
        .expect("entry");
        assert_eq!(
            e.info.program.as_deref(),
            Some("/usr/bin/a-real"),
            "TryExec first"
        );
    }

    /// Which process an entry speaks for: its program (through links, as
    /// the kernel names an executable), its sandbox's or unit's app id.
    /// The attack: an entry of another program, a look-alike id.
    #[test]
    fn an_entry_speaks_only_for_its_own_process() {
        use crate::model::{AppId, IdentitySource, WindowProcess};
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().expect("tempdir");
        let real = t.path().join("firefox-real");
        std::fs::write(&real, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let link = t.path().join("firefox");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        let real = std::fs::canonicalize(&real).expect("canonical");
        let info = |id: &str, program: Option<&str>| AppInfo {
            desktop_id: format!("{id}.desktop"),
            name: "N".into(),
            icon: None,
            program: program.map(str::to_owned),
        };
        let proc_ = |id: &str, source| WindowProcess {
            app_id: AppId::new(id).expect("id"),
            source,
        };
        let firefox = info("org.mozilla.firefox", link.to_str());
        let exe = format!("exe:{}", real.display());
        assert!(speaks_for(
            &firefox,
            &proc_(&exe, IdentitySource::Executable)
        ));
        assert!(!speaks_for(
            &firefox,
            &proc_("exe:/usr/bin/python3", IdentitySource::Executable)
        ));
        assert!(!speaks_for(
            &info("org.mozilla.firefox", None),
            &proc_(&exe, IdentitySource::Executable)
        ));
        let script = format!("python3:{}", real.display());
        assert!(speaks_for(
            &firefox,
            &proc_(&script, IdentitySource::Interpreter)
        ));
        for source in [IdentitySource::Flatpak, IdentitySource::Systemd] {
            assert!(speaks_for(&firefox, &proc_("org.mozilla.firefox", source)));
            assert!(!speaks_for(&firefox, &proc_("org.mozilla.Firefox", source)));
            assert!(!speaks_for(&firefox, &proc_("org.mozilla", source)));
        }
        let snap = info("firefox_firefox", None);
        assert!(speaks_for(
            &snap,
            &proc_("snap.firefox", IdentitySource::Snap)
        ));
        assert!(!speaks_for(
            &snap,
            &proc_("snap.fire", IdentitySource::Snap)
        ));
    }

    #[test]
    fn resolves_by_id_wm_class_case_and_last_part_with_precedence() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home/applications");
        let sys = t.path().join("sys/applications");
        write(
            &sys,
            "org.gnome.TextEditor.desktop",
            &app("Text Editor", ""),
        );
        write(&home, "org.gnome.TextEditor.desktop", &app("My Editor", ""));
        write(
            &sys,
            "code.desktop",
            &app("Visual Studio Code", "StartupWMClass=Code"),
        );
        write(&sys, "org.mozilla.firefox.desktop", &app("Firefox", ""));
        write(&sys, "kde/org.kde.dolphin.desktop", &app("Dolphin", ""));
        write(&sys, "gone.desktop", &app("Gone", "Hidden=true"));
        write(
            &sys,
            "link.desktop",
            "[Desktop Entry]\nType=Link\nName=L\nURL=x\n",
        );
        write(
            &sys,
            "Esc.desktop",
            "[Desktop Entry]\nType=Application\nName=A\\sB\n",
        );
        let mut d = DesktopEntries::new(vec![home.clone(), sys.clone()]);

        let e = d.lookup("org.gnome.TextEditor").expect("by id");
        assert_eq!(
            (e.name.as_str(), e.icon.as_deref()),
            ("My Editor", Some("icon-My Editor"))
        );
        assert_eq!(
            d.lookup("Code").expect("wm class").name,
            "Visual Studio Code"
        );
        assert_eq!(d.lookup("code").expect("id").name, "Visual Studio Code");
        assert_eq!(
            d.lookup("ORG.GNOME.TEXTEDITOR").expect("ci").name,
            "My Editor"
        );
        assert_eq!(d.lookup("firefox").expect("last part").name, "Firefox");
        assert_eq!(
            d.lookup("kde-org.kde.dolphin").expect("subdir id").name,
            "Dolphin"
        );
        assert_eq!(d.lookup("esc").expect("escapes").name, "A B");
        assert!(d.lookup("gone").is_none());
        assert!(d.lookup("link").is_none());
        assert!(d.lookup("").is_none());
        assert!(d.lookup("org.unknown.App").is_none());
    }

    /// The attacks on names and icons: a Flatpak whose id differs from
    /// Firefox's only in case, a Snap named like the last part of another
    /// app's id, and a `Name` that draws a second line and reverses text.
    #[test]
    fn a_prompt_identity_is_matched_exactly_and_its_name_is_one_clean_line() {
        let t = tempfile::tempdir().expect("tempdir");
        let sys = t.path().join("applications");
        write(&sys, "org.mozilla.firefox.desktop", &app("Firefox", ""));
        write(
            &sys,
            "org.gnome.Nautilus.desktop",
            &app("Files", "StartupWMClass=files"),
        );
        write(&sys, "files_files.desktop", &app("Snap Files", ""));
        write(
            &sys,
            "org.example.Evil.desktop",
            "[Desktop Entry]\nType=Application\nName=Settings\\n\u{202E}dellatsni metsys\u{202C} \u{200B}Verified\n",
        );
        let mut d = DesktopEntries::new(vec![sys.clone()]);
        d.refresh(true);
        assert!(d.exact("org.Mozilla.Firefox.desktop").is_none());
        assert!(d.exact("firefox.desktop").is_none());
        assert_eq!(
            d.exact("org.mozilla.firefox.desktop").map(|e| e.name),
            Some("Firefox".to_owned())
        );
        // Loose matching (windows) would have found these:
        assert!(d.lookup("org.Mozilla.Firefox").is_some());
        assert!(d.lookup("files").is_some());
        // ... an exact one finds only a Snap's own entry.
        assert_eq!(
            d.exact("files_files.desktop").map(|e| e.name),
            Some("Snap Files".to_owned())
        );
        let evil = d.exact("org.example.Evil.desktop").expect("entry");
        assert_eq!(evil.name, "Settings dellatsni metsys Verified");
        assert!(!evil.name.contains(['\n', '\u{202E}', '\u{200B}']));
        let long = parse(
            "x.desktop",
            &format!(
                "[Desktop Entry]\nType=Application\nName={}\n",
                "a".repeat(1000)
            ),
        )
        .expect("entry");
        assert_eq!(long.info.name.chars().count(), MAX_VALUE_CHARS);
    }

    #[test]
    fn rescans_when_a_directory_changes() {
        let t = tempfile::tempdir().expect("tempdir");
        let dir = t.path().join("applications");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut d = DesktopEntries::new(vec![dir.clone()]);
        assert!(d.lookup("org.new.App").is_none());
        write(&dir, "org.new.App.desktop", &app("New", ""));
        // Some file systems keep whole-second mtimes: make the change visible.
        let later = SystemTime::now() + Duration::from_secs(2);
        std::fs::File::open(&dir)
            .and_then(|f| f.set_modified(later))
            .expect("set mtime");
        // Within the interval the cache answers...
        assert!(d.lookup("org.new.App").is_none());
        // ...and a check after it sees the change.
        d.refresh(true);
        assert_eq!(d.lookup("org.new.App").expect("found").name, "New");
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn xdg_dirs_follow_the_spec_defaults() {
        // Only checks the shape; the environment is the test runner's.
        let dirs = xdg_application_dirs();
        assert!(dirs.iter().all(|d| d.ends_with("applications")));
    }
}
