//! Windows the desktop shell reports (org.contextd.WindowReports1): GNOME
//! Shell and KWin give ordinary clients no window list, so the shell itself
//! (the contextd GNOME Shell extension, the KWin script) reports its
//! windows and focus to the broker.
//!
//! The core decides who may report: only the shell, and two facts must
//! say so, neither of them taken from what the caller sends:
//! - its executable ([`Reporters`]; the identity comes from the caller's
//!   credentials like every caller's). Alone this proves little: any
//!   unsandboxed process can run `/usr/bin/gnome-shell` with an
//!   `LD_PRELOAD` library of its own;
//! - its connection owns the shell's well-known name on the bus
//!   (`org.gnome.Shell`, `org.kde.KWin`), which the real shell holds for
//!   as long as it runs, as the bus says (the publisher follows
//!   `NameOwnerChanged` and asks `GetNameOwner`, and tells
//!   [`Reports::shell_name_owner`]). So there is one reporter per shell at a
//!   time: another connection, even of the same executable, is refused
//!   while the shell runs, and when the name changes hands what the old
//!   owner reported goes.
//!
//! What a shell reports stays its claim: each window says which shell
//! attributed it (`app_id_source`). An allowed report is handed, in order,
//! to the `shells` source (`sources::shells`), which keeps each shell's
//! windows and turns them into `SourceEvent`s like any source: so consent,
//! detail levels, subscriptions and the timeline are the Wayland source's.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::error::{Error, Result};
use super::subject::Subject;
use crate::model::{AppId, IdentitySource, WindowAttribution, WindowStates};

/// The source that GNOME Shell's reports are.
pub(crate) const GNOME_SHELL: &str = "gnome-shell";
/// The source that KWin's reports are.
pub(crate) const KWIN: &str = "kwin";

/// The executable of each reporting source, where Debian (and every
/// distribution we know) installs it.
pub(crate) const DEFAULT_EXECUTABLES: [(&str, &str); 2] = [
    (GNOME_SHELL, "/usr/bin/gnome-shell"),
    (KWIN, "/usr/bin/kwin_wayland"),
];

/// The well-known name each shell owns on the session bus for as long as
/// it runs (the extension reports over GNOME Shell's own connection, the
/// KWin script's `callDBus` over KWin's).
pub(crate) const BUS_NAMES: [(&str, &str); 2] =
    [(GNOME_SHELL, "org.gnome.Shell"), (KWIN, "org.kde.KWin")];

/// The well-known name of the shell `source`.
pub(crate) fn bus_name(source: &str) -> Option<&'static str> {
    BUS_NAMES
        .iter()
        .find(|(s, _)| *s == source)
        .map(|(_, n)| *n)
}

/// What the windows of `source` say attributed them.
pub(crate) fn attribution(source: &str) -> WindowAttribution {
    match source {
        GNOME_SHELL => WindowAttribution::GnomeShell,
        KWIN => WindowAttribution::Kwin,
        _ => WindowAttribution::Compositor,
    }
}

/// The connection (unique name) that owns each shell's well-known name,
/// by source; a shell whose name has no owner (or none known yet) is
/// absent.
pub(crate) type NameOwners = BTreeMap<&'static str, String>;

/// At most this many windows per reporter (a full list longer than that
/// is refused).
pub(crate) const MAX_WINDOWS: usize = 4096;

/// How many reports may wait for the source before a reporter's call
/// waits too.
const QUEUE: usize = 256;

/// A window as a shell reports it; ids are the shell's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReportedWindow {
    pub(crate) app_id: String,
    pub(crate) title: String,
    /// `activated` is never set here: focus is reported on its own.
    pub(crate) states: WindowStates,
    pub(crate) outputs: Vec<String>,
    pub(crate) parent: Option<String>,
    /// The window's process, as the shell knows it from the Wayland
    /// client's socket credentials (or X11's client ids): the `shells`
    /// source resolves it like a D-Bus caller's PID.
    pub(crate) pid: Option<u32>,
}

/// One report of a shell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Report {
    /// Every window, and the focused one: replaces what was reported.
    Windows {
        windows: Vec<(String, ReportedWindow)>,
        focus: Option<String>,
    },
    /// A window opened or changed.
    Window {
        id: String,
        window: ReportedWindow,
    },
    Closed {
        id: String,
    },
    Focus {
        id: Option<String>,
    },
    /// The reporter stops (extension disabled, script unloaded).
    Stopped,
}

/// A report with who sent it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reported {
    /// [`GNOME_SHELL`] or [`KWIN`].
    pub(crate) source: &'static str,
    /// The reporter's connection (a D-Bus unique name): what it reported
    /// lives as long as that, and as long as it owns the shell's name.
    pub(crate) owner: String,
    pub(crate) report: Report,
}

