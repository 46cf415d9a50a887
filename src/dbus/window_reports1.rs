//! `org.contextd.WindowReports1`: the desktop shell reports its windows.
//! Documented in `dbus-interfaces/org.contextd.WindowReports1.xml`.
//!
//! Converts the wire's dictionaries into `core::reports` types; the core
//! decides whether the caller is a shell (its identity from the bus's
//! credentials, its connection the owner of the shell's bus name) and
//! hands the report on. What the core knows of the names' owners comes
//! from the bus only: [`follow_shell_names`] passes on `NameOwnerChanged`,
//! and a report from a connection the core does not know as the owner
//! makes this ask `GetNameOwner` first ([`NameOwners`] keeps the newest
//! answer of the two). A window's properties come as
//! `a{sv}` so that a KWin script's `callDBus` (which sends a JavaScript
//! object as `a{sv}` and an array as `av`) and GJS can both call it.
//! Calls are handled one after the other, in the order they arrive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use zbus::fdo::DBusProxy;
use zbus::interface;
use zbus::message::{Header, Sequence};
use zbus::wire::{OwnedVariant, Variant};

use super::Handles;
use super::Shared;
use super::error::{Error, Result};
use crate::core::reports::{self, Report, ReportedWindow};
use crate::model::WindowStates;

pub(crate) struct WindowReports1 {
    pub(crate) shared: Arc<Shared>,
    pub(crate) owners: Arc<NameOwners>,
}

/// What the bus said last about the owner of each shell's name. The
/// `NameOwnerChanged` signals and the replies to `GetNameOwner` are
/// handled by different tasks, so each is kept only if it is newer (by
/// its place in what this connection received) than what the core was
/// told: an old signal never undoes a newer answer.
#[derive(Debug, Default)]
pub(crate) struct NameOwners {
    told: Mutex<HashMap<&'static str, Sequence>>,
}

impl NameOwners {
    /// The bus said, in the message at `at`, that `owner` owns the name
    /// of the shell `source`: tell the core, unless it knows newer.
    fn learn(&self, core: &Handles, source: &'static str, at: Sequence, owner: Option<&str>) {
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        if told.get(source).is_some_and(|t| *t >= at) {
            return;
        }
        told.insert(source, at);
        // Under the lock, so that two answers reach the core in order.
        core.reports.shell_name_owner(source, owner);
    }

    /// Ask the bus who owns the name of the shell `source`.
    pub(crate) async fn ask(&self, shared: &Shared, source: &'static str) {
        let Some(name) = reports::bus_name(source) else {
            return;
        };
        let reply = shared
            .conn
            .call_method(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                Some("org.freedesktop.DBus"),
                "GetNameOwner",
                &(name,),
            )
            .await;
        match reply {
            Ok(m) => match m.body().deserialize::<String>() {
                Ok(owner) => self.learn(&shared.core, source, m.recv_position(), Some(&owner)),
                Err(e) => tracing::warn!(name, error = %e, "GetNameOwner answered oddly"),
            },
            // NameHasNoOwner: the shell does not run.
            Err(zbus::Error::MethodError(_, _, m)) => {
                self.learn(&shared.core, source, m.recv_position(), None)
            }
            Err(e) => tracing::warn!(name, error = %e, "cannot ask who owns the shell's name"),
        }
    }

    /// The shell a caller is by its executable (else `NotAllowed`), and
    /// its connection; the bus is asked who owns the shell's name when the
    /// core does not know the caller as the owner (a new shell's first
    /// call can overtake the signal of its name). Whether the caller owns
    /// it is then the core's answer (`Reports::owns_shell_name`).
    pub(crate) async fn shell_caller(
        &self,
        shared: &Shared,
        hdr: &Header<'_>,
    ) -> Result<(&'static str, String)> {
        let who = shared.subject(hdr).await?;
        let source = shared.core.reports.window_reporter(&who)?;
        let sender = sender(hdr)?;
        if !shared.core.reports.owns_shell_name(source, &sender) {
            self.ask(shared, source).await;
        }
        Ok((source, sender))
    }
}

