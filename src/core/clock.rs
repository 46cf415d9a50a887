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

/// The clock of unit tests and of `--fake-clock` replays (a build with
/// the `replay` feature): the release build has only [`SystemClock`].
#[cfg(any(test, feature = "replay"))]
pub(crate) use manual::ManualClock;

#[cfg(any(test, feature = "replay"))]
mod manual {
    use std::sync::{Arc, Mutex};

    use chrono::{DateTime, Utc};

    use super::Clock;

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
}

/// CLOCK_MONOTONIC now, in nanoseconds: the same clock in every process
/// of the machine (what `std::time::Instant` reads), for debug logs that
/// another process lines up with its own times (`make bench`'s readers
/// bench: when the broker wrote each reader's notification).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the pointer given;
    // CLOCK_MONOTONIC is always there on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// One trace line under target `contextd::fanout`: `n` messages of
/// `transport` left the broker now ([`monotonic_ns`]). `make bench`'s
/// readers bench turns the target on to see where a fan-out's time goes.
pub(crate) fn trace_written(transport: &'static str, n: usize) {
    tracing::trace!(
        target: "contextd::fanout",
        transport,
        n,
        at_ns = monotonic_ns(),
        "written"
    );
}
