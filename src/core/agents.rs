//! Who may answer prompts in the user's place: the consent agents
//! (`org.contextd.ConsentAgent1`, registered with
//! `org.contextd.Consent1.RegisterAgent`).
//!
//! An agent sees every question and its answer becomes the user's
//! decision, so registering one is trusted from two kinds of caller only,
//! neither of them told by what the caller sends:
//! - **the desktop shell**: its executable is GNOME Shell's (the identity
//!   comes from the caller's credentials, through the pinned
//!   `/proc/PID`, like every caller's) *and* its connection owns
//!   `org.gnome.Shell` as the bus says now. The executable alone proves
//!   little (any unsandboxed process can run `/usr/bin/gnome-shell`), the
//!   name alone nothing (anyone takes a free name); the two together are
//!   the shell that runs the session;
//! - **a program the user named** in `config.toml` (`[consent] agents`),
//!   by the absolute path of its executable: a copy or a link elsewhere is
//!   another path.
//!
//! Everyone else is refused with `NotAllowed`. Same-uid code that chooses
//! to attack (ptrace the shell, preload a library into it) is beyond what
//! this can stop, as DESIGN.md says of every check here.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::subject::Subject;
use crate::model::IdentitySource;

/// The shell's well-known name: an agent trusted as the shell must own it.
pub(crate) const SHELL_NAME: &str = "org.gnome.Shell";

/// Where Debian (and every distribution we know) installs GNOME Shell.
pub(crate) const GNOME_SHELL_EXECUTABLE: &str = "/usr/bin/gnome-shell";

/// Who may register as agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentTrust {
    /// GNOME Shell's executables: the default one and `[sources.shells]
    /// gnome_shell` (a shell installed elsewhere).
    shell: Vec<PathBuf>,
    /// `[consent] agents`.
    named: Vec<PathBuf>,
}

impl Default for AgentTrust {
    fn default() -> Self {
        AgentTrust::new(None, &[])
    }
}

/// Why an agent was trusted: what `contextctl sources` says is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrustedAgent {
    /// GNOME Shell, owning `org.gnome.Shell`.
    Shell,
    /// A program named in `config.toml`, by its path.
    Named(PathBuf),
}

impl TrustedAgent {
    /// In words, for `contextctl sources`.
    pub(crate) fn describe(&self) -> String {
        match self {
            TrustedAgent::Shell => "GNOME Shell (owns org.gnome.Shell)".to_owned(),
            TrustedAgent::Named(p) => format!("{} (named in config.toml)", p.display()),
        }
    }
}

impl AgentTrust {
    pub(crate) fn new(extra_shell: Option<&Path>, named: &[PathBuf]) -> Self {
        let mut shell = vec![PathBuf::from(GNOME_SHELL_EXECUTABLE)];
        shell.extend(extra_shell.map(Path::to_path_buf));
        AgentTrust {
            shell,
            named: named.to_vec(),
        }
    }

    /// Whether `who`, whose executable (read through its pinned `/proc`
    /// directory when its identity was resolved) is `executable`, may
    /// register as agent; `owns_shell_name`: its connection owns
    /// `org.gnome.Shell`, as the bus said just now.
    pub(crate) fn decide(
        &self,
        who: &Subject,
        executable: Option<&Path>,
        owns_shell_name: bool,
    ) -> Result<TrustedAgent> {
        // Sandboxed apps have no executable path here, and cannot be
        // named: a Flatpak or Snap is never an agent.
        let unsandboxed = matches!(
            who.source,
            IdentitySource::Executable | IdentitySource::Systemd | IdentitySource::Interpreter
        );
        if let (true, Some(exe)) = (unsandboxed, executable) {
            if owns_shell_name && self.shell.iter().any(|s| s == exe) {
                return Ok(TrustedAgent::Shell);
            }
            if let Some(p) = self.named.iter().find(|p| *p == exe) {
                return Ok(TrustedAgent::Named(p.clone()));
            }
        }
        let why = if executable.is_some_and(|e| self.shell.iter().any(|s| s == e)) {
            "it runs GNOME Shell's executable but does not own org.gnome.Shell".to_owned()
        } else {
            "only GNOME Shell (owning org.gnome.Shell) and the programs named in \
             config.toml ([consent] agents) may answer prompts"
                .to_owned()
        };
        Err(Error::NotAnAgent {
            app: who.app_id.clone(),
            why,
        })
    }
}

