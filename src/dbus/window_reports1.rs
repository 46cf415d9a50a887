//! `org.contextd.WindowReports1`: the desktop shell reports its windows.
//! Documented in `dbus-interfaces/org.contextd.WindowReports1.xml`.
//!
//! Converts the wire's dictionaries into `core::reports` types; the core
//! decides whether the caller is a shell (its identity from the bus's
//! credentials) and hands the report on. A window's properties come as
//! `a{sv}` so that a KWin script's `callDBus` (which sends a JavaScript
//! object as `a{sv}` and an array as `av`) and GJS can both call it.
//! Calls are handled one after the other, in the order they arrive.

use std::collections::HashMap;
use std::sync::Arc;

use zbus::interface;
use zbus::message::Header;
use zbus::wire::{OwnedVariant, Variant};

use super::Shared;
use super::error::{Error, Result};
use crate::core::reports::{Report, ReportedWindow};
use crate::model::WindowStates;

pub struct WindowReports1 {
    pub(crate) shared: Arc<Shared>,
}

impl WindowReports1 {
    /// Refuse a caller that is not a shell before looking at what it sent.
    async fn check(&self, hdr: &Header<'_>) -> Result<()> {
        let who = self.shared.subject(hdr).await?;
        self.shared.core.window_reporter(&who)?;
        Ok(())
    }

    async fn report(&self, hdr: &Header<'_>, report: Report) -> Result<()> {
        let who = self.shared.subject(hdr).await?;
        let owner = hdr
            .sender()
            .map(|s| s.to_string())
            .ok_or_else(|| Error::Failed("a call without a sender".into()))?;
        Ok(self.shared.core.window_report(&who, &owner, report)?)
    }
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

/// A window's properties (see the XML for the keys); unknown keys are
/// ignored, a known key of the wrong type is an error.
fn window<'a>(entries: impl Iterator<Item = (&'a str, &'a Variant<'a>)>) -> Result<ReportedWindow> {
    let mut w = ReportedWindow::default();
    for (key, v) in entries {
        match key {
            "app_id" => w.app_id = string(key, v)?,
            "title" => w.title = string(key, v)?,
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
// identity is cached after its first call, the queue to the source never
// waits).
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
        check_id(&id)?;
        self.report(&hdr, Report::Closed { id }).await
    }

    /// The focus moved ("" for none).
    async fn report_focus(&self, id: String, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
        self.report(&hdr, Report::Focus { id: id_or_none(id) })
            .await
    }

    /// The caller stops reporting.
    async fn report_stopped(&self, #[zbus(header)] hdr: Header<'_>) -> Result<()> {
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
