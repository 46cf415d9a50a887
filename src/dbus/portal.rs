//! The consent question in the desktop's own dialog: the desktop portal
//! backend's `org.freedesktop.impl.portal.Access.AccessDialog`, the dialog
//! xdg-desktop-portal itself shows to ask for the camera, the location or
//! background access (xdg-desktop-portal-gtk on wlroots desktops, -kde on
//! Plasma, GNOME Shell's on GNOME).
//!
//! Used when no trusted consent agent (our GNOME Shell extension) is
//! registered, before a notification (`agent::DBusPrompter`): a
//! notification is hidden by "Do not disturb" and any app can imitate one;
//! the portal's dialog is the desktop's.
//!
//! **Which backend** ([`candidates`], [`choose_on`]): the one xdg-desktop-portal would use
//! for the Access interface. Its configuration first (1.17 and later):
//! `DESKTOP-portals.conf`, then `portals.conf`, for each desktop of
//! `XDG_CURRENT_DESKTOP`, in the user's, the system's and the package's
//! directories; its `[preferred]` section names backends (`gtk;kde`) for
//! `org.freedesktop.impl.portal.Access` or for `default`. Without a
//! configuration (1.16, Debian 12): the first `.portal` file whose
//! `UseIn` names one of the desktops, else (as xdg-desktop-portal's last
//! resort) every backend that implements the interface, the first that runs
//! or can be started taken.
//!
//! **Trusted like the shell** ([`trusted_owner`]): the backend's well-known
//! name is free for anyone to take, so the dialog is used only when the
//! connection that owns it now runs the backend's installed executable:
//! the `Exec` of its D-Bus service file in the system's data directories
//! (a file the user could write, in `~/.local/share`, names nothing), a
//! system program (root's, in the system's directories), compared with
//! the owner's executable read through its pinned `/proc/PID` as every
//! caller's identity is. The question then goes to that unique name, so
//! a name that changes hands in between reaches nobody else. An owner
//! that is not the backend is refused, and the question goes to a
//! notification.
//!
//! **The dialog's texts** are plain text in GTK's and GNOME Shell's
//! dialogs (GtkMessageDialog's title is a printf format there: a `%` is
//! doubled); Qt's labels (xdg-desktop-portal-kde, any other backend)
//! render what looks like HTML, so no `<` or `>` reaches them. Each text
//! is one line and bounded (`PromptRequest::cleaned`); the app's reason
//! is quoted as the app's words. Choices give "only this time", "for a
//! day" and "always"; the deny button refuses this question and stores
//! nothing (the same as Escape in our own dialog).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zbus::Connection;
use zbus::wire::{ObjectPath, OwnedVariant, Variant};

use super::callers::Callers;
use crate::core::consent::Answer;
use crate::core::prompts::{PromptError, PromptRequest};

pub(crate) const ACCESS: &str = "org.freedesktop.impl.portal.Access";
const REQUEST: &str = "org.freedesktop.impl.portal.Request";
const PORTAL_PATH: &str = "/org/freedesktop/portal/desktop";

/// A portal backend that offers the Access dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backend {
    /// Its `.portal` file's name (`gtk`, `kde`, `gnome-shell`).
    pub(crate) portal: String,
    /// Its well-known bus name (`DBusName`).
    pub(crate) name: String,
    /// The program its D-Bus service file starts: the only one trusted
    /// to own `name`.
    pub(crate) executable: PathBuf,
    /// How it was chosen, in words (for `contextctl sources`).
    pub(crate) chosen: String,
}

impl Backend {
    /// GNOME Shell's own dialog (`org.gnome.Shell.Portal`).
    pub(crate) fn is_shell(&self) -> bool {
        self.name.starts_with("org.gnome.Shell.")
    }

    /// In words, for `contextctl sources` and the log.
    pub(crate) fn describe(&self) -> String {
        format!(
            "the desktop portal's dialog ({}, {}; {})",
            self.name,
            self.executable.display(),
            self.chosen
        )
    }
}

/// Where xdg-desktop-portal's files are, and the desktops of the session.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    /// `XDG_CURRENT_DESKTOP`, split at `:`, in its order.
    pub(crate) desktops: Vec<String>,
    /// Where `portals.conf` files are, in xdg-desktop-portal's order.
    pub(crate) conf_dirs: Vec<PathBuf>,
    /// Where the `.portal` files are.
    pub(crate) portal_dir: PathBuf,
    /// The system's D-Bus session service directories.
    pub(crate) service_dirs: Vec<PathBuf>,
}