/// The owner changes of the shells' names, each with its shell.
pub(crate) type ShellNameChanges =
    futures_util::stream::BoxStream<'static, (&'static str, zbus::fdo::NameOwnerChanged)>;

/// Subscribe to the owner changes of the shells' names (before the
/// interface is served, so that no change is missed).
pub(crate) async fn shell_name_changes(dbus: &DBusProxy<'static>) -> ShellNameChanges {
    let mut streams = Vec::new();
    for (source, name) in reports::BUS_NAMES {
        match dbus
            .receive_name_owner_changed_with_args(&[(0, name)])
            .await
        {
            Ok(s) => streams.push(s.map(move |sig| (source, sig))),
            Err(e) => tracing::warn!(
                name,
                error = %e,
                "cannot follow the shell's name; its owner is asked at each report"
            ),
        }
    }
    Box::pin(futures_util::stream::select_all(streams))
}

/// Tell the core each owner change of the shells' names (through
/// `owners`), until `cancel`.
pub(crate) async fn follow_shell_names(
    core: Arc<Handles>,
    owners: Arc<NameOwners>,
    mut changes: ShellNameChanges,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            next = changes.next() => {
                let Some((source, sig)) = next else { break };
                let Ok(args) = sig.args() else { continue };
                let owner = args.new_owner().as_ref().map(|o| o.to_string());
                owners.learn(&core, source, sig.message().recv_position(), owner.as_deref());
            }
        }
    }
}

impl WindowReports1 {
    /// Refuse a caller that is not a shell before looking at what it
    /// sent: its executable, then its connection the owner of the
    /// shell's name (asking the bus if the core does not know it as that:
    /// a new shell's first report can overtake the signal of its name).
    async fn check(&self, hdr: &Header<'_>) -> Result<()> {
        self.owners
            .shell_caller(&self.shared, hdr)
            .await
            .map(|_| ())
    }

    /// Check the caller ([`WindowReports1::check`]) and hand the report to
    /// the core, which decides.
    async fn report(&self, hdr: &Header<'_>, report: Report) -> Result<()> {
        let who = self.shared.subject(hdr).await?;
        let owner = sender(hdr)?;
        Ok(self
            .shared
            .core
            .reports
            .window_report(&who, &owner, report)?)
    }
}

fn sender(hdr: &Header<'_>) -> Result<String> {
    hdr.sender()
        .map(|s| s.to_string())
        .ok_or_else(|| Error::Failed("a call without a sender".into()))
}

/// The variant inside any number of `v` wrappers.
fn unwrap<'a>(mut v: &'a Variant<'a>) -> &'a Variant<'a> {
    while let Variant::Variant(inner) = v {
        v = inner;
    }
    v
}

fn string(key: &str, v: &Variant<'_>) -> Result<String> {
    match unwrap(v) {
        Variant::Str(s) => Ok(s.as_str().to_owned()),
        other => Err(Error::InvalidArgs(format!(
            "window property {key} must be a string, not {}",
            other.value_signature()
        ))),
    }
}

