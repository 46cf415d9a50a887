//! The store's calls on a runtime of their own ([`OnLane`]).
//!
//! A database call hands its statement to the connection's SQLite thread
//! and is woken when the answer is back; the connection then goes back to
//! the pool in a task that sqlx spawns on the runtime the call ran on, and
//! that task talks to the SQLite thread twice more (sqlx's ping, our check
//! that no transaction was left open, `store::db`) before the next caller
//! may have it. On a runtime that hundreds of MCP hosts keep busy, each of
//! those wake-ups waits its turn behind their tasks, and a connection that
//! did 2 ms of work was away from the pool for seconds: under `make soak`
//! the timeline's reads waited for one of the pool's four connections for
//! 3-13 s (p50) and 30 s at worst, while the connections were busy for
//! less than a tenth of that. Run on a runtime that only the store uses,
//! the same reads waited under 3 ms (p90) and the soak's MCP hosts got
//! four times as many answers.
//!
//! So the daemon wraps each store in [`OnLane`]: the core calls the
//! store's traits as before, and every call runs as a task on the store's
//! lane (`shutdown::Lane`), tracked by the database level, so that a stop
//! waits for the calls in flight before the pool closes. The caller's
//! future only waits for the task's answer; if the caller goes away (a
//! host that hung up), the call still finishes, which keeps a write that
//! was asked for and costs a read that nobody reads. A call starts when
//! its future is first polled, as the store's own futures do.

use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::runtime::Handle;

use super::consent::{
    AppInfo, AuditCount, AuditCountQuery, AuditEntry, AuditQuery, BoxFut, ConsentStore, HistoryRow,
    StoreExport, StoredDecision,
};
use super::error::Error;
use super::history::{AppTotals, HistoryKind, HistoryStore, Page, Query};
use super::tokens::{Presented, TokenError, TokenStore};
use crate::model::admin::TokenInfo;
use crate::model::{AppId, Category};
use crate::shutdown::Level;

/// Where the store's calls run: a runtime's handle, and the level whose
/// tasks they are (the one that waits for them).
#[derive(Debug, Clone)]
pub(crate) struct StoreLane {
    handle: Handle,
    level: Level,
}

impl StoreLane {
    pub(crate) fn new(handle: Handle, level: Level) -> StoreLane {
        StoreLane { handle, level }
    }

    /// Run `work` on the lane when the returned future is first polled,
    /// and hand back its answer. A call that panicked, or that the lane
    /// dropped because the daemon is stopping, is a failure like any other
    /// the store reports ([`Lost`]).
    fn run<T: Send + 'static, E: Lost + Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, E>> + Send + 'static,
    ) -> BoxFut<'static, Result<T, E>> {
        let lane = self.clone();
        Box::pin(async move {
            match lane.level.spawn_on(work, &lane.handle).await {
                Ok(answer) => answer,
                Err(e) => Err(E::lost(e.is_panic())),
            }
        })
    }
}

/// A store's error for a call that never answered: it panicked (logged
/// by the panic hook), or the daemon is stopping.
pub(crate) trait Lost {
    fn lost(panicked: bool) -> Self;
}

impl Lost for Error {
    fn lost(panicked: bool) -> Self {
        if panicked {
            Error::Failed("the database call failed unexpectedly (a panic, logged)".into())
        } else {
            Error::Unavailable("the broker is stopping".into())
        }
    }
}

impl Lost for TokenError {
    fn lost(panicked: bool) -> Self {
        TokenError::Db(
            if panicked {
                "the call failed unexpectedly (a panic, logged)"
            } else {
                "the broker is stopping"
            }
            .into(),
        )
    }
}

/// A store whose calls run on the [`StoreLane`]. Calls that do not touch
/// the database (the audit queue, the revocation reserve, the token
/// checks, which read memory) run in place.
#[derive(Debug)]
pub(crate) struct OnLane<S: ?Sized> {
    inner: Arc<S>,
    lane: StoreLane,
}

impl<S: ?Sized> OnLane<S> {
    pub(crate) fn new(inner: Arc<S>, lane: StoreLane) -> OnLane<S> {
        OnLane { inner, lane }
    }
}

/// `self.lane.run` of a call on a clone of the inner store.
macro_rules! on_lane {
    ($self:ident, |$s:ident| $call:expr) => {{
        let $s = $self.inner.clone();
        $self.lane.run(async move { $call.await })
    }};
}

