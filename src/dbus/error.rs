//! The D-Bus wire errors: `org.contextd.Error.*`.

use crate::core;

/// Every error a contextd D-Bus method can return. Names are stable API:
/// clients match on them.
#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.contextd.Error")]
pub(crate) enum Error {
    #[zbus(error)]
    ZBus(zbus::Error),
    /// The consent gate refused; the message says how to grant.
    NotAllowed(String),
    /// The user has not decided yet; a prompt was started.
    Pending(String),
    NotFound(String),
    InvalidArgs(String),
    /// A limit on what an app may do (publish rate, kinds, sizes).
    LimitExceeded(String),
    Unavailable(String),
    Failed(String),
}

impl From<core::Error> for Error {
    fn from(e: core::Error) -> Self {
        let msg = e.to_string();
        match e {
            core::Error::NotAllowed { .. }
            | core::Error::PublishRefused { .. }
            | core::Error::NeverShared { .. }
            | core::Error::NotAReporter { .. }
            | core::Error::NotAnAgent { .. }
            | core::Error::NotTheUser { .. } => Error::NotAllowed(msg),
            core::Error::Pending { .. } => Error::Pending(msg),
            core::Error::NotFound(_) => Error::NotFound(msg),
            core::Error::InvalidArgs(_) => Error::InvalidArgs(msg),
            core::Error::LimitExceeded(_) => Error::LimitExceeded(msg),
            core::Error::Unavailable(_) => Error::Unavailable(msg),
            core::Error::Failed(_) => Error::Failed(msg),
        }
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;