/// `as`, or an `av` of strings.
fn strings(key: &str, v: &Variant<'_>) -> Result<Vec<String>> {
    let bad = || Error::InvalidArgs(format!("window property {key} must be an array of strings"));
    match unwrap(v) {
        Variant::Array(a) => a
            .inner()
            .iter()
            .take(64)
            .map(|item| match unwrap(item) {
                Variant::Str(s) => Ok(s.as_str().to_owned()),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// The window's process id: any integer type, or a double with an
/// integral value (what a KWin script's `callDBus` sends for a JavaScript
/// number); 0 or less is "not known" (GNOME Shell's `get_pid()` says -1
/// for a window whose client it cannot tell), a value beyond a PID is an
/// error.
fn pid(key: &str, v: &Variant<'_>) -> Result<Option<u32>> {
    let n: Option<i64> = match unwrap(v) {
        Variant::U32(n) => Some(i64::from(*n)),
        Variant::I32(n) => Some(i64::from(*n)),
        Variant::U64(n) => i64::try_from(*n).ok(),
        Variant::I64(n) => Some(*n),
        Variant::F64(f) if f.fract() == 0.0 && f.abs() < 1e15 => Some(*f as i64),
        _ => None,
    };
    match n {
        Some(n) if n <= 0 => Ok(None),
        Some(n) => match i32::try_from(n) {
            Ok(p) => Ok(Some(p.unsigned_abs())),
            Err(_) => Err(Error::InvalidArgs(format!(
                "window property {key} is no process id"
            ))),
        },
        None => Err(Error::InvalidArgs(format!(
            "window property {key} must be an integer"
        ))),
    }
}

/// A window's properties (see the XML for the keys); unknown keys are
/// ignored, a known key of the wrong type is an error.
fn window<'a>(entries: impl Iterator<Item = (&'a str, &'a Variant<'a>)>) -> Result<ReportedWindow> {
    let mut w = ReportedWindow::default();
    for (key, v) in entries {
        match key {
            "app_id" => w.app_id = string(key, v)?,
            "title" => w.title = string(key, v)?,
            "pid" => w.pid = pid(key, v)?,
            "parent" => w.parent = Some(string(key, v)?).filter(|p| !p.is_empty()),
            "outputs" => w.outputs = strings(key, v)?,
            "states" => {
                let mut s = WindowStates::default();
                for name in strings(key, v)? {
                    match name.as_str() {
                        "maximized" => s.maximized = true,
                        "minimized" => s.minimized = true,
                        "fullscreen" => s.fullscreen = true,
                        _ => {}
                    }
                }
                w.states = s;
            }
            _ => {}
        }
    }
    Ok(w)
}

fn window_of_map(map: &HashMap<String, OwnedVariant>) -> Result<ReportedWindow> {
    window(map.iter().map(|(k, v)| (k.as_str(), &**v)))
}

/// A window given as the value of a `windows` entry: an `a{sv}` inside
/// the `v`.
fn window_of_variant(id: &str, v: &Variant<'_>) -> Result<ReportedWindow> {
    let Variant::Dict(d) = unwrap(v) else {
        return Err(Error::InvalidArgs(format!(
            "window {id:?} must be a dictionary (a{{sv}})"
        )));
    };
    let mut entries = Vec::new();
    for (k, v) in d.iter() {
        match unwrap(k) {
            Variant::Str(s) => entries.push((s.as_str(), v)),
            _ => {
                return Err(Error::InvalidArgs(format!(
                    "window {id:?}: keys must be strings"
                )));
            }
        }
    }
    window(entries.into_iter())
}

fn id_or_none(id: String) -> Option<String> {
    Some(id).filter(|i| !i.is_empty())
}

fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::InvalidArgs("a window id must not be empty".into()));
    }
    Ok(())
}

// `spawn = false`: zbus would handle each call in a task of its own, and
// two reports of one shell (a window, then its new app id) could reach the
// source in either order. Handled in the object server's loop, they keep
// the order the shell sent them in; each call is short (the caller's
// identity is cached after its first call, so is the owner of the shell's
// name, and the queue to the source never waits). A call from a
// connection not known as the owner waits for one `GetNameOwner`.
#[interface(
    name = "org.contextd.WindowReports1",
    introspection_docs = false,
    spawn = false
)]
impl WindowReports1 {
    /// Every window of the shell and the focused one.
    async fn report_windows(
        &self,
        windows: HashMap<String, OwnedVariant>,
        focus: String,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        self.check(&hdr).await?;
        let mut list = Vec::with_capacity(windows.len());
        for (id, v) in &windows {
            check_id(id)?;
            list.push((id.clone(), window_of_variant(id, v)?));
        }
        let report = Report::Windows {
            windows: list,
            focus: id_or_none(focus),
        };
        self.report(&hdr, report).await
    }