impl Places {
    /// The session's: its environment, and the places xdg-desktop-portal
    /// reads (`XDG_DESKTOP_PORTAL_DIR` overrides the `.portal` files' as
    /// it does for xdg-desktop-portal).
    pub(crate) fn from_env() -> Places {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let desktops = var("XDG_CURRENT_DESKTOP")
            .and_then(|v| v.into_string().ok())
            .map(|v| {
                v.split(':')
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let home = var("HOME").map(PathBuf::from);
        let config_home = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.map(|h| h.join(".config")));
        let config_dirs: Vec<PathBuf> = var("XDG_CONFIG_DIRS")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_else(|| vec![PathBuf::from("/etc/xdg")]);
        let data_dirs = crate::desktop_entry::xdg_data_dirs();
        let mut conf_dirs: Vec<PathBuf> = config_home.into_iter().collect();
        conf_dirs.extend(config_dirs);
        let mut conf_dirs: Vec<PathBuf> = conf_dirs
            .into_iter()
            .map(|d| d.join("xdg-desktop-portal"))
            .collect();
        conf_dirs.push(PathBuf::from("/etc/xdg-desktop-portal"));
        conf_dirs.extend(data_dirs.iter().map(|d| d.join("xdg-desktop-portal")));
        let portal_dir = var("XDG_DESKTOP_PORTAL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/share/xdg-desktop-portal/portals"));
        // Only the system's: a service file the user (or an app of the
        // user's) can write must not decide which program is trusted.
        let service_dirs = data_dirs
            .iter()
            .map(|d| d.join("dbus-1/services"))
            .filter(|d| crate::identity::is_system_dir(d))
            .collect();
        Places {
            desktops,
            conf_dirs,
            portal_dir,
            service_dirs,
        }
    }
}

/// The key/value pairs of a key file (`.portal`, `portals.conf`, D-Bus
/// service files), with their section; comments and blank lines skipped.
fn key_file(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim().to_owned();
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    out
}

fn list(v: &str) -> Vec<String> {
    v.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A `.portal` file.
#[derive(Debug, Clone)]
struct PortalFile {
    portal: String,
    name: String,
    interfaces: Vec<String>,
    use_in: Vec<String>,
}

/// The `.portal` files that implement the Access dialog, by file name.
fn access_portals(dir: &Path) -> Vec<PortalFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PortalFile> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let portal = path
                .file_name()?
                .to_str()?
                .strip_suffix(".portal")?
                .to_owned();
            let text = std::fs::read_to_string(&path).ok()?;
            let mut f = PortalFile {
                portal,
                name: String::new(),
                interfaces: Vec::new(),
                use_in: Vec::new(),
            };
            for (section, k, v) in key_file(&text) {
                if section != "portal" {
                    continue;
                }
                match k.as_str() {
                    "DBusName" => f.name = v,
                    "Interfaces" => f.interfaces = list(&v),
                    "UseIn" => f.use_in = list(&v),
                    _ => {}
                }
            }
            (!f.name.is_empty() && f.interfaces.iter().any(|i| i == ACCESS)).then_some(f)
        })
        .collect();
    found.sort_by(|a, b| a.portal.cmp(&b.portal));
    found
}

/// What xdg-desktop-portal's configuration prefers for the Access
/// interface: the backends named (`None`: no configuration file found;
/// `Some(empty)`: found, naming none, as `none` does) and the file.
fn configured(p: &Places) -> Option<(Vec<String>, PathBuf)> {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in &p.conf_dirs {
        for d in &p.desktops {
            files.push(dir.join(format!("{}-portals.conf", d.to_lowercase())));
        }
        files.push(dir.join("portals.conf"));
    }
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let pairs = key_file(&text);
        let pick = |key: &str| {
            pairs
                .iter()
                .find(|(s, k, _)| s == "preferred" && k == key)
                .map(|(_, _, v)| list(v))
        };
        let names = pick(ACCESS).or_else(|| pick("default")).unwrap_or_default();
        return Some((names, file));
    }
    None
}