/// What the `shells` source receives: the reports, in order, and who owns
/// each shell's name now. The source takes a report only while its sender
/// still owns the name ([`ShellFeed::owns`]), so that a report accepted
/// just before its sender lost the name never outlives the loss.
#[derive(Debug)]
pub(crate) struct ShellFeed {
    pub(crate) reports: mpsc::Receiver<Reported>,
    pub(crate) owners: watch::Receiver<NameOwners>,
}

impl ShellFeed {
    /// Whether `conn` owns the name of the shell `source` now.
    pub(crate) fn owns(&self, source: &str, conn: &str) -> bool {
        self.owners.borrow().get(source).is_some_and(|o| o == conn)
    }

    /// The owner of the name of the shell `source` now.
    pub(crate) fn owner(&self, source: &str) -> Option<String> {
        self.owners.borrow().get(source).cloned()
    }
}

/// Who may report, and where the reports go.
#[derive(Debug)]
pub(crate) struct Reporters {
    allowed: Vec<(&'static str, AppId)>,
    /// The owners of the shells' names, as the bus last said.
    owners: watch::Sender<NameOwners>,
    tx: mpsc::Sender<Reported>,
}

impl Reporters {
    /// The default executables plus `extra` ones (`[sources.shells]`);
    /// the feed is the `shells` source's.
    pub(crate) fn new(extra: &[(&'static str, &Path)]) -> (Reporters, ShellFeed) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (owners, owners_rx) = watch::channel(NameOwners::new());
        let mut allowed = Vec::new();
        let defaults = DEFAULT_EXECUTABLES
            .iter()
            .map(|(s, p)| (*s, Path::new(*p)))
            .chain(extra.iter().copied());
        for (source, path) in defaults {
            match path.to_str().map(AppId::from_exe) {
                Some(Ok(id)) => allowed.push((source, id)),
                _ => {
                    tracing::warn!(source, path = %path.display(), "not a usable executable path for a window reporter; ignored")
                }
            }
        }
        (
            Reporters {
                allowed,
                owners,
                tx,
            },
            ShellFeed {
                reports: rx,
                owners: owners_rx,
            },
        )
    }

    /// The source `who` reports as, if it is a shell: its identity must be
    /// its executable (not a Flatpak, Snap or systemd app id, which a shell
    /// never has) and one of the allowed ones.
    pub(crate) fn source_of(&self, who: &Subject) -> Result<&'static str> {
        if who.source == IdentitySource::Executable
            && let Some((source, _)) = self.allowed.iter().find(|(_, id)| *id == who.app_id)
        {
            return Ok(source);
        }
        Err(Error::NotAReporter {
            app: who.app_id.clone(),
            why: "only gnome-shell and kwin_wayland report windows".into(),
        })
    }

    /// Whether `conn` owns the well-known name of the shell `source`.
    fn owns(&self, source: &str, conn: &str) -> bool {
        self.owners.borrow().get(source).is_some_and(|o| o == conn)
    }

    /// The bus says `owner` owns the name of the shell `source` now.
    fn set_owner(&self, source: &'static str, owner: Option<&str>) {
        self.owners.send_if_modified(|owners| {
            if owners.get(source).map(String::as_str) == owner {
                return false;
            }
            tracing::debug!(source, owner, "the shell's bus name changed hands");
            match owner {
                Some(o) => owners.insert(source, o.to_owned()),
                None => owners.remove(source),
            };
            true
        });
    }
}

/// The window reports' handle: the desktop shell's reports of its
/// windows (`org.contextd.WindowReports1`). It holds who may report,
/// set once by the daemon when it starts the shell's source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reports {
    reporters: Arc<std::sync::OnceLock<Reporters>>,
}

impl Reports {
    /// Who may report windows (the desktop shell), set by the daemon.
    pub(crate) fn set_window_reports(&self, reporters: Reporters) {
        let _ = self.reporters.set(reporters);
    }

    fn reporters(&self) -> Result<&Reporters> {
        self.reporters
            .get()
            .ok_or_else(|| Error::Unavailable("window reports are not taken here".into()))
    }

    /// The source `who` reports as by its executable, or `NotAReporter`
    /// (whether its connection owns the shell's name is checked by
    /// [`Reports::window_report`]).
    pub(crate) fn window_reporter(&self, who: &Subject) -> Result<&'static str> {
        self.reporters()?.source_of(who)
    }