    /// A window opened or changed.
    async fn report_window(
        &self,
        id: String,
        window: HashMap<String, OwnedVariant>,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<()> {
        self.check(&hdr).await?;
        check_id(&id)?;
        let window = window_of_map(&window)?;
        self.report(&hdr, Report::Window { id, window }).await
    }

    /// A window closed.
    async fn report_closed(&self, id: String, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.check(&hdr).await?;
        check_id(&id)?;
        self.report(&hdr, Report::Closed { id }).await
    }

    /// The focus moved ("" for none).
    async fn report_focus(&self, id: String, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.check(&hdr).await?;
        self.report(&hdr, Report::Focus { id: id_or_none(id) })
            .await
    }

    /// The caller stops reporting.
    async fn report_stopped(&self, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.check(&hdr).await?;
        self.report(&hdr, Report::Stopped).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zbus::wire::{Array, Dict};

    fn map(entries: Vec<(&str, Variant<'static>)>) -> HashMap<String, OwnedVariant> {
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), OwnedVariant::try_from(v).expect("owned")))
            .collect()
    }

    #[test]
    fn windows_from_gjs_and_from_a_kwin_script() {
        // GJS: `as`; a KWin script's JavaScript array: `av` of strings.
        let gjs = map(vec![
            ("app_id", Variant::from("org.x.A")),
            ("title", Variant::from("T")),
            (
                "states",
                Variant::from(vec!["maximized", "activated", "odd"]),
            ),
            ("unknown", Variant::from(7u32)),
        ]);
        let w = window_of_map(&gjs).expect("gjs window");
        assert_eq!(w.app_id, "org.x.A");
        assert!(
            w.states.maximized && !w.states.activated,
            "activated is ignored"
        );
        let av: Array<'static> =
            vec![Variant::Variant(Box::new(Variant::from("fullscreen")))].into();
        let kwin = map(vec![
            ("states", Variant::Array(av)),
            ("outputs", Variant::from(vec!["Virtual-1"])),
            ("parent", Variant::from("")),
        ]);
        let w = window_of_map(&kwin).expect("kwin window");
        assert!(w.states.fullscreen);
        assert_eq!(w.outputs, vec!["Virtual-1"]);
        assert_eq!(w.parent, None);
    }

    /// A PID as GJS sends it (`u`, or `i` with GNOME's -1 for "none") and
    /// as a KWin script's number does (`d`, or `i`); what no PID can be is
    /// refused.
    #[test]
    fn pids_of_every_integer_shape() {
        for (v, want) in [
            (Variant::from(42u32), Some(42)),
            (Variant::from(42i32), Some(42)),
            (Variant::from(42f64), Some(42)),
            (Variant::from(42i64), Some(42)),
            (Variant::from(-1i32), None),
            (Variant::from(0u32), None),
        ] {
            let w = window_of_map(&map(vec![("pid", v.try_clone().expect("clone"))]))
                .expect("a window");
            assert_eq!(w.pid, want, "{v:?}");
        }
        for bad in [
            Variant::from(4.5f64),
            Variant::from(u64::MAX),
            Variant::from(i64::from(i32::MAX) + 1),
            Variant::from("42"),
        ] {
            assert!(
                matches!(
                    window_of_map(&map(vec![("pid", bad)])),
                    Err(Error::InvalidArgs(_))
                ),
                "accepted"
            );
        }
    }

    #[test]
    fn wrong_types_are_invalid_args() {
        for bad in [
            map(vec![("title", Variant::from(3i32))]),
            map(vec![("app_id", Variant::from(vec!["a"]))]),
            map(vec![("states", Variant::from("maximized"))]),
            map(vec![("outputs", Variant::from(vec![1u32, 2]))]),
        ] {
            assert!(
                matches!(window_of_map(&bad), Err(Error::InvalidArgs(_))),
                "{bad:?}"
            );
        }
        // A `windows` entry that is not a dictionary.
        assert!(matches!(
            window_of_variant("a", &Variant::from("x")),
            Err(Error::InvalidArgs(_))
        ));
        let d: Dict<'static, 'static> = HashMap::from([(1u32, Variant::from("x"))]).into();
        assert!(matches!(
            window_of_variant("a", &Variant::Dict(d)),
            Err(Error::InvalidArgs(_))
        ));
    }
}