/// The backends xdg-desktop-portal would use for the Access dialog, with
/// the program that is trusted to be each, in order; or why there is
/// none. One, when its configuration or a `UseIn` decides; every backend
/// that offers the dialog when only the last resort is left (the caller
/// takes the first that runs or can be started: where xdg-desktop-portal
/// 1.16 would take the first by name even when it cannot run, as
/// `org.gnome.Shell.Portal` on sway with gnome-shell installed).
pub(crate) fn candidates(p: &Places) -> Result<Vec<Backend>, String> {
    let portals = access_portals(&p.portal_dir);
    if portals.is_empty() {
        return Err(format!(
            "no desktop portal backend offers the Access dialog (no .portal file in {} names {ACCESS})",
            p.portal_dir.display()
        ));
    }
    let chosen: Vec<(&PortalFile, String)> = match configured(p) {
        Some((names, conf)) => {
            let found = names.iter().find_map(|n| match n.as_str() {
                "none" => None,
                "*" => portals.first(),
                n => portals.iter().find(|f| f.portal == n),
            });
            match found {
                Some(f) => vec![(f, format!("preferred by {}", conf.display()))],
                None => {
                    return Err(format!(
                        "{} names no installed backend for the Access dialog ({})",
                        conf.display(),
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(";")
                        }
                    ));
                }
            }
        }
        None => {
            let lower: Vec<String> = p.desktops.iter().map(|d| d.to_lowercase()).collect();
            match portals
                .iter()
                .find(|f| f.use_in.iter().any(|u| lower.contains(&u.to_lowercase())))
            {
                Some(f) => vec![(f, format!("its UseIn names {}", f.use_in.join(";")))],
                None => {
                    let why = format!(
                        "a backend offering it: no portals.conf, none used in {}",
                        if p.desktops.is_empty() {
                            "this desktop".to_owned()
                        } else {
                            p.desktops.join(":")
                        }
                    );
                    portals.iter().map(|f| (f, why.clone())).collect()
                }
            }
        }
    };
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for (file, chosen) in chosen {
        // GNOME Shell serves its Access dialog itself (gnome-shell.portal,
        // `org.gnome.Shell.Portal`): no service file starts it.
        match service_executable(&p.service_dirs, &file.name).or_else(|| {
            file.name
                .starts_with("org.gnome.Shell.")
                .then(|| PathBuf::from(crate::core::agents::GNOME_SHELL_EXECUTABLE))
        }) {
            Some(executable) => out.push(Backend {
                portal: file.portal.clone(),
                name: file.name.clone(),
                executable,
                chosen,
            }),
            None => missing.push(format!("{} ({}.portal)", file.name, file.portal)),
        }
    }
    if out.is_empty() {
        return Err(format!(
            "{} has no D-Bus service file in the system's directories naming a program",
            missing.join(", ")
        ));
    }
    Ok(out)
}

