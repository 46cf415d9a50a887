//! The user's own grant file, `$XDG_CONFIG_HOME/contextd/policy.toml`.
//!
//! ```toml
//! [[grant]]
//! app = "org.gnome.TextEditor"          # an app id as `contextctl` shows it
//! categories = ["windows", "windows.titles"]   # "*" for all, "provided.*"
//! expires = "2026-12-31T00:00:00Z"      # optional, RFC 3339
//! ```
//!
//! The file only grants: anything it does not name is not allowed. A file
//! with an error is rejected as a whole (with the line of the error) and the
//! last good policy stays in force, so a typo never widens or narrows what
//! apps see behind the user's back.

use std::collections::HashMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use toml::Spanned;

use crate::model::{AppId, Category};

/// What one grant covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CategoryPattern {
    /// `*`: every category.
    All,
    /// `provided.*`: everything apps publish.
    AllProvided,
    One(Category),
}

impl CategoryPattern {
    /// Whether this grant lets its app read `wanted`. A grant of a detail
    /// (`windows.titles`) implies its base (`windows`).
    pub(crate) fn covers(&self, wanted: &Category) -> bool {
        match self {
            CategoryPattern::All => true,
            CategoryPattern::AllProvided => matches!(wanted, Category::Provided(_)),
            CategoryPattern::One(c) => c == wanted || c.base().as_ref() == Some(wanted),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) category: CategoryPattern,
    pub(crate) expires: Option<DateTime<Utc>>,
}

/// A parsed policy file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Policy {
    grants: HashMap<AppId, Vec<Grant>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PolicyError {
    #[error("{path}: cannot read: {error}")]
    Io { path: String, error: String },
    #[error("{path}: not valid UTF-8 (at byte {offset})")]
    NotUtf8 { path: String, offset: usize },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    grant: Vec<RawGrant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrant {
    app: Spanned<String>,
    categories: Vec<Spanned<String>>,
    #[serde(default)]
    expires: Option<Spanned<toml::Value>>,
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = offset
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, col)
}

impl Policy {
    pub(crate) fn grants_for(&self, app: &AppId) -> &[Grant] {
        self.grants.get(app).map(Vec::as_slice).unwrap_or(&[])
    }

    pub(crate) fn apps(&self) -> impl Iterator<Item = (&AppId, &[Grant])> {
        self.grants.iter().map(|(a, g)| (a, g.as_slice()))
    }

