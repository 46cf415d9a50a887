//! The timeline store as the core reads it: `core::history::HistoryStore`
//! over [`History`]'s queries.

use chrono::{DateTime, Utc};

use super::history::History;
use crate::core::Error;
use crate::core::consent::BoxFut;
use crate::core::history::{AppTotals, HistoryKind, HistoryStore, Page, Query};

impl HistoryStore for History {
    fn query(&self, q: Query, now: DateTime<Utc>) -> BoxFut<'_, Result<Page, Error>> {
        Box::pin(async move { History::query(self, &q, now).await })
    }

    fn summary(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<Vec<AppTotals>, Error>> {
        Box::pin(History::summary(self, since, until, now))
    }

    fn forget(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        apps: Vec<String>,
        kinds: Vec<HistoryKind>,
        now: DateTime<Utc>,
    ) -> BoxFut<'_, Result<u64, Error>> {
        Box::pin(async move { History::forget(self, since, until, &apps, &kinds, now).await })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::core::lane::{OnLane, StoreLane};
    use crate::store::Db;
    use crate::store::key::{DbKey, KeySource};

    /// A read's connection goes back to the pool even when the runtime the
    /// read was asked from runs nothing more for a while (hundreds of MCP
    /// hosts keep it busy): every caller here gets its answer and then
    /// blocks its runtime's only thread, and one more caller than the pool
    /// has connections must still be answered. Without the lane, sqlx gives
    /// each connection back in a task on its caller's runtime, which never
    /// runs: the last caller waited for a connection until the pool's
    /// 30 s timeout.
    #[test]
    fn a_read_s_connection_comes_back_while_its_caller_s_runtime_is_stuck() {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let key = DbKey::random().expect("key");
        let (db, _tasks) = rt
            .block_on(Db::open(
                &dir.path().join("h.db"),
                &key,
                &KeySource::KeyFile(dir.path().join("k")),
            ))
            .expect("open");
        let (history, _writer, _) = rt
            .block_on(History::open(db.pool().clone()))
            .expect("history");
        let lane = crate::shutdown::Lane::start("store", 1).expect("lane");
        let store: Arc<dyn HistoryStore> = Arc::new(OnLane::new(
            Arc::new(history),
            StoreLane::new(
                lane.handle().clone(),
                crate::shutdown::Level::detached("database"),
            ),
        ));
        let callers = db.pool().options().get_max_connections() as usize + 1;
        let stuck = Arc::new(std::sync::Barrier::new(callers + 1));
        let mut threads = Vec::new();
        for n in 0..callers {
            let (store, stuck) = (store.clone(), stuck.clone());
            let (answered, answer) = std::sync::mpsc::channel();
            threads.push(std::thread::spawn(move || {
                let caller = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("caller's runtime");
                let now = Utc::now();
                let read =
                    caller.block_on(store.summary(now - chrono::Duration::hours(2), now, now));
                let _ = answered.send(read.map(|_| ()));
                // Nothing runs on `caller` until every read is answered.
                stuck.wait();
            }));
            match answer.recv_timeout(Duration::from_secs(20)) {
                Ok(read) => read.expect("summary"),
                Err(_) => panic!("caller {n} of {callers} got no connection in 20 s"),
            }
        }
        stuck.wait();
        for t in threads {
            t.join().expect("caller");
        }
        rt.block_on(async {
            assert!(lane.stop(Duration::from_secs(5)).await);
            db.pool().close().await;
        });
    }
}
