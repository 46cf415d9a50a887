//! Configuration: where things live (XDG base directories) and the user's
//! `config.toml`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub(crate) mod follow;

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

/// The user's runtime directory: `$XDG_RUNTIME_DIR`, else the one
/// systemd-logind makes for every logged-in user (`/run/user/UID`), when it
/// exists, is ours and only we may enter it (0700), as sd-bus and D-Bus
/// find it. MCP hosts start stdio servers with only `HOME LOGNAME PATH
/// SHELL TERM USER`, so `contextctl mcp` must find the session without it.
pub fn user_runtime_dir() -> Option<PathBuf> {
    // SAFETY: getuid(2) has no failure mode and touches no memory.
    let uid = unsafe { libc::getuid() };
    runtime_dir_from(
        std::env::var_os("XDG_RUNTIME_DIR"),
        uid,
        Path::new("/run/user"),
    )
}

fn runtime_dir_from(var: Option<std::ffi::OsString>, uid: u32, base: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // The spec says a relative value is invalid and must be ignored.
    if let Some(v) = var.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(v);
    }
    let dir = base.join(uid.to_string());
    let meta = std::fs::metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o777 == 0o700).then_some(dir)
}

/// The session bus: `$DBUS_SESSION_BUS_ADDRESS`, else its default place in
/// the runtime directory (`unix:path=RUNTIME/bus`, where systemd's user
/// instance and dbus-broker listen) when something is there.
pub fn session_bus_address() -> Option<String> {
    if let Some(a) = std::env::var("DBUS_SESSION_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
    {
        return Some(a);
    }
    let bus = user_runtime_dir()?.join("bus");
    bus.exists().then(|| format!("unix:path={}", bus.display()))
}

impl Paths {
    pub fn from_env() -> Result<Paths, ConfigError> {
        Ok(Paths {
            config_dir: xdg("XDG_CONFIG_HOME", ".config", "the configuration")?,
            data_dir: xdg("XDG_DATA_HOME", ".local/share", "the database")?,
            state_dir: xdg("XDG_STATE_HOME", ".local/state", "the key file")?,
            runtime_dir: user_runtime_dir().map(|d| d.join("contextd")),
        })
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }

    pub fn policy_file(&self) -> PathBuf {
        self.config_dir.join("policy.toml")
    }

    /// The never-share rules `contextctl privacy` edits.
    pub fn privacy_file(&self) -> PathBuf {
        self.config_dir.join("privacy.toml")
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
    #[serde(default)]
    pub mcp: McpConfig,
    /// `[dashboard]`: the local privacy dashboard.
    #[serde(default)]
    pub dashboard: DashboardConfig,
    /// `[recent_documents]`: paths never shown, how many files.
    #[serde(default)]
    pub recent_documents: RecentDocumentsConfig,
    /// `[location]`: how precisely the broker asks GeoClue.
    #[serde(default)]
    pub location: LocationConfig,
    /// `[identity]`: how processes that share an executable are told apart.
    #[serde(default)]
    pub identity: IdentityConfig,
    /// `[ui]`: what the broker shows on the desktop itself.
    #[serde(default)]
    pub ui: UiConfig,
    /// `[limits]`: how far a reader may fall behind.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// `[privacy]`: what is never shared (besides the built-in lists);
    /// `privacy.toml` beside this file adds to it (`contextctl privacy`).
    #[serde(default)]
    pub privacy: crate::model::privacy::PrivacySettings,
}

/// `privacy.toml`: the never-share rules `contextctl privacy` edits, a
/// `[privacy]` table as in `config.toml`. Its own file, so that a
/// program never rewrites the user's hand-written `config.toml` (and its
/// comments).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivacyFile {
    #[serde(default)]
    pub privacy: crate::model::privacy::PrivacySettings,
}

impl PrivacyFile {
    /// Read `privacy.toml`; a missing file is no rules.
    pub fn load(path: &Path) -> Result<PrivacyFile, ConfigError> {
        let shown = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PrivacyFile::default()),
            Err(error) => return Err(ConfigError::Io { path: shown, error }),
        };
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::NotUtf8 {
            path: shown.clone(),
            offset: e.utf8_error().valid_up_to(),
        })?;
        toml::from_str(&text).map_err(|e| syntax(&text, shown, &e))
    }

    /// Write `privacy.toml` whole (a new file renamed over the old, so
    /// that the daemon, which watches it, never reads half of it).
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let shown = path.display().to_string();
        let io = |error| ConfigError::Io {
            path: shown.clone(),
            error,
        };
        let text = toml::to_string(self).map_err(|e| io(std::io::Error::other(e)))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("toml.new");
        std::fs::write(
            &tmp,
            format!("# Never shared: edited by `contextctl privacy`.\n{text}"),
        )
        .map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// A TOML error as a [`ConfigError::Syntax`] with its line and column.