    /// Whether the connection `conn` owns the well-known name of the shell
    /// `source`, as far as the core was told. A publisher that hears "no"
    /// asks the bus before it reports, since a new shell's first report can
    /// overtake the news of its name.
    pub(crate) fn owns_shell_name(&self, source: &str, conn: &str) -> bool {
        self.reporters().is_ok_and(|r| r.owns(source, conn))
    }

    /// The bus says who owns the well-known name of the shell `source`
    /// now (`None`: nobody). Only a publisher calls this, with what the
    /// bus said (never what a caller said), newest last. When the name
    /// changes hands, the windows of the connection that held it go.
    pub(crate) fn shell_name_owner(&self, source: &'static str, owner: Option<&str>) {
        if let Ok(reporters) = self.reporters() {
            reporters.set_owner(source, owner);
        }
    }

    /// A shell's report, from the connection `owner`: refused unless `who`
    /// is a shell's executable and `owner` owns the shell's bus name, then
    /// handed to the source in order.
    pub(crate) fn window_report(&self, who: &Subject, owner: &str, report: Report) -> Result<()> {
        let reporters = self.reporters()?;
        let source = reporters.source_of(who)?;
        if !reporters.owns(source, owner) {
            let name = bus_name(source).unwrap_or(source);
            return Err(Error::NotAReporter {
                app: who.app_id.clone(),
                why: format!(
                    "its connection {owner} does not own {name}: only the running shell reports, over the connection that owns its name"
                ),
            });
        }
        if let Report::Windows { windows, .. } = &report
            && windows.len() > MAX_WINDOWS
        {
            return Err(Error::LimitExceeded(format!(
                "{} windows reported; at most {MAX_WINDOWS}",
                windows.len()
            )));
        }
        // Never waits: the D-Bus publisher handles reports one after the
        // other, and a full queue (a shell flooding, a source that does
        // not drain) must not hold the calls of anybody else.
        reporters
            .tx
            .try_send(Reported {
                source,
                owner: owner.to_owned(),
                report,
            })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => {
                    Error::LimitExceeded(format!("more than {QUEUE} window reports waiting"))
                }
                mpsc::error::TrySendError::Closed(_) => {
                    Error::Unavailable("window reports are not taken (the source is off)".into())
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Channel;

    fn subject(app: &str, source: IdentitySource) -> Subject {
        Subject {
            app_id: AppId::new(app.to_owned()).unwrap(),
            source,
            channel: Channel::DBus,
        }
    }

    #[test]
    fn only_the_shells_executables_report() {
        let (r, _rx) = Reporters::new(&[(KWIN, Path::new("/opt/kde/bin/kwin_wayland"))]);
        let exe = IdentitySource::Executable;
        assert_eq!(
            r.source_of(&subject("exe:/usr/bin/gnome-shell", exe)),
            Ok(GNOME_SHELL)
        );
        assert_eq!(
            r.source_of(&subject("exe:/usr/bin/kwin_wayland", exe)),
            Ok(KWIN)
        );
        assert_eq!(
            r.source_of(&subject("exe:/opt/kde/bin/kwin_wayland", exe)),
            Ok(KWIN)
        );
        for (app, source) in [
            ("exe:/usr/bin/gjs", exe),
            ("exe:/tmp/gnome-shell", exe),
            ("exe:/usr/bin/gnome-shell-extension-prefs", exe),
            // An app id that happens to spell the path is not the executable.
            ("exe:/usr/bin/gnome-shell", IdentitySource::Systemd),
            ("org.gnome.Shell", IdentitySource::Flatpak),
        ] {
            assert!(
                matches!(
                    r.source_of(&subject(app, source)),
                    Err(Error::NotAReporter { .. })
                ),
                "{app} {source:?}"
            );
        }
    }

    #[test]
    fn the_name_owner_is_what_the_bus_said_last() {
        let (r, mut feed) = Reporters::new(&[]);
        assert!(!r.owns(GNOME_SHELL, ":1.5"), "nobody, until the bus says");
        r.set_owner(GNOME_SHELL, Some(":1.5"));
        assert!(r.owns(GNOME_SHELL, ":1.5") && feed.owns(GNOME_SHELL, ":1.5"));
        assert!(feed.owners.has_changed().unwrap_or(false));
        feed.owners.borrow_and_update();
        assert!(!r.owns(GNOME_SHELL, ":1.6"), "another connection");
        assert!(!r.owns(KWIN, ":1.5"), "the other shell's name");
        r.set_owner(GNOME_SHELL, Some(":1.5"));
        assert!(
            !feed.owners.has_changed().unwrap_or(true),
            "the same owner again tells the source nothing"
        );
        r.set_owner(GNOME_SHELL, None);
        assert!(!r.owns(GNOME_SHELL, ":1.5"));
        assert_eq!(feed.owner(GNOME_SHELL), None);
    }
}
