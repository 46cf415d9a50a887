//! Consent decisions beyond policy.toml: what the user decided through a
//! prompt or `contextctl consent`, one-time grants, the audit trail, and
//! the store behind them (a trait implemented by `store/`, so that core
//! never sees SQL).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::Error;
use super::subject::Channel;
use crate::model::{AppId, Category, IdentitySource};

pub(crate) type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Allow,
    Deny,
    /// Ask every time.
    Ask,
}

impl Verdict {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::Ask => "ask",
        }
    }
}

impl FromStr for Verdict {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "allow" => Ok(Verdict::Allow),
            "deny" => Ok(Verdict::Deny),
            "ask" => Ok(Verdict::Ask),
            other => Err(Error::InvalidArgs(format!(
                "unknown decision '{}': use allow, deny or ask",
                other.chars().take(40).collect::<String>()
            ))),
        }
    }
}

/// Who made a stored decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Origin {
    /// The user, answering a prompt.
    Prompt,
    /// The user, through `Consent1` / `contextctl consent`.
    Manage,
    /// The user's policy.toml (never stored; shown as such).
    Policy,
    /// Restored from an export (`Consent1.Import`). The file says who
    /// decided, but a file is anyone's to write: what it claims is kept
    /// as an import, dated no later than the import itself.
    Import,
}

impl Origin {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Prompt => "prompt",
            Origin::Manage => "manage",
            Origin::Policy => "policy",
            Origin::Import => "import",
        }
    }
}

impl FromStr for Origin {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "prompt" => Ok(Origin::Prompt),
            "manage" => Ok(Origin::Manage),
            "policy" => Ok(Origin::Policy),
            "import" => Ok(Origin::Import),
            other => Err(Error::Failed(format!(
                "unknown origin '{other}' in the store"
            ))),
        }
    }
}

/// One decision of the user about one app and one category.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StoredDecision {
    pub app: AppId,
    pub category: Category,
    pub verdict: Verdict,
    pub expires: Option<DateTime<Utc>>,
    pub origin: Origin,
    pub created: DateTime<Utc>,
}

impl StoredDecision {
    pub(crate) fn live_at(&self, now: DateTime<Utc>) -> bool {
        self.expires.is_none_or(|e| e > now)
    }
}

/// What the user answered to a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// For one call or one subscription.
    Once,
    Always,
    For(chrono::Duration),
    Deny,
}

/// The longest `duration` answer: ten years.
const MAX_ANSWER_SECS: i64 = 10 * 365 * 24 * 3600;

impl Answer {
    /// An answer as agents, panels and the dashboard send it: `once`,
    /// `always`, `deny`, or `duration` with `duration_s` seconds. `cancel`
    /// and the empty string are no answer (`Ok(None)`).
    pub(crate) fn parse(answer: &str, duration_s: Option<i64>) -> Result<Option<Answer>, String> {
        match answer {
            "once" => Ok(Some(Answer::Once)),
            "always" => Ok(Some(Answer::Always)),
            "deny" => Ok(Some(Answer::Deny)),
            "duration" => duration_s
                .filter(|s| *s > 0 && *s <= MAX_ANSWER_SECS)
                .map(|s| Some(Answer::For(chrono::Duration::seconds(s))))
                .ok_or_else(|| "answer 'duration' needs a positive duration_s".to_owned()),
            "cancel" | "" => Ok(None),
            other => Err(format!(
                "unknown answer '{}' (want once, always, duration or deny)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// An app that asked, as the broker knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AppInfo {
    pub app_id: AppId,
    pub identity_source: IdentitySource,
    pub display_name: Option<String>,
    pub icon: Option<String>,
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
}

/// One decision of the gate about one access.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AuditEntry {
    pub(crate) time: DateTime<Utc>,
    pub(crate) app: AppId,
    pub(crate) category: Category,
    pub(crate) channel: Channel,
    /// What the app called: `Context1.GetActiveWindow`, `tools/call
    /// get_active_window`, `resources/read context://windows` (empty in
    /// rows written before this was recorded).
    pub(crate) request: String,
    pub(crate) allowed: bool,
    /// Why: `policy`, `prompt`, `manage`, `once`, `denied`, `paused`,
    /// `undecided`, `no-answer`.
    pub(crate) reason: String,
    /// How many identical decisions this row stands for.
    pub(crate) count: u64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct AuditQuery {
    pub(crate) since: Option<DateTime<Utc>>,
    pub(crate) until: Option<DateTime<Utc>>,
    pub(crate) app: Option<AppId>,
    pub(crate) limit: u32,
}

/// How many accesses the audit holds per period, app and category
/// ([`ConsentStore::audit_counts`]): the user's pages draw them as days
/// (the last 7 days of an app) without reading every row.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditCountQuery {
    /// The first period starts here.
    pub(crate) since: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
    pub(crate) app: Option<AppId>,
    pub(crate) category: Option<Category>,
    /// The length of a period (a day); `None`: one period from `since`
    /// to `until`.
    pub(crate) period: Option<chrono::Duration>,
}

/// The accesses of one app to one category in one period, folded rows
/// counted as what they stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AuditCount {
    /// Where the period starts (`since` plus whole periods).
    pub(crate) start: DateTime<Utc>,
    pub(crate) app: AppId,
    pub(crate) category: Category,
    pub(crate) allowed: u64,
    pub(crate) refused: u64,
}

/// One interval or point of the timeline as exported (the `history`
/// table's columns but its id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistoryRow {
    pub(crate) kind: String,
    pub(crate) category: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) app_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) detail: Option<String>,
    pub(crate) start_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) end_ms: Option<i64>,
}