fn syntax(text: &str, shown: String, e: &toml::de::Error) -> ConfigError {
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
}

/// `[ui]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// Show the privacy indicator while an app or AI host reads: the
    /// broker's own StatusNotifierItem (KDE Plasma, waybar, GNOME with
    /// AppIndicator) unless the GNOME Shell extension shows its own.
    pub indicator: bool,
    /// Seconds an app that read still counts as reading (besides apps
    /// with a live subscription or session).
    pub recent_read_s: u64,
}

impl Default for UiConfig {
    fn default() -> Self {
        UiConfig {
            indicator: true,
            recent_read_s: 10,
        }
    }
}

/// `[limits]`: back-pressure. A reader (a D-Bus subscription, an MCP
/// session, the dashboard) that falls more than `change_feed` changes
/// behind is told once that it missed changes (D-Bus `Lagged`, an MCP log
/// message) and goes on from the current state; an MCP reader whose queue
/// stays full for `reader_stall_s` seconds is disconnected.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Changes a reader may be behind before it is told it lagged.
    pub change_feed: usize,
    /// Seconds an MCP reader's full queue is waited for.
    pub reader_stall_s: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            change_feed: crate::core::state::CHANGE_CAPACITY,
            reader_stall_s: 30,
        }
    }
}

/// `[identity]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityConfig {
    /// Interpreters whose processes are named by what they run (the script,
    /// its `node_modules` package, or `python3 -m`'s module: a claim of the
    /// command line, shown as such) instead of by the interpreter's path,
    /// which every script run by it shares. A name (`node`; `python3*`
    /// when a version may follow) counts only for a system program (in
    /// `/usr/bin` and the like, owned by root); an absolute path
    /// (`/home/me/.nvm/versions/node/v22.1.0/bin/node`) counts wherever it
    /// is. Default: node, nodejs, python3*, python, gjs, gjs-console, perl,
    /// perl5*, ruby*, bun, deno. `[]` names every process by its executable.
    #[serde(default, deserialize_with = "interpreters")]
    pub interpreters: crate::identity::Interpreters,
}

fn interpreters<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<crate::identity::Interpreters, D::Error> {
    let list = Vec::<String>::deserialize(d)?;
    crate::identity::Interpreters::parse(list.iter().map(String::as_str))
        .map_err(serde::de::Error::custom)
}

/// `[dashboard]`: the privacy dashboard the daemon serves on loopback
/// (`contextctl dashboard` opens it).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DashboardConfig {
    /// Serve it at all.
    pub enabled: bool,
    /// A loopback address (`127.0.0.1:PORT` or `[::1]:PORT`; port 0, the
    /// default, picks a free one). Anything else is refused: the
    /// dashboard changes who may see your context.
    pub listen: std::net::SocketAddr,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            enabled: true,
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        }
    }
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
    /// Seconds an unanswered or dismissed prompt keeps denying before
    /// asking again (a dismissal: for the whole app).
    pub cooldown_s: u64,
    /// Days the audit log is kept.
    pub audit_days: u32,
    /// Programs (absolute paths of executables) to trust as consent agents
    /// (`org.contextd.Consent1.RegisterAgent`), besides GNOME Shell
    /// itself: a UI of the user's choice on another desktop. Any other
    /// program that registers is refused, so that nothing can answer
    /// prompts in the user's place by registering first.
    #[serde(deserialize_with = "absolute_paths")]
    pub agents: Vec<PathBuf>,
}

