use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest app id we accept. Flatpak ids are at most 255 bytes; an
/// executable path can be longer, but PATH_MAX (4096) bounds it.
const MAX_LEN: usize = 4096 + 8;

/// The identity of an app, as the broker derived it.
///
/// Forms:
/// - a reverse-DNS id (`org.gnome.TextEditor`) from Flatpak or a systemd scope,
/// - `snap.NAME` from a Snap cgroup,
/// - `exe:/usr/bin/foo` when nothing better is known (the executable path),
/// - `token:NAME` for an HTTP client holding a named bearer token.
///
/// An `AppId` is a consent subject: grants are keyed by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AppId(String);

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
        Ok(AppId(s))
    }

    /// An app known only by its executable.
    pub fn from_exe(path: &str) -> Result<Self, AppIdError> {
        Self::new(format!("exe:{path}"))
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
        a.0
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
    Token,
}

impl IdentitySource {
    pub fn as_str(self) -> &'static str {
        match self {
            IdentitySource::Flatpak => "flatpak",
            IdentitySource::Snap => "snap",
            IdentitySource::Systemd => "systemd",
            IdentitySource::Executable => "executable",
            IdentitySource::Token => "token",
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
    }
}