/// What only the store holds for an export: token names and creation
/// times (never their hashes), and the timeline when asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoreExport {
    pub(crate) tokens: Vec<(String, i64)>,
    pub(crate) history: Vec<HistoryRow>,
}

/// A decision in force in memory, not yet stored.
#[derive(Debug, Clone)]
pub(crate) enum PendingWrite {
    /// A deny (a prompt's or a management call's).
    Put(StoredDecision),
    /// A revocation (back to undecided).
    Delete(AppId, Category),
}

impl PendingWrite {
    pub(crate) fn key(&self) -> (&AppId, &Category) {
        match self {
            PendingWrite::Put(d) => (&d.app, &d.category),
            PendingWrite::Delete(a, c) => (a, c),
        }
    }
}

/// What is loaded from the store at start.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    pub decisions: Vec<StoredDecision>,
    pub apps: Vec<AppInfo>,
    /// Apps whose publications the user refused, and since when.
    pub refused_publishers: Vec<(AppId, DateTime<Utc>)>,
    /// Why the broker runs degraded (the database replaced an unusable
    /// file, or its key is missing): undecided access is then denied,
    /// never asked, until the user acts.
    pub recovery: Option<String>,
}

/// The persistent side of consent. Decision writes are awaited (they are
/// rare and the user expects them to stick); audit entries are handed over
/// without waiting and written in batches.
pub(crate) trait ConsentStore: Send + Sync + fmt::Debug {
    fn put_decision(&self, d: StoredDecision) -> BoxFut<'_, Result<(), Error>>;
    fn delete_decision(&self, app: AppId, category: Category) -> BoxFut<'_, Result<bool, Error>>;
    fn forget_app(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>>;
    /// Delete the audit of `app` (what it read and was refused), keeping
    /// its decisions and its entry: how many accesses were forgotten.
    fn forget_audit(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>>;
    fn upsert_app(&self, app: AppInfo) -> BoxFut<'_, Result<(), Error>>;
    /// Refuse an app's publications from `since`, or (`None`) allow them.
    fn set_refused_publisher(
        &self,
        app: AppId,
        since: Option<DateTime<Utc>>,
    ) -> BoxFut<'_, Result<(), Error>>;
    /// The disk refused a revocation: give back the room kept for one
    /// (`store::reserve`); whether there was any, so the write is worth
    /// trying again at once.
    fn release_reserve(&self) -> bool {
        false
    }
    /// Nothing waits to be written: keep room for the next revocation.
    /// Whether the room is there (a store that keeps none has nothing to
    /// wait for: true).
    fn keep_reserve(&self) -> bool {
        true
    }
    /// The user acted on a recovery (dismissed it, or imported a backup):
    /// forget the note, so that the next start is not degraded.
    fn clear_recovery(&self) -> BoxFut<'_, Result<(), Error>> {
        Box::pin(async { Ok(()) })
    }
    /// Token names and (with `history`) the timeline, for an export.
    fn export_rows(&self, _history: bool) -> BoxFut<'_, Result<StoreExport, Error>> {
        Box::pin(async { Ok(StoreExport::default()) })
    }
    /// Add imported timeline rows not there yet; how many were added.
    fn import_history(&self, _rows: Vec<HistoryRow>) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async { Ok(0) })
    }
    /// Re-encrypt the store under a new key, kept where the old one was;
    /// returns where that is.
    fn rotate_key(&self) -> BoxFut<'_, Result<String, Error>> {
        Box::pin(async { Err(Error::Unavailable("no database key to rotate".into())) })
    }
    fn audit(&self, e: AuditEntry);
    fn query_audit(&self, q: AuditQuery) -> BoxFut<'_, Result<Vec<AuditEntry>, Error>>;
    /// The audit counted per period, app and category (no row of its
    /// own read out: a week of a busy app is millions of accesses).
    fn audit_counts(&self, q: AuditCountQuery) -> BoxFut<'_, Result<Vec<AuditCount>, Error>>;
}
