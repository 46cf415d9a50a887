//! The user's never-share rules as plain data: what `config.toml`'s and
//! `privacy.toml`'s `[privacy]` say, and the password managers that are
//! never shared whatever they say. Here rather than in `core::privacy`
//! (which applies them) because `contextctl privacy` edits and lists them
//! without a daemon, and a client names no module of the core.

use serde::{Deserialize, Serialize};

/// `[privacy]`: the user's own never-share rules, in `config.toml` and in
/// `privacy.toml` beside it (which `contextctl privacy` edits). Both
/// match case-insensitively, a pattern matching where the text contains
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrivacySettings {
    /// Apps never shared: their window titles, their notifications'
    /// content and what they publish. Matched against app ids
    /// (`org.example.Vault`, `exe:/usr/bin/vault`) and the names
    /// notifications claim.
    pub apps: Vec<String>,
    /// Window titles never shared (and document names never recorded).
    pub titles: Vec<String>,
}

impl PrivacySettings {
    /// Both rule sets together (duplicates once), `self` first.
    pub fn merged(&self, other: &PrivacySettings) -> PrivacySettings {
        let join = |a: &[String], b: &[String]| {
            let mut out: Vec<String> = Vec::new();
            for p in a.iter().chain(b) {
                let p = p.trim();
                if !p.is_empty() && !out.iter().any(|o| o.eq_ignore_ascii_case(p)) {
                    out.push(p.to_owned());
                }
            }
            out
        };
        PrivacySettings {
            apps: join(&self.apps, &other.apps),
            titles: join(&self.titles, &other.titles),
        }
    }
}

/// Password managers, keyrings and authenticators: contained in their
/// app ids (Wayland, Flatpak, executables) or the names their
/// notifications claim, lowercased.
pub const SENSITIVE_APPS: &[&str] = &[
    "keepassxc",
    "keepass",
    "bitwarden",
    "1password",
    "protonpass",
    "proton pass",
    "proton-pass",
    "me.proton.pass",
    "org.gnome.seahorse",
    "seahorse",
    "passwords and keys",
    "org.gnome.world.secrets",
    "kwalletmanager",
    "org.kde.kwallet",
    "enpass",
    "nordpass",
    "dashlane",
    "lastpass",
    "com.belmoussaoui.authenticator",
    "gnome-authenticator",
];
