//! Your data is yours: `contextctl export` and `contextctl import`.
//!
//! The format is JSON Lines, versioned by its first line:
//! `{"format":"contextd-export","version":1,"exported":TIME,"history":BOOL}`,
//! then one object per line with a `type`: `decision` (app_id, category,
//! decision, origin, created, expires), `token` (name and created only:
//! a token's secret is never exported, create it again on the other
//! machine), `refused_publisher` (app_id, since) and, with `--history`,
//! `history` (one interval or point of the timeline).
//!
//! An import is read and checked whole before anything changes: a bad
//! line is an `InvalidArgs` error naming it, and nothing is imported.
//! Then it merges: for each (app, category) the newer decision wins, and
//! on equal times a deny beats an allow; a refused publisher stays
//! refused; timeline rows not there yet are added. Importing ends a
//! recovery (`store::recovery`): restoring a backup is the user acting.
//! Imported decisions are marked `import` (whatever origin the file
//! names) and dated no later than the import.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::consent::{HistoryRow, Origin, StoredDecision, Verdict};
use super::error::{Error, Result};
use super::manage::Manage;
use crate::model::{AppId, Category};

pub(crate) const FORMAT: &str = "contextd-export";
pub(crate) const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    exported: DateTime<Utc>,
    #[serde(default)]
    history: bool,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Decision {
        app_id: String,
        category: String,
        decision: Verdict,
        origin: Origin,
        created: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<DateTime<Utc>>,
    },
    Token {
        name: String,
        created: DateTime<Utc>,
    },
    RefusedPublisher {
        app_id: String,
        since: DateTime<Utc>,
    },
    History(HistoryRow),
}

/// What an import changed.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ImportReport {
    pub(crate) decisions: u64,
    pub(crate) decisions_kept: u64,
    pub(crate) refused_publishers: u64,
    pub(crate) history: u64,
    /// Names of tokens listed in the file: never their secrets, so they
    /// must be created again (`contextctl token create NAME`).
    pub(crate) tokens_to_recreate: Vec<String>,
}

fn bad(line: usize, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgs(format!("line {line}: {what}; nothing was imported"))
}

/// Whether `new` replaces `old`: newer wins, deny beats allow on a tie.
pub(crate) fn wins(new: &StoredDecision, old: Option<&StoredDecision>) -> bool {
    match old {
        None => true,
        Some(o) if new.created != o.created => new.created > o.created,
        Some(o) => new.verdict == Verdict::Deny && o.verdict != Verdict::Deny,
    }
}

#[derive(Debug)]
struct Parsed {
    decisions: Vec<StoredDecision>,
    refused: Vec<(AppId, DateTime<Utc>)>,
    history: Vec<HistoryRow>,
    tokens: Vec<String>,
}

fn parse(text: &str) -> Result<Parsed> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (n, first) = lines
        .next()
        .ok_or_else(|| bad(1, "the file is empty, not a contextd export"))?;
    let header: Header = serde_json::from_str(first)
        .map_err(|e| bad(n + 1, format!("not an export header ({e})")))?;
    if header.format != FORMAT {
        return Err(bad(
            n + 1,
            format!("format {:?}, not {FORMAT:?}", header.format),
        ));
    }
    if header.version != VERSION {
        return Err(bad(
            n + 1,
            format!(
                "format version {} (this contextd reads version {VERSION}: use a newer contextd)",
                header.version
            ),
        ));
    }
    let mut p = Parsed {
        decisions: Vec::new(),
        refused: Vec::new(),
        history: Vec::new(),
        tokens: Vec::new(),
    };
    for (i, l) in lines {
        let at = i + 1;
        let line: Line = serde_json::from_str(l).map_err(|e| bad(at, e))?;
        match line {
            Line::Decision {
                app_id,
                category,
                decision,
                origin,
                created,
                expires,
            } => {
                if origin == Origin::Policy {
                    return Err(bad(at, "a policy.toml grant is not a stored decision"));
                }
                p.decisions.push(StoredDecision {
                    app: AppId::new(app_id).map_err(|e| bad(at, format!("app_id: {e}")))?,
                    category: category
                        .parse::<Category>()
                        .map_err(|e| bad(at, format!("category: {e}")))?,
                    verdict: decision,
                    expires,
                    origin,
                    created,
                });
            }
            Line::Token { name, .. } => p.tokens.push(name),
            Line::RefusedPublisher { app_id, since } => p.refused.push((
                AppId::new(app_id).map_err(|e| bad(at, format!("app_id: {e}")))?,
                since,
            )),
            Line::History(row) => {
                if row.end_ms.is_some_and(|e| e < row.start_ms) {
                    return Err(bad(at, "a timeline row that ends before it starts"));
                }
                p.history.push(row);
            }
        }
    }
    Ok(p)
}

fn json_line(v: &impl Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Failed(format!("export: {e}")))
}

