use std::sync::Arc;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// Where "now" comes from. Expiry and retention read the clock through this
/// trait so that tests move time instead of sleeping.
pub(crate) trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub(crate) struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub(crate) fn new(at: DateTime<Utc>) -> Arc<Self> {
        Arc::new(ManualClock(Mutex::new(at)))
    }

    pub(crate) fn set(&self, at: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = at;
    }

    #[cfg(test)]
    pub(crate) fn advance(&self, by: chrono::Duration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}