/// Whether the connection owning a desktop portal backend's name may show
/// the consent question (`dbus::portal`): an unsandboxed process whose
/// executable (read through its pinned `/proc/PID`) is `expected`, the
/// program the backend's system D-Bus service file starts, and that
/// program a system one (root's, where the package manager puts
/// programs). An app that took the name first, a copy of the backend
/// elsewhere, or a backend the user's own files name is refused: the
/// question then goes to a notification. `Err` says why, in words.
pub(crate) fn trust_backend(
    who: &Subject,
    executable: Option<&Path>,
    expected: &Path,
    expected_is_system: bool,
) -> std::result::Result<(), String> {
    let unsandboxed = matches!(
        who.source,
        IdentitySource::Executable | IdentitySource::Systemd | IdentitySource::Interpreter
    );
    if !unsandboxed {
        return Err("a sandboxed app is never the desktop's dialog".to_owned());
    }
    if !expected_is_system {
        return Err(format!(
            "{} is not a system program (root's, in the system's directories)",
            expected.display()
        ));
    }
    match executable {
        Some(exe) if exe == expected => Ok(()),
        Some(exe) => Err(format!(
            "it runs {}, not {}",
            exe.display(),
            expected.display()
        )),
        None => Err("its executable could not be read".to_owned()),
    }
}

/// How prompts are asked now, for `contextctl sources`: by a trusted
/// agent, else in the desktop portal's dialog (its description), else by
/// a notification (why not the portal's dialog).
#[derive(Debug, Clone, Copy)]
pub(crate) enum AskedBy<'a> {
    Agent(&'a TrustedAgent),
    Portal(&'a str),
    Notification(&'a str),
}

/// The entry of `ListSources` (`contextctl sources`) that says how
/// prompts are asked: available while a trusted agent is registered or
/// the desktop portal's dialog asks (its text says which); else its error
/// says that notifications ask, and why.
pub(crate) const SURFACE_SOURCE: &str = "consent-agent";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Channel;
    use crate::model::AppId;

    fn exe(path: &str) -> Subject {
        Subject {
            app_id: AppId::from_exe(path).expect("id"),
            source: IdentitySource::Executable,
            channel: Channel::DBus,
        }
    }

    #[test]
    fn a_portal_backend_is_its_installed_program_unsandboxed() {
        let gtk = Path::new("/usr/libexec/xdg-desktop-portal-gtk");
        let who = exe("/usr/libexec/xdg-desktop-portal-gtk");
        assert_eq!(trust_backend(&who, Some(gtk), gtk, true), Ok(()));
        // The name taken by another program, a copy, or an unreadable one.
        let other = exe("/home/u/.local/bin/impostor");
        let e = trust_backend(
            &other,
            Some(Path::new("/home/u/.local/bin/impostor")),
            gtk,
            true,
        )
        .expect_err("impostor");
        assert!(e.contains("impostor"), "{e}");
        assert!(trust_backend(&who, None, gtk, true).is_err());
        // A program the system did not install.
        assert!(trust_backend(&who, Some(gtk), gtk, false).is_err());
        // A sandboxed app, whatever its executable.
        let flatpak = Subject {
            app_id: AppId::new("org.example.App").expect("id"),
            source: IdentitySource::Flatpak,
            channel: Channel::DBus,
        };
        assert!(trust_backend(&flatpak, Some(gtk), gtk, true).is_err());
    }

    #[test]
    fn the_shell_needs_its_name_and_a_named_program_its_path() {
        let t = AgentTrust::new(None, &[PathBuf::from("/usr/libexec/my-agent")]);
        let shell = Path::new(GNOME_SHELL_EXECUTABLE);
        let who = exe(GNOME_SHELL_EXECUTABLE);
        assert_eq!(t.decide(&who, Some(shell), true), Ok(TrustedAgent::Shell));
        assert!(matches!(
            t.decide(&who, Some(shell), false),
            Err(Error::NotAnAgent { .. })
        ));
        let named = Path::new("/usr/libexec/my-agent");
        assert_eq!(
            t.decide(&exe("/usr/libexec/my-agent"), Some(named), false),
            Ok(TrustedAgent::Named(named.to_path_buf()))
        );
        // A copy elsewhere, owning the shell's name or not.
        let copy = Path::new("/tmp/x/gnome-shell");
        assert!(
            t.decide(&exe("/tmp/x/gnome-shell"), Some(copy), true)
                .is_err()
        );
        // A sandboxed app, whatever it claims.
        let flatpak = Subject {
            app_id: AppId::new("org.example.App").expect("id"),
            source: IdentitySource::Flatpak,
            channel: Channel::DBus,
        };
        assert!(t.decide(&flatpak, Some(shell), true).is_err());
        assert!(t.decide(&flatpak, None, true).is_err());
    }
}