impl<S: ConsentStore + ?Sized + 'static> ConsentStore for OnLane<S> {
    fn put_decision(&self, d: StoredDecision) -> BoxFut<'_, Result<(), Error>> {
        on_lane!(self, |s| s.put_decision(d))
    }

    fn delete_decision(&self, app: AppId, category: Category) -> BoxFut<'_, Result<bool, Error>> {
        on_lane!(self, |s| s.delete_decision(app, category))
    }

    fn forget_app(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>> {
        on_lane!(self, |s| s.forget_app(app))
    }

    fn forget_audit(&self, app: AppId) -> BoxFut<'_, Result<u64, Error>> {
        on_lane!(self, |s| s.forget_audit(app))
    }

    fn upsert_app(&self, app: AppInfo) -> BoxFut<'_, Result<(), Error>> {
        on_lane!(self, |s| s.upsert_app(app))
    }

    fn set_refused_publisher(
        &self,
        app: AppId,
        since: Option<DateTime<Utc>>,
    ) -> BoxFut<'_, Result<(), Error>> {
        on_lane!(self, |s| s.set_refused_publisher(app, since))
    }

    fn release_reserve(&self) -> bool {
        self.inner.release_reserve()
    }

    fn keep_reserve(&self) -> bool {
        self.inner.keep_reserve()
    }

    fn clear_recovery(&self) -> BoxFut<'_, Result<(), Error>> {
        on_lane!(self, |s| s.clear_recovery())
    }

    fn export_rows(&self, history: bool) -> BoxFut<'_, Result<StoreExport, Error>> {
        on_lane!(self, |s| s.export_rows(history))
    }

    fn import_history(&self, rows: Vec<HistoryRow>) -> BoxFut<'_, Result<u64, Error>> {
        on_lane!(self, |s| s.import_history(rows))
    }

    fn rotate_key(&self) -> BoxFut<'_, Result<String, Error>> {
        on_lane!(self, |s| s.rotate_key())
    }

    fn audit(&self, e: AuditEntry) {
        self.inner.audit(e)
    }

    fn query_audit(&self, q: AuditQuery) -> BoxFut<'_, Result<Vec<AuditEntry>, Error>> {
        on_lane!(self, |s| s.query_audit(q))
    }

    fn audit_counts(&self, q: AuditCountQuery) -> BoxFut<'_, Result<Vec<AuditCount>, Error>> {
        on_lane!(self, |s| s.audit_counts(q))
    }
}

impl<S: HistoryStore + ?Sized + 'static> HistoryStore for OnLane<S> {
    fn query(&self, q: Query, now: DateTime<Utc>) -> BoxFut<'_, Result<Page, Error>> {
        on_lane!(self, |s| s.query(q, now))
    }

    fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<Vec<AppTotals>, Error>> {
        on_lane!(self, |s| s.summary(since, until, now))
    }

    fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: Vec<String>,
        kinds: Vec<HistoryKind>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<u64, Error>> {
        on_lane!(self, |s| s.forget(since, until, apps, kinds, now))
    }
}

impl<S: TokenStore + ?Sized + 'static> TokenStore for OnLane<S> {
    fn create<'a>(
        &'a self,
        name: &'a str,
        expires: Option<DateTime<Utc>>,
    ) -> BoxFut<'a, Result<String, TokenError>> {
        let name = name.to_owned();
        on_lane!(self, |s| s.create(&name, expires))
    }

    fn list(&self) -> Vec<TokenInfo> {
        self.inner.list()
    }

    fn revoke<'a>(&'a self, name: &'a str) -> BoxFut<'a, Result<(), TokenError>> {
        let name = name.to_owned();
        on_lane!(self, |s| s.revoke(&name))
    }

    fn verify(&self, presented: &str) -> Presented {
        self.inner.verify(presented)
    }

    fn end_expired(&self) -> Vec<String> {
        self.inner.end_expired()
    }

    fn next_expiry(&self) -> Option<std::time::Duration> {
        self.inner.next_expiry()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The history read and the answer it gives, with the thread it ran on.
    #[derive(Debug)]
    struct Where;

    impl HistoryStore for Where {
        fn query(&self, _q: Query, _now: DateTime<Utc>) -> BoxFut<'_, Result<Page, Error>> {
            Box::pin(async {
                Err(Error::NotFound(
                    std::thread::current().name().unwrap_or("").to_owned(),
                ))
            })
        }

        fn summary(
            &self,
            _since: DateTime<Utc>,
            _until: DateTime<Utc>,
            _now: DateTime<Utc>,
        ) -> BoxFut<'_, Result<Vec<AppTotals>, Error>> {
            Box::pin(async { panic!("a store that panics") })
        }

        fn forget(
            &self,
            _since: DateTime<Utc>,
            _until: DateTime<Utc>,
            _apps: Vec<String>,
            _kinds: Vec<HistoryKind>,
            _now: DateTime<Utc>,
        ) -> BoxFut<'_, Result<u64, Error>> {
            Box::pin(async { Ok(7) })
        }
    }

    #[tokio::test]
    async fn calls_run_on_the_lane_are_tracked_and_a_panic_is_a_failure() {
        let lane = crate::shutdown::Lane::start("storetest", 1).expect("lane");
        let level = Level::detached("database");
        let tasks = level.tracker();
        let store = OnLane::new(
            Arc::new(Where),
            StoreLane::new(lane.handle().clone(), level.clone()),
        );
        let now = Utc::now();
        match store.query(Query::default(), now).await {
            Err(Error::NotFound(thread)) => assert_eq!(thread, "contextd-storetest"),
            other => panic!("ran elsewhere: {other:?}"),
        }
        // Nothing runs before the future is polled.
        let call = store.forget(now, now, vec![], vec![], now);
        assert_eq!(tasks.len(), 0);
        assert_eq!(call.await.expect("forget"), 7);
        assert!(matches!(
            store.summary(now, now, now).await,
            Err(Error::Failed(_))
        ));
        tasks.close();
        tasks.wait().await;
        // A lane that stopped answers "stopping", not a hang.
        assert!(lane.stop(std::time::Duration::from_secs(5)).await);
        assert!(matches!(
            store.forget(now, now, vec![], vec![], now).await,
            Err(Error::Unavailable(_))
        ));
    }
}
