//! Configuration: where things live (XDG base directories) and the user's
//! `config.toml`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: not valid UTF-8 (at byte {offset}); the file must be UTF-8 TOML")]
    NotUtf8 { path: String, offset: usize },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("neither ${var} nor $HOME is set; cannot tell where {what} lives")]
    NoHome {
        var: &'static str,
        what: &'static str,
    },
}

/// The broker's directories, each already joined with `contextd`.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `$XDG_CONFIG_HOME/contextd`: config.toml, policy.toml.
    pub config_dir: PathBuf,
    /// `$XDG_DATA_HOME/contextd`: the encrypted database.
    pub data_dir: PathBuf,
    /// `$XDG_STATE_HOME/contextd`: the fallback key file.
    pub state_dir: PathBuf,
    /// `$XDG_RUNTIME_DIR/contextd`: sockets.
    pub runtime_dir: Option<PathBuf>,
}

fn xdg(var: &'static str, home_rel: &str, what: &'static str) -> Result<PathBuf, ConfigError> {
    if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        let p = PathBuf::from(v);
        // The spec says relative values are invalid and must be ignored.
        if p.is_absolute() {
            return Ok(p.join("contextd"));
        }
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(home_rel).join("contextd")),
        None => Err(ConfigError::NoHome { var, what }),
    }
}

impl Paths {
    pub fn from_env() -> Result<Paths, ConfigError> {
        Ok(Paths {
            config_dir: xdg("XDG_CONFIG_HOME", ".config", "the configuration")?,
            data_dir: xdg("XDG_DATA_HOME", ".local/share", "the database")?,
            state_dir: xdg("XDG_STATE_HOME", ".local/state", "the key file")?,
            runtime_dir: std::env::var_os("XDG_RUNTIME_DIR")
                .filter(|v| !v.is_empty())
                .map(|v| PathBuf::from(v).join("contextd")),
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    pub fn policy_file(&self) -> PathBuf {
        self.config_dir.join("policy.toml")
    }

    pub fn database(&self) -> PathBuf {
        self.data_dir.join("contextd.db")
    }
}

/// `config.toml`. Unknown keys are an error, so that a typo is reported
/// instead of silently ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub sources: SourcesConfig,
    #[serde(default)]
    pub consent: ConsentConfig,
    /// `[history]`: what the timeline records and how long it keeps it.
    #[serde(default)]
    pub history: crate::core::history::HistorySettings,
}

/// `[consent]`: how undecided access is handled.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsentConfig {
    /// What an app gets for a category nobody decided yet: `"ask"` (a
    /// prompt; the default) or `"deny"` (only explicit grants count).
    pub undecided: UndecidedMode,
    /// Seconds the user has to answer a prompt; then it counts as a deny
    /// for that call and nothing is stored.
    pub prompt_timeout_s: u64,
    /// Seconds an unanswered prompt keeps denying before asking again.
    pub cooldown_s: u64,
    /// Days the audit log is kept.
    pub audit_days: u32,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        ConsentConfig {
            undecided: UndecidedMode::Ask,
            prompt_timeout_s: 60,
            cooldown_s: 30,
            audit_days: 30,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UndecidedMode {
    Ask,
    Deny,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    /// Sources not to start, by name (`wayland`, `pipewire`, ...).
    #[serde(default)]
    pub disabled: Vec<String>,
}

impl ConfigFile {
    /// Read `config.toml`; a missing file is the defaults.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let shown = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigFile::default()),
            Err(error) => return Err(ConfigError::Io { path: shown, error }),
        };
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::NotUtf8 {
            path: shown.clone(),
            offset: e.utf8_error().valid_up_to(),
        })?;
        toml::from_str(&text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start).min(text.len());
            let before = &text[..offset];
            let line = before.matches('\n').count() + 1;
            let column = offset - before.rfind('\n').map_or(0, |p| p + 1) + 1;
            ConfigError::Syntax {
                path: shown,
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })
    }
}

/// Everything `daemon::run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub paths: Paths,
    pub file: ConfigFile,
    /// Feed events from this JSON-lines file (or FIFO) instead of nothing:
    /// for tests and benchmarks.
    pub replay: Option<PathBuf>,
    /// Take the bus name over from a running instance.
    pub replace: bool,
    /// With `replay`: start the broker's clock at this time and let the
    /// script move it (`{"type": "clock", "at": ...}`).
    pub fake_clock: Option<chrono::DateTime<chrono::Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_are_clear() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("config.toml");
        std::fs::write(&f, b"[sources]\ndisabled = [\"\xc3\x28\"]\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("not utf-8");
        assert!(matches!(e, ConfigError::NotUtf8 { offset: 23, .. }), "{e}");
        std::fs::write(&f, "[sources]\ndisabeld = []\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("unknown key");
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
        std::fs::write(&f, "[sources]\ndisabled = [\"pipewire\"]\n").expect("write");
        assert_eq!(
            ConfigFile::load(&f).expect("ok").sources.disabled,
            vec!["pipewire"]
        );
        assert!(ConfigFile::load(&dir.path().join("none.toml")).is_ok());
    }
}