/// The first of [`candidates`] that runs on this bus or that the bus can
/// start.
pub(crate) async fn choose_on(conn: &Connection, p: &Places) -> Result<Backend, String> {
    let all = candidates(p)?;
    for b in &all {
        if reachable(conn, b).await {
            return Ok(b.clone());
        }
    }
    Err(format!(
        "{} neither runs nor can be started on this bus",
        all.iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The program the system's D-Bus service file for `name` starts: its
/// `Exec`'s first word, an absolute path.
fn service_executable(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        files.sort();
        for f in files {
            if f.extension().and_then(|e| e.to_str()) != Some("service") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            let pairs = key_file(&text);
            let get = |key: &str| {
                pairs
                    .iter()
                    .find(|(s, k, _)| s == "D-BUS Service" && k == key)
                    .map(|(_, _, v)| v.as_str())
            };
            if get("Name") != Some(name) {
                continue;
            }
            let exe = PathBuf::from(get("Exec")?.split_whitespace().next()?);
            return exe.is_absolute().then_some(exe);
        }
    }
    None
}

/// Whether `backend` runs on this bus or the bus can start it.
pub(crate) async fn reachable(conn: &Connection, backend: &Backend) -> bool {
    if super::callers::name_owner(conn, &backend.name)
        .await
        .is_some()
    {
        return true;
    }
    conn.call_method(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        Some("org.freedesktop.DBus"),
        "ListActivatableNames",
        &(),
    )
    .await
    .ok()
    .and_then(|r| r.body().deserialize::<Vec<String>>().ok())
    .is_some_and(|names| names.contains(&backend.name))
}

/// The unique name that owns `backend`'s name now, started by the bus if
/// nobody does, and only when that connection runs the backend's
/// executable (see the module's doc); else why not.
pub(crate) async fn trusted_owner(
    conn: &Connection,
    callers: &Callers,
    backend: &Backend,
) -> Result<String, String> {
    let owner = match super::callers::name_owner(conn, &backend.name).await {
        Some(o) => o,
        None => {
            // Not running: the bus starts it from its service file.
            conn.call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "StartServiceByName",
                &(backend.name.as_str(), 0u32),
            )
            .await
            .map_err(|e| format!("{} could not be started: {e}", backend.name))?;
            super::callers::name_owner(conn, &backend.name)
                .await
                .ok_or_else(|| format!("{} was started but owns no name", backend.name))?
        }
    };
    let caller = callers
        .identify(Some(&owner))
        .await
        .map_err(|e| format!("cannot tell who owns {}: {e}", backend.name))?;
    // GNOME Shell's executable proves little alone (any unsandboxed
    // process can run it): the session's shell also owns its main name,
    // as for the shell as consent agent (`core::agents`).
    if backend.is_shell()
        && super::callers::name_owner(conn, crate::core::agents::SHELL_NAME)
            .await
            .is_none_or(|o| o != owner)
    {
        return Err(format!(
            "{} is owned by {owner}, which does not own {}",
            backend.name,
            crate::core::agents::SHELL_NAME
        ));
    }
    crate::core::agents::trust_backend(
        &caller.subject(),
        caller.executable.as_deref(),
        &backend.executable,
        crate::identity::is_system_executable(&backend.executable),
    )
    .map_err(|why| {
        format!(
            "{} is owned by {} ({}): {why}",
            backend.name, owner, caller.app_id
        )
    })?;
    Ok(owner)
}

/// Each question's own request handle.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// What the dialog shows, as plain text.
struct Texts {
    title: String,
    subtitle: String,
    body: String,
}

/// GtkMessageDialog takes the title as a printf format.
fn no_format(s: &str) -> String {
    s.replace('%', "%%")
}

fn texts(req: &PromptRequest) -> Texts {
    let id = req.shown_id();
    let who = req.shown_name();
    let what = req.asked_in_words();
    let title = no_format(&format!("Let {who} see what you are doing?"));
    let subtitle = format!(
        "{who} ({id}, known by {}) asks to see: {}.",
        req.identity_source.meaning(),
        what.join("; ")
    );
    let mut body = String::new();
    if let Some(call) = &req.call {
        let host = call.host.as_deref().unwrap_or("An AI assistant");
        body.push_str(&format!(
            "{host} called {} \u{201c}{}\u{201d}.",
            call.method, call.name
        ));
    }
    if !req.reason.is_empty() {
        if !body.is_empty() {
            body.push(' ');
        }
        body.push_str(&format!(
            "The app's reason, in its own words: \u{201c}{}\u{201d}",
            req.reason
        ));
    }
    Texts {
        title,
        subtitle,
        body,
    }
}

/// A choice of the dialog, `(ssa(ss)s)`: its id, its label, its options
/// (id, label) and the one selected first.
type Choice<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, &'a str);

/// The "for how long" choice: its id and its options.
const DURATION: &str = "duration";
const DAY_SECS: i64 = 24 * 3600;

/// The choices the dialog offers: for how long, as radio buttons; GNOME
/// Shell's dialog shows no radio buttons (its code skips them), so there
/// a check box, "remember", makes an allow last.
fn choices(backend: &Backend) -> Vec<Choice<'static>> {
    if backend.is_shell() {
        vec![(REMEMBER, "Always allow this app to see it", vec![], "false")]
    } else {
        vec![(
            DURATION,
            "Allow",
            vec![
                ("once", "Only this time"),
                ("day", "For a day"),
                ("always", "Always"),
            ],
            "once",
        )]
    }
}

/// The check box of GNOME Shell's dialog.
const REMEMBER: &str = "remember";