impl Default for ConsentConfig {
    fn default() -> Self {
        ConsentConfig {
            undecided: UndecidedMode::Ask,
            prompt_timeout_s: 60,
            cooldown_s: 60,
            audit_days: 30,
            agents: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UndecidedMode {
    Ask,
    Deny,
}

/// `[mcp]`: the MCP publisher. The stdio socket needs no configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.http]`: Streamable HTTP and legacy SSE. Off when absent.
    #[serde(default)]
    pub http: Option<McpHttpConfig>,
    /// Another `contextctl` to trust as the stdio bridge (its parent is the
    /// MCP host), besides the one installed beside `contextd`. Any other
    /// program that connects to the socket, whatever its name, is the host
    /// itself.
    #[serde(default)]
    pub bridge: Option<PathBuf>,
}

/// `[mcp.http]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpHttpConfig {
    /// `"127.0.0.1:PORT"` or `"[::1]:PORT"`; port 0 picks a free one (the
    /// URL is written to `$XDG_RUNTIME_DIR/contextd/mcp-http.url`).
    pub listen: std::net::SocketAddr,
    /// Listen on a non-loopback address. Only with TLS terminated in front
    /// of contextd (a reverse proxy): contextd itself speaks plain HTTP.
    #[serde(default)]
    pub allow_remote: bool,
    /// Extra `Host` values to accept (the proxy's name) besides the
    /// loopback names of `listen`.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (`https://app.example:443`);
    /// requests without `Origin` (every non-browser client) are not affected.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// How the answer to a 2026-07-28 request (stateless, no session) is
    /// sent: `json` (the default) as one `application/json` body when it is
    /// a single message, an event stream only when the call reports progress
    /// or logs first; `sse` always as an event stream. Both are what the
    /// spec allows a host to get; JSON is the faster (see `make bench`).
    /// Hosts on 2025 sessions always get event streams, as rmcp serves them.
    #[serde(default)]
    pub responses: Responses,
}

/// `[mcp.http] responses`: see [`McpHttpConfig::responses`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Responses {
    #[default]
    Json,
    Sse,
}

impl McpHttpConfig {
    /// `[mcp.http]` for `contextd --http ADDR`.
    pub fn listen_on(listen: std::net::SocketAddr) -> Self {
        McpHttpConfig {
            listen,
            allow_remote: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            responses: Responses::default(),
        }
    }
}

/// `[recent_documents]` in config.toml (`sources::recent` reads it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecentDocumentsConfig {
    /// Paths (or patterns) whose files are never shown nor recorded.
    pub exclude: Vec<String>,
    /// At most this many files, newest first (at most 1000).
    pub limit: usize,
}

impl Default for RecentDocumentsConfig {
    fn default() -> Self {
        RecentDocumentsConfig {
            exclude: vec![
                "~/.ssh".into(),
                "~/.gnupg".into(),
                "~/.password-store".into(),
                "~/.local/share/keyrings".into(),
            ],
            limit: 50,
        }
    }
}

/// `[location]` in config.toml (`sources::geoclue` reads it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocationConfig {
    pub accuracy: Accuracy,
}

/// `[location] accuracy`: how precisely the broker asks GeoClue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accuracy {
    Country,
    #[default]
    City,
    Street,
    Exact,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesConfig {
    /// Sources not to start, by name (`wayland`, `pipewire`, ...).
    #[serde(default)]
    pub disabled: Vec<String>,
    /// `[sources.shells]`: the shells that report windows.
    #[serde(default)]
    pub shells: ShellsConfig,
    /// `[sources.v4l2]`: the camera source that needs no PipeWire.
    #[serde(default)]
    pub v4l2: V4l2Config,
}

/// `[sources.shells]`: one more executable to trust as each window-reporting
/// shell, besides `/usr/bin/gnome-shell` and `/usr/bin/kwin_wayland` (a
/// shell installed elsewhere).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellsConfig {
    #[serde(default)]
    pub gnome_shell: Option<PathBuf>,
    #[serde(default)]
    pub kwin: Option<PathBuf>,
}

/// `[sources.v4l2]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct V4l2Config {
    /// The directory of the V4L2 device nodes (`video0`, `video1`, ...);
    /// an absolute path, `/dev` unless set.
    #[serde(
        default = "V4l2Config::default_dir",
        deserialize_with = "absolute_path"
    )]
    pub dir: PathBuf,
}

