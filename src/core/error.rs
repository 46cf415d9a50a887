use crate::model::{AppId, Category};

/// Domain errors. Each publisher maps them to its wire form (a D-Bus error
/// name, a JSON-RPC code) with exactly one `From`.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum Error {
    /// The consent gate said no. The message names the app, the category
    /// and how the user can grant it, because the person reading it is
    /// usually the developer of the app or the user wondering why.
    #[error("{app} may not read '{category}': {hint}")]
    NotAllowed {
        app: AppId,
        category: Category,
        hint: String,
    },
    /// The user has not decided yet; a prompt is (or will be) shown.
    #[error("{app} is waiting for the user to decide about '{category}'")]
    Pending { app: AppId, category: Category },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    InvalidArgs(String),
    /// A limit on what an app may do (publish rate, kinds, sizes); the
    /// message names it.
    #[error("{0}")]
    LimitExceeded(String),
    /// The user refused this app's publications (org.contextd.Provider1).
    #[error(
        "the user refused what {app} publishes; they can allow it with `contextctl providers allow {app}`"
    )]
    PublishRefused { app: AppId },
    /// A caller that is not the desktop shell reported windows
    /// (org.contextd.WindowReports1); `why` says which rule refused it
    /// (the executable, or the shell's bus name).
    #[error("{app} may not report windows: {why}")]
    NotAReporter { app: AppId, why: String },
    /// A caller that is not a trusted consent agent registered as one
    /// (`core::agents`); `why` says which rule refused it.
    #[error("{app} may not answer prompts: {why}")]
    NotAnAgent { app: AppId, why: String },
    /// A caller that is not the user's own tool reached for the user's
    /// controls (`core::manage::Manage::may_manage`): a sandboxed app, or
    /// an app answering its own question. `what` is the call.
    #[error("{app} may not {what}: {why}")]
    NotTheUser {
        app: AppId,
        what: String,
        why: String,
    },
    /// The user's never-share rules (`core::privacy`) hold back what
    /// this app publishes: nothing of it is kept.
    #[error(
        "{app} is never shared (a password manager, or the user's [privacy] rules): what it publishes is not kept"
    )]
    NeverShared { app: AppId },
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
}

impl From<crate::model::CategoryError> for Error {
    fn from(e: crate::model::CategoryError) -> Self {
        Error::InvalidArgs(e.to_string())
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