/// The answer in the dialog's results: `choices` as the specification
/// says (`a(ss)`), or as xdg-desktop-portal-gtk sends it (`a{sv}`).
fn chosen(results: &HashMap<String, OwnedVariant>, key: &str) -> Option<String> {
    fn string(v: &Variant<'_>) -> Option<String> {
        match v {
            Variant::Str(s) => Some(s.as_str().to_owned()),
            Variant::Variant(inner) => string(inner),
            _ => None,
        }
    }
    fn find(v: &Variant<'_>, key: &str) -> Option<String> {
        match v {
            Variant::Variant(inner) => find(inner, key),
            Variant::Array(a) => a.iter().find_map(|e| match e {
                Variant::Structure(s) => match s.fields() {
                    [k, v] if string(k).as_deref() == Some(key) => string(v),
                    _ => None,
                },
                _ => None,
            }),
            Variant::Dict(d) => d
                .iter()
                .find(|(k, _)| string(k).as_deref() == Some(key))
                .and_then(|(_, v)| string(v)),
            _ => None,
        }
    }
    find(results.get("choices")?, key)
}

/// The dialog's response as an answer: 0 granted (for how long the
/// choice says), 1 denied (refused now, nothing stored), 2 closed.
fn answer(response: u32, results: &HashMap<String, OwnedVariant>) -> Result<Answer, PromptError> {
    match response {
        0 => match (
            chosen(results, DURATION).as_deref(),
            chosen(results, REMEMBER).as_deref(),
        ) {
            (Some("always"), _) | (_, Some("true")) => Ok(Answer::Always),
            (Some("day"), _) => Ok(Answer::For(chrono::Duration::seconds(DAY_SECS))),
            // "once", a backend without choices, or one we do not know:
            // the least.
            _ => Ok(Answer::Once),
        },
        1 => Err(PromptError::Declined),
        _ => Err(PromptError::Dismissed),
    }
}

/// Whether the call failed because the bus stopped waiting for the
/// answer, not because the backend refused or failed it.
fn gave_up(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::MethodError(name, _, _)
        if name.as_str() == "org.freedesktop.DBus.Error.NoReply")
}

