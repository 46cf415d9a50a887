//! Windows the desktop shell reports (org.contextd.WindowReports1): GNOME
//! Shell and KWin give ordinary clients no window list, so the shell itself
//! (the contextd GNOME Shell extension, the KWin script) reports its
//! windows and focus to the broker.
//!
//! The core decides who may report: only the shell's own process, known
//! by its executable ([`Reporters`]; the identity comes from the caller's
//! credentials like every caller's, never from what it sends). An allowed
//! report is handed, in order, to the `shells` source
//! (`sources::shells`), which keeps each shell's windows and turns them
//! into `SourceEvent`s like any source: so consent, detail levels,
//! subscriptions and the timeline are the Wayland source's.

use std::path::Path;

use tokio::sync::mpsc;

use super::Core;
use super::error::{Error, Result};
use super::read::Subject;
use crate::model::{AppId, IdentitySource, WindowStates};

/// The source that GNOME Shell's reports are.
pub const GNOME_SHELL: &str = "gnome-shell";
/// The source that KWin's reports are.
pub const KWIN: &str = "kwin";

/// The executable of each reporting source, where Debian (and every
/// distribution we know) installs it.
pub const DEFAULT_EXECUTABLES: [(&str, &str); 2] = [
    (GNOME_SHELL, "/usr/bin/gnome-shell"),
    (KWIN, "/usr/bin/kwin_wayland"),
];

/// At most this many windows per reporter (a full list longer than that
/// is refused).
pub const MAX_WINDOWS: usize = 4096;

/// How many reports may wait for the source before a reporter's call
/// waits too.
const QUEUE: usize = 256;

/// A window as a shell reports it; ids are the shell's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportedWindow {
    pub app_id: String,
    pub title: String,
    /// `activated` is never set here: focus is reported on its own.
    pub states: WindowStates,
    pub outputs: Vec<String>,
    pub parent: Option<String>,
}

/// One report of a shell.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
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
pub struct Reported {
    /// [`GNOME_SHELL`] or [`KWIN`].
    pub source: &'static str,
    /// The reporter's connection (a D-Bus unique name): what it reported
    /// lives as long as that.
    pub owner: String,
    pub report: Report,
}

/// Who may report, and where the reports go.
#[derive(Debug, Clone)]
pub struct Reporters {
    allowed: Vec<(&'static str, AppId)>,
    tx: mpsc::Sender<Reported>,
}

impl Reporters {
    /// The default executables plus `extra` ones (`[sources.shells]`);
    /// the receiver is the `shells` source's.
    pub fn new(extra: &[(&'static str, &Path)]) -> (Reporters, mpsc::Receiver<Reported>) {
        let (tx, rx) = mpsc::channel(QUEUE);
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
        (Reporters { allowed, tx }, rx)
    }

    /// The source `who` reports as, if it is a shell: its identity must be
    /// its executable (not a Flatpak, Snap or systemd app id, which a shell
    /// never has) and one of the allowed ones.
    pub fn source_of(&self, who: &Subject) -> Result<&'static str> {
        if who.source == IdentitySource::Executable
            && let Some((source, _)) = self.allowed.iter().find(|(_, id)| *id == who.app_id)
        {
            return Ok(source);
        }
        Err(Error::NotAReporter {
            app: who.app_id.clone(),
        })
    }
}

impl Core {
    /// Turn window reports on, with who may send them.
    pub fn set_window_reports(&self, reporters: Reporters) {
        let _ = self.reporters.set(reporters);
    }

    fn reporters(&self) -> Result<&Reporters> {
        self.reporters
            .get()
            .ok_or_else(|| Error::Unavailable("window reports are not taken here".into()))
    }

    /// The source `who` reports as, or `NotAReporter`.
    pub fn window_reporter(&self, who: &Subject) -> Result<&'static str> {
        self.reporters()?.source_of(who)
    }

    /// A shell's report, from the connection `owner`: refused unless `who`
    /// is a shell, then handed to the source in order.
    pub fn window_report(&self, who: &Subject, owner: &str, report: Report) -> Result<()> {
        let reporters = self.reporters()?;
        let source = reporters.source_of(who)?;
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
}