impl Manage {
    /// The user's data as JSON Lines (see the module docs).
    pub(crate) async fn export(&self, history: bool) -> Result<String> {
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database to export".into()))?;
        let rows = store.export_rows(history).await?;
        let mut out = vec![json_line(&Header {
            format: FORMAT.into(),
            version: VERSION,
            exported: self.clock.now(),
            history,
        })?];
        let mut decisions: Vec<StoredDecision> = self
            .gate
            .decisions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flat_map(|m| m.values().cloned())
            .collect();
        decisions.sort_by(|a, b| {
            (a.app.as_str(), a.category.to_string()).cmp(&(b.app.as_str(), b.category.to_string()))
        });
        for d in decisions {
            out.push(json_line(&Line::Decision {
                app_id: d.app.to_string(),
                category: d.category.to_string(),
                decision: d.verdict,
                origin: d.origin,
                created: d.created,
                expires: d.expires,
            })?);
        }
        for (name, created) in rows.tokens {
            out.push(json_line(&Line::Token {
                name,
                created: DateTime::from_timestamp_millis(created).unwrap_or_default(),
            })?);
        }
        for (app, since) in self.gate.refused_publishers() {
            out.push(json_line(&Line::RefusedPublisher {
                app_id: app.to_string(),
                since,
            })?);
        }
        for row in rows.history {
            out.push(json_line(&Line::History(row))?);
        }
        Ok(out.join("\n") + "\n")
    }

    /// Merge an export into what is here (see the module docs).
    pub(crate) async fn import(&self, text: &str) -> Result<ImportReport> {
        let parsed = parse(text)?;
        let mut report = ImportReport {
            tokens_to_recreate: parsed.tokens,
            ..Default::default()
        };
        let store = self
            .gate
            .store()
            .ok_or_else(|| Error::Unavailable("no database to import into".into()))?
            .clone();
        let now = self.clock.now();
        for mut d in parsed.decisions {
            // A file is anyone's to write: what it says of who decided
            // and when is a claim. Kept as an import, dated no later than
            // now, so that a line dated 2099 cannot outrank every later
            // decision of the user's, nor pass for a prompt's answer.
            d.origin = Origin::Import;
            d.created = d.created.min(now);
            let old = self
                .gate
                .decisions
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&d.app)
                .and_then(|m| m.get(&d.category))
                .cloned();
            if !wins(&d, old.as_ref()) {
                report.decisions_kept += 1;
                continue;
            }
            store.put_decision(d.clone()).await?;
            self.gate.superseded(&d.app, &d.category);
            self.gate
                .decisions
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(d.app.clone())
                .or_default()
                .insert(d.category.clone(), d);
            report.decisions += 1;
        }
        for (app, _since) in parsed.refused {
            if self.gate.set_publishing(&app, false).await? {
                report.refused_publishers += 1;
            }
        }
        report.history = store.import_history(parsed.history).await?;
        self.gate.bump();
        self.gate.notices.bump(super::notice::Part::Grants);
        self.end_recovery().await?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(verdict: Verdict, secs: i64) -> StoredDecision {
        StoredDecision {
            app: AppId::new("org.example.A").expect("app"),
            category: Category::Windows,
            verdict,
            expires: None,
            origin: Origin::Manage,
            created: DateTime::from_timestamp(secs, 0).unwrap_or_default(),
        }
    }

    #[test]
    fn newer_wins_and_deny_beats_allow_on_a_tie() {
        assert!(wins(&d(Verdict::Allow, 10), None));
        assert!(wins(&d(Verdict::Allow, 11), Some(&d(Verdict::Deny, 10))));
        assert!(!wins(&d(Verdict::Allow, 9), Some(&d(Verdict::Deny, 10))));
        assert!(wins(&d(Verdict::Deny, 10), Some(&d(Verdict::Allow, 10))));
        assert!(!wins(&d(Verdict::Allow, 10), Some(&d(Verdict::Deny, 10))));
    }

    #[test]
    fn a_bad_line_is_named_and_nothing_is_read() {
        let head = r#"{"format":"contextd-export","version":1,"exported":"2026-11-26T15:30:00Z"}"#;
        let ok = format!(
            "{head}\n{}\n",
            r#"{"type":"decision","app_id":"org.a.A","category":"windows","decision":"allow","origin":"manage","created":"2026-11-26T15:00:00Z"}"#
        );
        assert_eq!(parse(&ok).map(|p| p.decisions.len()).ok(), Some(1));
        let broken = format!("{ok}{{\"type\":\"decision\",\"app_id\":\"org.a.A\"}}\n");
        match parse(&broken) {
            Err(Error::InvalidArgs(m)) => assert!(m.starts_with("line 3:"), "{m}"),
            other => panic!("{other:?}"),
        }
        let newer = head.replace("\"version\":1", "\"version\":2");
        assert!(matches!(parse(&newer), Err(Error::InvalidArgs(m)) if m.contains("version 2")));
        assert!(
            matches!(parse("not json"), Err(Error::InvalidArgs(m)) if m.starts_with("line 1:"))
        );
    }
}