impl V4l2Config {
    fn default_dir() -> PathBuf {
        PathBuf::from("/dev")
    }
}

impl Default for V4l2Config {
    fn default() -> Self {
        V4l2Config {
            dir: V4l2Config::default_dir(),
        }
    }
}

/// Paths that must each be absolute ([`absolute_path`]).
fn absolute_paths<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
    let v = Vec::<PathBuf>::deserialize(d)?;
    if let Some(p) = v.iter().find(|p| !p.is_absolute()) {
        return Err(serde::de::Error::custom(format!(
            "{} is not an absolute path",
            p.display()
        )));
    }
    Ok(v)
}

/// A path that must be absolute (a relative one would depend on where the
/// daemon happens to be started).
fn absolute_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    let p = PathBuf::deserialize(d)?;
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(serde::de::Error::custom(format!(
            "{} is not an absolute path",
            p.display()
        )))
    }
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
        ConfigFile::parse(&text, shown)
    }

    /// Parse `config.toml`'s text; `shown` only labels errors.
    pub fn parse(text: &str, shown: String) -> Result<ConfigFile, ConfigError> {
        toml::from_str(text).map_err(|e| syntax(text, shown, &e))
    }

    /// The never-share rules of this file: `[privacy]`, with the
    /// deprecated `[history] exclude_apps` / `exclude_titles` merged in
    /// (and the keys that were used, to tell the user where they go now).
    pub fn privacy_rules(&self) -> (crate::model::privacy::PrivacySettings, Vec<&'static str>) {
        let mut old = Vec::new();
        if !self.history.exclude_apps.is_empty() {
            old.push("[history] exclude_apps");
        }
        if !self.history.exclude_titles.is_empty() {
            old.push("[history] exclude_titles");
        }
        (self.privacy.merged(&self.history.as_privacy()), old)
    }
}