    /// Read and parse a policy file. A missing file is an empty policy.
    pub(crate) fn load(path: &Path) -> Result<Policy, PolicyError> {
        let shown = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Policy::default()),
            Err(e) => {
                return Err(PolicyError::Io {
                    path: shown,
                    error: e.to_string(),
                });
            }
        };
        let text = String::from_utf8(bytes).map_err(|e| PolicyError::NotUtf8 {
            path: shown.clone(),
            offset: e.utf8_error().valid_up_to(),
        })?;
        Policy::parse(&text, &shown)
    }

    /// Parse policy text; `path` only labels errors.
    pub(crate) fn parse(text: &str, path: &str) -> Result<Policy, PolicyError> {
        let syntax = |offset: usize, message: String| {
            let (line, column) = line_col(text, offset);
            PolicyError::Syntax {
                path: path.to_owned(),
                line,
                column,
                message,
            }
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            syntax(offset, e.message().trim().to_owned())
        })?;
        let mut grants: HashMap<AppId, Vec<Grant>> = HashMap::new();
        for g in raw.grant {
            let app = AppId::new(g.app.get_ref().clone())
                .map_err(|e| syntax(g.app.span().start, format!("invalid app: {e}")))?;
            let expires = match &g.expires {
                None => None,
                Some(v) => {
                    let s = match v.get_ref() {
                        toml::Value::String(s) => s.clone(),
                        toml::Value::Datetime(d) => d.to_string(),
                        _ => {
                            return Err(syntax(
                                v.span().start,
                                "expires must be an RFC 3339 date-time, e.g. 2026-12-31T00:00:00Z"
                                    .into(),
                            ));
                        }
                    };
                    let t = DateTime::parse_from_rfc3339(&s).map_err(|e| {
                        syntax(
                            v.span().start,
                            format!(
                                "expires: '{s}' is not an RFC 3339 date-time with a time zone: {e}"
                            ),
                        )
                    })?;
                    Some(t.with_timezone(&Utc))
                }
            };
            if g.categories.is_empty() {
                return Err(syntax(
                    g.app.span().start,
                    "a grant needs at least one category".into(),
                ));
            }
            let list = grants.entry(app).or_default();
            for c in &g.categories {
                let pattern = match c.get_ref().as_str() {
                    "*" => CategoryPattern::All,
                    "provided.*" => CategoryPattern::AllProvided,
                    other => CategoryPattern::One(
                        other
                            .parse()
                            .map_err(|e| syntax(c.span().start, format!("{e}")))?,
                    ),
                };
                list.push(Grant {
                    category: pattern,
                    expires,
                });
            }
        }
        Ok(Policy { grants })
    }

    /// Whether `app` may read `wanted` at `now`.
    pub(crate) fn allows(&self, app: &AppId, wanted: &Category, now: DateTime<Utc>) -> bool {
        self.grants_for(app)
            .iter()
            .any(|g| g.category.covers(wanted) && g.expires.is_none_or(|e| e > now))
    }

    /// The soonest expiry after `now`, so that the daemon can wake up and cut
    /// subscriptions exactly when a grant runs out.
    pub(crate) fn next_expiry(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.grants
            .values()
            .flatten()
            .filter_map(|g| g.expires)
            .filter(|e| *e > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(s: &str) -> AppId {
        AppId::new(s).expect("valid")
    }

    #[test]
    fn grants_and_details() {
        let p = Policy::parse(
            r#"
[[grant]]
app = "org.example.A"
categories = ["windows.titles", "provided.*"]

[[grant]]
app = "exe:/usr/bin/busctl"
categories = ["*"]
expires = "2030-01-01T00:00:00Z"
"#,
            "policy.toml",
        )
        .expect("parses");
        let now = Utc::now();
        let a = app("org.example.A");
        assert!(p.allows(&a, &Category::Windows, now));
        assert!(p.allows(&a, &Category::WindowsTitles, now));
        assert!(p.allows(&a, &Category::Provided("document".into()), now));
        assert!(!p.allows(&a, &Category::Power, now));
        assert!(!p.allows(&app("org.example.B"), &Category::Windows, now));
        let b = app("exe:/usr/bin/busctl");
        assert!(p.allows(&b, &Category::History, now));
        let later = "2031-01-01T00:00:00Z"
            .parse::<DateTime<Utc>>()
            .expect("date");
        assert!(!p.allows(&b, &Category::History, later));
        assert_eq!(
            p.next_expiry(now).map(|d| d.to_rfc3339()),
            Some("2030-01-01T00:00:00+00:00".into())
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = Policy::parse(
            "[[grant]]\napp = \"a.b\"\ncategories = [\"windows\", \"nope\"]\n",
            "p.toml",
        )
        .expect_err("unknown category");
        assert!(matches!(e, PolicyError::Syntax { line: 3, .. }), "{e}");
        assert!(e.to_string().contains("unknown category 'nope'"), "{e}");

        let e = Policy::parse(
            "[[grant]]\napp = \"a.b\"\ncategories = [\"windows\"\n",
            "p.toml",
        )
        .expect_err("syntax");
        assert!(matches!(e, PolicyError::Syntax { .. }), "{e}");
        assert!(e.to_string().starts_with("p.toml:"), "{e}");

        let e = Policy::parse(
            "[[grant]]\napp = \"a.b\"\ncategories = [\"windows\"]\nexpires = \"tomorrow\"\n",
            "p.toml",
        )
        .expect_err("bad date");
        assert!(matches!(e, PolicyError::Syntax { line: 4, .. }), "{e}");

        let e = Policy::parse(
            "[[grant]]\napp = \"a.b\"\ncategorie = [\"windows\"]\n",
            "p.toml",
        )
        .expect_err("typo");
        assert!(e.to_string().contains("categorie"), "{e}");
    }

    #[test]
    fn missing_file_is_empty_and_bad_utf8_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            Policy::load(&dir.path().join("none.toml")),
            Ok(Policy::default())
        );
        let f = dir.path().join("bad.toml");
        std::fs::write(&f, b"[[grant]]\napp = \"\xff\"\n").expect("write");
        assert!(matches!(
            Policy::load(&f),
            Err(PolicyError::NotUtf8 { offset: 17, .. })
        ));
    }
}