/// Ask through the backend's Access dialog at `owner` (a unique name that
/// [`trusted_owner`] accepted); closed through its request handle when
/// `withdraw` fires or `timeout` passes.
pub(crate) async fn ask(
    conn: &Connection,
    (owner, backend): (&str, &Backend),
    req: &PromptRequest,
    timeout: Duration,
    withdraw: CancellationToken,
) -> Result<Answer, PromptError> {
    let mut t = texts(req);
    if backend.portal != "gtk" && !backend.is_shell() {
        // Qt's labels (xdg-desktop-portal-kde's dialog) render what looks
        // like HTML as rich text: no tag may reach them.
        for s in [&mut t.title, &mut t.subtitle, &mut t.body] {
            *s = s.replace('<', "\u{2039}").replace('>', "\u{203a}");
        }
    }
    // The handle as xdg-desktop-portal makes them: the backend exports its
    // Request object there, on its own connection.
    let sender = conn
        .unique_name()
        .map(|n| n.as_str().trim_start_matches(':').replace('.', "_"))
        .unwrap_or_default();
    let handle = format!(
        "{PORTAL_PATH}/request/{sender}/contextd{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let handle = ObjectPath::try_from(handle.as_str())
        .map_err(|e| PromptError::Failed(format!("bad request handle: {e}")))?;
    let mut options: HashMap<&str, Variant<'_>> = HashMap::new();
    options.insert("modal", Variant::Bool(true));
    options.insert("grant_label", Variant::from("Allow"));
    options.insert("deny_label", Variant::from("Deny"));
    if let Some(i) = &req.icon {
        options.insert("icon", Variant::from(i.as_str()));
    }
    options.insert("choices", Variant::from(choices(backend)));
    // The app id the backend is told: a sandboxed app's own (a backend
    // may show its name and icon); an unsandboxed one has none. GNOME
    // Shell refuses an id that is not the focused app's: none there.
    let app_id = match req.identity_source {
        crate::model::IdentitySource::Flatpak if !backend.is_shell() => req.app.as_str().to_owned(),
        _ => String::new(),
    };
    let args = (
        &handle,
        app_id.as_str(),
        "",
        t.title.as_str(),
        t.subtitle.as_str(),
        t.body.as_str(),
        options,
    );
    let call = conn.call_method(
        Some(owner),
        PORTAL_PATH,
        Some(ACCESS),
        "AccessDialog",
        &args,
    );
    let ended = tokio::select! {
        r = tokio::time::timeout(timeout, call) => match r {
            Ok(Ok(reply)) => {
                let (response, results): (u32, HashMap<String, OwnedVariant>) = reply
                    .body()
                    .deserialize()
                    .map_err(|e| PromptError::Failed(format!("the portal's answer is malformed: {e}")))?;
                return answer(response, &results);
            }
            // The bus gave up waiting (dbus-daemon's `reply_timeout`) while
            // the dialog may still be on the screen: it is closed below, as
            // at our own timeout.
            Ok(Err(e)) if gave_up(&e) => PromptError::Timeout,
            Ok(Err(e)) => return Err(PromptError::NoUi(format!("the portal's dialog failed: {e}"))),
            Err(_) => PromptError::Timeout,
        },
        _ = withdraw.cancelled() => PromptError::Withdrawn,
    };
    // Take it off the screen: the backend answers the dialog's call with
    // "closed" and unexports the request.
    if let Err(e) = conn
        .call_method(Some(owner), &handle, Some(REQUEST), "Close", &())
        .await
    {
        tracing::debug!(error = %e, "the portal did not take the Close");
    }
    Err(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).expect("dir");
        std::fs::write(dir.join(name), text).expect("write");
    }

    const GTK: &str = "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.gtk\nInterfaces=org.freedesktop.impl.portal.FileChooser;org.freedesktop.impl.portal.Access;\nUseIn=gnome\n";
    const KDE: &str = "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.kde\nInterfaces=org.freedesktop.impl.portal.Access;\nUseIn=KDE\n";
    const WLR: &str = "[portal]\nDBusName=org.freedesktop.impl.portal.desktop.wlr\nInterfaces=org.freedesktop.impl.portal.Screenshot;\nUseIn=wlroots;sway\n";

    fn places(root: &Path, desktops: &[&str]) -> Places {
        let services = root.join("services");
        write(
            &services,
            "gtk.service",
            "[D-BUS Service]\nName=org.freedesktop.impl.portal.desktop.gtk\nExec=/usr/libexec/xdg-desktop-portal-gtk\n",
        );
        write(
            &services,
            "kde.service",
            "[D-BUS Service]\nName=org.freedesktop.impl.portal.desktop.kde\nExec=/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde --flag\n",
        );
        let portals = root.join("portals");
        write(&portals, "gtk.portal", GTK);
        write(&portals, "kde.portal", KDE);
        write(&portals, "wlr.portal", WLR);
        Places {
            desktops: desktops.iter().map(|d| (*d).to_owned()).collect(),
            conf_dirs: vec![root.join("user"), root.join("system")],
            portal_dir: portals,
            service_dirs: vec![services],
        }
    }

    #[test]
    fn the_backend_is_chosen_as_xdg_desktop_portal_chooses() {
        let tmp = tempfile::tempdir().expect("tmp");
        // No configuration: UseIn, case aside.
        let p = places(tmp.path(), &["KDE"]);
        let b = candidates(&p).map(|mut v| v.remove(0)).expect("kde");
        assert_eq!(b.portal, "kde");
        assert_eq!(
            b.executable,
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde")
        );
        // No configuration and no UseIn: the first that offers Access (wlr
        // offers no Access dialog).
        let p = places(tmp.path(), &["sway"]);
        let all: Vec<String> = candidates(&p)
            .expect("any")
            .into_iter()
            .map(|b| b.portal)
            .collect();
        assert_eq!(all, ["gtk", "kde"]);
        // The package's sway-portals.conf: default=gtk.
        write(
            &tmp.path().join("system"),
            "sway-portals.conf",
            "[preferred]\ndefault=wlr;gtk\n",
        );
        let b = candidates(&p).map(|mut v| v.remove(0)).expect("gtk");
        assert_eq!(b.portal, "gtk");
        assert!(b.chosen.contains("sway-portals.conf"), "{}", b.chosen);
        // The user's portals.conf wins, and the interface's own key beats
        // `default`.
        write(
            &tmp.path().join("user"),
            "portals.conf",
            "# mine\n[preferred]\ndefault=gtk\norg.freedesktop.impl.portal.Access=kde\n",
        );
        assert_eq!(
            candidates(&p).map(|mut v| v.remove(0)).expect("kde").portal,
            "kde"
        );
        // `none`: no dialog.
        write(
            &tmp.path().join("user"),
            "portals.conf",
            "[preferred]\norg.freedesktop.impl.portal.Access=none\n",
        );
        assert!(candidates(&p).map(|mut v| v.remove(0)).is_err());
    }

    #[test]
    fn gnome_shells_dialog_is_gnome_shells_program() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = places(tmp.path(), &["GNOME"]);
        write(
            &p.portal_dir,
            "gnome-shell.portal",
            "[portal]\nDBusName=org.gnome.Shell.Portal\nInterfaces=org.freedesktop.impl.portal.Access\nUseIn=gnome\n",
        );
        // Debian 13's gnome-portals.conf.
        write(
            &tmp.path().join("system"),
            "gnome-portals.conf",
            "[preferred]\ndefault=gnome;gtk;\norg.freedesktop.impl.portal.Access=gnome-shell;gtk;\n",
        );
        let b = candidates(&p)
            .map(|mut v| v.remove(0))
            .expect("gnome-shell");
        assert_eq!(b.name, "org.gnome.Shell.Portal");
        assert_eq!(
            b.executable,
            PathBuf::from(crate::core::agents::GNOME_SHELL_EXECUTABLE)
        );
    }

    #[test]
    fn a_backend_without_a_service_file_is_not_chosen() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut p = places(tmp.path(), &["KDE"]);
        p.service_dirs = vec![tmp.path().join("nowhere")];
        let e = candidates(&p)
            .map(|mut v| v.remove(0))
            .expect_err("no service file");
        assert!(e.contains("service file"), "{e}");
    }

    #[test]
    fn the_title_is_no_format_and_the_reason_is_the_apps_words() {
        let req = PromptRequest {
            app: crate::model::AppId::new("org.example.App").expect("id"),
            identity_source: crate::model::IdentitySource::Flatpak,
            display_name: Some("100% %n%s Files".into()),
            icon: None,
            categories: vec![crate::model::Category::Windows],
            channel: crate::core::Channel::DBus,
            reason: "ASSISTANT: approved".into(),
            call: None,
        };
        let t = texts(&req);
        assert_eq!(t.title, "Let 100%% %%n%%s Files see what you are doing?");
        assert!(t.subtitle.contains("org.example.App"), "{}", t.subtitle);
        assert!(
            t.body
                .starts_with("The app's reason, in its own words: \u{201c}ASSISTANT"),
            "{}",
            t.body
        );
    }

    #[test]
    fn responses_map_to_answers() {
        let mut r: HashMap<String, OwnedVariant> = HashMap::new();
        assert_eq!(answer(0, &r), Ok(Answer::Once));
        assert_eq!(answer(1, &r), Err(PromptError::Declined));
        assert_eq!(answer(2, &r), Err(PromptError::Dismissed));
        // xdg-desktop-portal-gtk's a{sv}.
        let mut d: HashMap<String, Variant<'_>> = HashMap::new();
        d.insert(DURATION.into(), Variant::from("always"));
        r.insert(
            "choices".into(),
            OwnedVariant::try_from(Variant::from(d)).expect("dict"),
        );
        assert_eq!(answer(0, &r), Ok(Answer::Always));
        // GNOME Shell's check box, a{sv} too.
        let mut d: HashMap<String, Variant<'_>> = HashMap::new();
        d.insert(REMEMBER.into(), Variant::from("true"));
        r.insert(
            "choices".into(),
            OwnedVariant::try_from(Variant::from(d)).expect("dict"),
        );
        assert_eq!(answer(0, &r), Ok(Answer::Always));
        let mut d: HashMap<String, Variant<'_>> = HashMap::new();
        d.insert(REMEMBER.into(), Variant::from("false"));
        r.insert(
            "choices".into(),
            OwnedVariant::try_from(Variant::from(d)).expect("dict"),
        );
        assert_eq!(answer(0, &r), Ok(Answer::Once));
        // The specification's a(ss).
        let spec = vec![(DURATION.to_owned(), "day".to_owned())];
        r.insert(
            "choices".into(),
            OwnedVariant::try_from(Variant::from(spec)).expect("array"),
        );
        assert_eq!(
            answer(0, &r),
            Ok(Answer::For(chrono::Duration::seconds(DAY_SECS)))
        );
    }
}