/// Everything `daemon::run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub paths: Paths,
    pub file: ConfigFile,
    /// Take the bus name over from a running instance.
    pub replace: bool,
    /// Tests and benchmarks only: feed events from a JSON-lines file (or
    /// FIFO) instead of the real sources, and optionally start the
    /// broker's clock at a time the script moves (`{"type": "clock", ...}`).
    #[cfg(feature = "replay")]
    pub replay: crate::cli::ReplayArgs,
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

    /// `[privacy]` is typed (a typo is an error, not a rule silently
    /// ignored), the deprecated `[history]` exclude lists join it, and
    /// `privacy.toml` round-trips as `contextctl privacy` writes it.
    #[test]
    fn privacy_rules_parse_merge_and_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("config.toml");
        std::fs::write(&f, "[privacy]\napp = [\"x\"]\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("unknown key");
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
        std::fs::write(
            &f,
            "[privacy]\napps = [\"org.example.Diary\"]\ntitles = [\"salary\"]\n[history]\nexclude_apps = [\"legacy\", \"ORG.EXAMPLE.DIARY\"]\n",
        )
        .expect("write");
        let (rules, old) = ConfigFile::load(&f).expect("ok").privacy_rules();
        assert_eq!(rules.apps, vec!["org.example.Diary", "legacy"]);
        assert_eq!(rules.titles, vec!["salary"]);
        assert_eq!(old, vec!["[history] exclude_apps"]);
        let p = dir.path().join("privacy.toml");
        assert_eq!(
            PrivacyFile::load(&p).expect("missing is empty"),
            PrivacyFile::default()
        );
        let mut file = PrivacyFile::default();
        file.privacy.titles.push("medical \"notes\"".into());
        file.save(&p).expect("save");
        assert_eq!(PrivacyFile::load(&p).expect("load"), file);
        std::fs::write(&p, "[privacy]\ntitles = 3\n").expect("write");
        assert!(matches!(
            PrivacyFile::load(&p),
            Err(ConfigError::Syntax { line: 2, .. })
        ));
    }

    #[test]
    fn consent_agents_are_absolute_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("config.toml");
        std::fs::write(&f, "[consent]\nagents = [\"/usr/libexec/my-agent\"]\n").expect("write");
        assert_eq!(
            ConfigFile::load(&f).expect("ok").consent.agents,
            vec![PathBuf::from("/usr/libexec/my-agent")]
        );
        std::fs::write(&f, "[consent]\nagents = [\"my-agent\"]\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("relative");
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
        assert!(e.to_string().contains("not an absolute path"), "{e}");
        std::fs::write(&f, "[consent]\nagents = \"/usr/bin/x\"\n").expect("write");
        assert!(matches!(
            ConfigFile::load(&f).expect_err("not a list"),
            ConfigError::Syntax { .. }
        ));
    }

    #[test]
    fn the_runtime_directory_without_xdg_runtime_dir() {
        let base = tempfile::tempdir().expect("tempdir");
        // SAFETY: getuid(2) has no failure mode.
        let uid = unsafe { libc::getuid() };
        let dir = base.path().join(uid.to_string());
        let set = Some(std::ffi::OsString::from("/run/elsewhere"));
        assert_eq!(
            runtime_dir_from(set, uid, base.path()),
            Some(PathBuf::from("/run/elsewhere"))
        );
        assert_eq!(runtime_dir_from(None, uid, base.path()), None, "missing");
        std::fs::create_dir(&dir).expect("mkdir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(runtime_dir_from(None, uid, base.path()), None, "not 0700");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(runtime_dir_from(None, uid, base.path()), Some(dir.clone()));
        let relative = Some(std::ffi::OsString::from("run/x"));
        assert_eq!(runtime_dir_from(relative, uid, base.path()), Some(dir));
        assert_eq!(
            runtime_dir_from(None, uid + 1, base.path()),
            None,
            "another user's"
        );
    }

    #[test]
    fn v4l2_dir_defaults_to_dev_and_must_be_absolute() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("config.toml");
        std::fs::write(&f, "").expect("write");
        let c = ConfigFile::load(&f).expect("ok");
        assert_eq!(c.sources.v4l2.dir, Path::new("/dev"));
        std::fs::write(&f, "[sources.v4l2]\ndir = \"/tmp/cams\"\n").expect("write");
        let c = ConfigFile::load(&f).expect("ok");
        assert_eq!(c.sources.v4l2.dir, Path::new("/tmp/cams"));
        std::fs::write(&f, "[sources.v4l2]\ndir = \"cams\"\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("relative");
        assert!(
            matches!(&e, ConfigError::Syntax { line: 2, message, .. } if message.contains("absolute")),
            "{e}"
        );
        std::fs::write(&f, "[sources.v4l2]\ndirectory = \"/dev\"\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("unknown key");
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
    }

    #[test]
    fn identity_section() {
        use crate::identity::Interpreters;
        let c = ConfigFile::parse("", "t".into()).expect("ok");
        assert_eq!(c.identity.interpreters, Interpreters::default());
        let c = ConfigFile::parse("[identity]\ninterpreters = []\n", "t".into()).expect("ok");
        assert_eq!(c.identity.interpreters, Interpreters::none());
        let c = ConfigFile::parse(
            "[identity]\ninterpreters = [\"python3*\", \"/opt/node/bin/node\"]\n",
            "t".into(),
        )
        .expect("ok");
        assert_ne!(c.identity.interpreters, Interpreters::default());
        let e = ConfigFile::parse("[identity]\ninterpreters = [\"bash\"]\n", "t".into())
            .expect_err("not an interpreter we read");
        assert!(
            matches!(&e, ConfigError::Syntax { line: 2, message, .. } if message.contains("bash")),
            "{e}"
        );
    }

    #[test]
    fn mcp_http_section() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("config.toml");
        std::fs::write(&f, "[mcp.http]\nlisten = \"127.0.0.1:8765\"\n").expect("write");
        let c = ConfigFile::load(&f).expect("ok");
        let h = c.mcp.http.expect("http");
        assert_eq!(h.listen.port(), 8765);
        assert!(!h.allow_remote);
        std::fs::write(&f, "[mcp.http]\nlisten = \"localhost\"\n").expect("write");
        let e = ConfigFile::load(&f).expect_err("not an address");
        assert!(matches!(e, ConfigError::Syntax { line: 2, .. }), "{e}");
    }
}
