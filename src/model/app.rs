use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest app id we accept. Flatpak ids are at most 255 bytes; an
/// executable path can be longer, but PATH_MAX (4096) bounds it.
const MAX_LEN: usize = 4096 + 8;

/// What starts the id of an app known by its systemd unit.
pub const SYSTEMD_PREFIX: &str = "systemd:";

/// The identity of an app, as the broker derived it.
///
/// Forms, one per [`IdentitySource`], so that no two sources can ever
/// name the same subject (a `:` is in no Flatpak or Snap id):
/// - a reverse-DNS id (`org.gnome.TextEditor`) from Flatpak,
/// - `snap.NAME` from a Snap cgroup,
/// - `systemd:ID` from the `app-…` systemd unit the process runs in
///   (`app-gnome-org.gnome.TextEditor-123.scope`): a name whoever started
///   the process chose, so never the Flatpak app of the same `ID`,
/// - `KIND:WHAT` for a process run by an interpreter (`node`, `python3`,
///   `gjs`, `perl`, `ruby`, `bun`, `deno`): the package it runs
///   (`node:@anthropic-ai/claude-code`), the module (`python3:http.server`)
///   or the script's path (`python3:/home/u/bin/tool.py`), as its command
///   line says (a claim, see [`IdentitySource::Interpreter`]),
/// - `exe:/usr/bin/foo` when nothing better is known (the executable path),
/// - `token:NAME` for an HTTP client holding a named bearer token.
///
/// An `AppId` is a consent subject: grants are keyed by it, whole; a grant
/// to `exe:/usr/bin/node` is a grant to the processes known by that id
/// only, never to `node:…` ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppId(std::sync::Arc<str>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AppIdError {
    #[error("app id is empty")]
    Empty,
    #[error("app id is longer than {MAX_LEN} bytes")]
    TooLong,
    #[error("app id contains a control character")]
    Control,
}

impl AppId {
    pub fn new(s: impl Into<String>) -> Result<Self, AppIdError> {
        let s = s.into();
        if s.is_empty() {
            return Err(AppIdError::Empty);
        }
        if s.len() > MAX_LEN {
            return Err(AppIdError::TooLong);
        }
        if s.chars().any(char::is_control) {
            return Err(AppIdError::Control);
        }
        Ok(AppId(s.into()))
    }

    /// An app known only by its executable.
    pub fn from_exe(path: &str) -> Result<Self, AppIdError> {
        Self::new(format!("exe:{path}"))
    }

    /// An app known by the `app-…` systemd unit it was launched in.
    pub fn from_systemd_unit(id: &str) -> Result<Self, AppIdError> {
        Self::new(format!("{SYSTEMD_PREFIX}{id}"))
    }

    /// The consent subject of a named HTTP bearer token.
    pub fn from_token(name: &str) -> Result<Self, AppIdError> {
        Self::new(format!("token:{name}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for AppId {
    type Error = AppIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        AppId::new(s)
    }
}

impl From<AppId> for String {
    fn from(a: AppId) -> String {
        a.0.to_string()
    }
}

impl fmt::Display for AppId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an [`AppId`] came from; shown to users beside the id so that they
/// can judge how much it is worth (a Flatpak id is enforced by the sandbox,
/// an executable path is only as good as the file system).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdentitySource {
    Flatpak,
    Snap,
    Systemd,
    Executable,
    /// What an interpreter (`/usr/bin/node`, `/usr/bin/python3.11`) runs,
    /// from its command line: what the process says it is, not what the
    /// kernel enforces. It tells honest apps that share an interpreter
    /// apart; any unsandboxed program can claim any script.
    Interpreter,
    Token,
}

impl IdentitySource {
    /// Every source, strongest evidence first.
    pub const ALL: [IdentitySource; 6] = [
        IdentitySource::Flatpak,
        IdentitySource::Snap,
        IdentitySource::Systemd,
        IdentitySource::Executable,
        IdentitySource::Interpreter,
        IdentitySource::Token,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IdentitySource::Flatpak => "flatpak",
            IdentitySource::Snap => "snap",
            IdentitySource::Systemd => "systemd",
            IdentitySource::Executable => "executable",
            IdentitySource::Interpreter => "interpreter",
            IdentitySource::Token => "token",
        }
    }

    /// Whether the id comes from a sandbox (Flatpak, Snap): the app
    /// cannot choose it, and it is the boundary consent binds. Such an app
    /// never reaches the user's own controls (`core::manage`).
    pub fn is_sandboxed(self) -> bool {
        matches!(self, IdentitySource::Flatpak | IdentitySource::Snap)
    }

    /// The inverse of [`IdentitySource::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// What an id of this source proves, in words for the user (prompts,
    /// the dashboard, `contextctl`).
    pub fn meaning(self) -> &'static str {
        match self {
            IdentitySource::Flatpak => "the Flatpak sandbox it runs in",
            IdentitySource::Snap => "the Snap confinement it runs in",
            IdentitySource::Systemd => {
                "the systemd unit it was started in (a name its launcher chose, not a sandbox)"
            }
            IdentitySource::Executable => "the program file it runs",
            IdentitySource::Interpreter => {
                "the script its interpreter runs, as its command line says (a claim, not enforced)"
            }
            IdentitySource::Token => "the bearer token it holds",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_ids() {
        assert_eq!(AppId::new(""), Err(AppIdError::Empty));
        assert_eq!(AppId::new("a\nb"), Err(AppIdError::Control));
        assert_eq!(
            AppId::new("x".repeat(MAX_LEN + 1)),
            Err(AppIdError::TooLong)
        );
        assert_eq!(
            AppId::from_exe("/usr/bin/busctl").map(|a| a.to_string()),
            Ok("exe:/usr/bin/busctl".into())
        );
        assert_eq!(
            AppId::from_systemd_unit("org.mozilla.firefox").map(|a| a.to_string()),
            Ok("systemd:org.mozilla.firefox".into())
        );
    }

    #[test]
    fn sources_round_trip() {
        for s in IdentitySource::ALL {
            assert_eq!(IdentitySource::parse(s.as_str()), Some(s));
            let json = serde_json::to_value(s).map(|v| v.as_str().map(str::to_owned));
            assert_eq!(json.ok().flatten().as_deref(), Some(s.as_str()));
        }
    }
}
