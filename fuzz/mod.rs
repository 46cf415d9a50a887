//! Fuzzing on stable Rust: a target for every parser of outside input, and
//! the driver that runs them.
//!
//! Each target is a function of generated input that must not panic, take
//! over [`INPUT_LIMIT`] for one input, or allocate more than
//! [`ALLOC_LIMIT`] at once for one input. Inputs come from `proptest`
//! strategies: random bytes, dictionary words of the format, and seeds of
//! valid input mutated a few edits at a time (so most inputs get past the
//! first check); a failing input is shrunk to a small one, to keep as a
//! regression test in [`regressions`].
//!
//! - `make test` runs [`slice`]: [`SLICE_CASES`] inputs per target, fixed
//!   seed.
//! - `make fuzz` runs [`full`] (ignored otherwise): `CONTEXTD_FUZZ_CASES`
//!   inputs in all (default 1 000 000) on `CONTEXTD_FUZZ_THREADS` threads
//!   (default 2), seed `CONTEXTD_FUZZ_SEED` (a number, or `random`; the
//!   seed is printed), and prints inputs/s per target.
//!
//! The targets are a module of the library's own tests (`#[cfg(test)]
//! #[path = "../fuzz/mod.rs"] mod fuzz;` in src/lib.rs), so that they reach
//! the `pub(crate)` parsers without widening the public API, while the file
//! stays out of src/ and out of every other build.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use serde_json::Value;

/// The longest one input may take in `make fuzz`.
const INPUT_LIMIT: Duration = Duration::from_secs(1);
/// The same bound for the slice in `make test`, which shares the machine
/// with the whole suite: there it catches hangs, not slowness.
const SLICE_INPUT_LIMIT: Duration = Duration::from_secs(10);
/// The most one input may make a parser hold at once. Inputs are at most a
/// few KiB (the stdio framing's over-long line: 1 MiB and a bit).
const ALLOC_LIMIT: usize = 64 << 20;
/// Inputs per target in `make test`.
const SLICE_CASES: u32 = 2_000;
const DEFAULT_SEED: u64 = 0x636f_6e74_6578_7464;

// ---------------------------------------------------------------------------
// The allocation bound: a counting allocator, active only on a thread that
// runs a fuzz input (every other test of the crate sees the system
// allocator plus a thread-local check).

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = LIVE.try_with(|live| {
                let now = live.get() + delta;
                live.set(now);
                let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
            });
        }
    });
}

// SAFETY: every call goes to the system allocator unchanged; the counters
// are plain thread-locals without destructors (no allocation in them).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Counts this thread's allocations while it lives; `peak` is the most
/// held at once above what was held when it began.
struct Measure;

impl Measure {
    fn begin() -> Measure {
        LIVE.with(|l| l.set(0));
        PEAK.with(|p| p.set(0));
        COUNTING.with(|c| c.set(true));
        Measure
    }
    fn peak(&self) -> usize {
        PEAK.with(|p| p.get()).max(0) as usize
    }
}

impl Drop for Measure {
    fn drop(&mut self) {
        COUNTING.with(|c| c.set(false));
    }
}

// ---------------------------------------------------------------------------
// The hang watch: an input that never returns cannot be timed after it
// returns; a watchdog thread ends the run and says which target and seed.

#[derive(Clone)]
struct Running {
    target: &'static str,
    case: u64,
    since: Instant,
}

static RUNNING: LazyLock<Mutex<HashMap<std::thread::ThreadId, Running>>> =
    LazyLock::new(Mutex::default);

fn running() -> std::sync::MutexGuard<'static, HashMap<std::thread::ThreadId, Running>> {
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stops the watchdog when dropped.
struct Watch(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Watch the running inputs until the returned guard is dropped; one that
/// runs past `hang` ends the process with the target, input and seed.
fn watchdog(hang: Duration, seed: u64) -> Watch {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            let stuck = running()
                .values()
                .find(|r| r.since.elapsed() > hang)
                .cloned();
            if let Some(r) = stuck {
                eprintln!(
                    "fuzz: {}: input #{} has run for over {hang:?}: a hang. \
                     Reproduce with CONTEXTD_FUZZ_SEED={seed}",
                    r.target, r.case
                );
                std::process::exit(101);
            }
        }
    });
    Watch(stop)
}

// ---------------------------------------------------------------------------
// The driver.

/// What one run of a target gives.
struct Settings {
    cases: u32,
    seed: u64,
    limit: Duration,
}

struct Outcome {
    name: &'static str,
    cases: u32,
    took: Duration,
    failure: Option<String>,
}

/// Run `check` on `settings.cases` inputs of `strategy`.
fn drive<S>(
    name: &'static str,
    settings: &Settings,
    strategy: S,
    check: impl Fn(S::Value),
) -> Outcome
where
    S: Strategy,
    S::Value: fmt::Debug,
{
    let config = Config {
        cases: settings.cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        max_shrink_time: 60_000,
        max_global_rejects: u32::MAX,
        ..Config::default()
    };
    // Each target its own stream of the seed.
    let mut key = [0u8; 32];
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    key[..8].copy_from_slice(&settings.seed.to_le_bytes());
    key[8..16].copy_from_slice(&h.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let thread = std::thread::current().id();
    let case = std::cell::Cell::new(0u64);
    let start = Instant::now();
    let result = runner.run(&strategy, |input| {
        case.set(case.get() + 1);
        running().insert(
            thread,
            Running {
                target: name,
                case: case.get(),
                since: Instant::now(),
            },
        );
        let t0 = Instant::now();
        let measure = Measure::begin();
        check(input);
        let peak = measure.peak();
        drop(measure);
        let took = t0.elapsed();
        running().remove(&thread);
        if took > settings.limit {
            return Err(TestCaseError::fail(format!(
                "one input took {took:?} (limit {:?})",
                settings.limit
            )));
        }
        if peak > ALLOC_LIMIT {
            return Err(TestCaseError::fail(format!(
                "one input held {peak} bytes at once (limit {ALLOC_LIMIT})"
            )));
        }
        Ok(())
    });
    running().remove(&thread);
    let failure = match result {
        Ok(()) => None,
        Err(TestError::Fail(why, input)) => {
            let mut shown = format!("{input:?}");
            if let Some((cut, _)) = shown.char_indices().nth(4096) {
                shown.truncate(cut);
                shown.push_str("...");
            }
            Some(format!(
                "{name}: {why}\n  minimal input: {shown}\n  seed: {}",
                settings.seed
            ))
        }
        Err(TestError::Abort(why)) => Some(format!("{name}: aborted: {why}")),
    };
    Outcome {
        name,
        cases: settings.cases,
        took: start.elapsed(),
        failure,
    }
}

type Target = (&'static str, fn(&Settings) -> Outcome);

/// Every target, the slowest first (two threads finish together).
const TARGETS: &[Target] = &[
    ("pipewire_props", targets::pipewire_props),
    ("http_head", targets::http_head),
    ("stdio_framing", targets::stdio_framing),
    ("mcp_params", targets::mcp_params),
    ("mcp_tool_args", targets::mcp_tool_args),
    ("dbus_args", targets::dbus_args),
    ("jsonrpc_message", targets::jsonrpc_message),
    ("resource_uri", targets::resource_uri),
    ("provider_entry", targets::provider_entry),
    ("policy_toml", targets::policy_toml),
    ("config_toml", targets::config_toml),
    #[cfg(feature = "replay")]
    ("replay_line", targets::replay_line),
    ("desktop_entry", targets::desktop_entry),
    ("calendar_object", targets::calendar_object),
    ("tzif", targets::tzif),
    ("dashboard_form", targets::dashboard_form),
];

fn env_seed() -> u64 {
    match std::env::var("CONTEXTD_FUZZ_SEED").ok().as_deref() {
        None | Some("") => DEFAULT_SEED,
        Some("random") => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (t.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32)
        }
        Some(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("CONTEXTD_FUZZ_SEED={s}: a number or `random`")),
    }
}

fn env_number(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(s) if !s.is_empty() => s
            .replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{var}={s}: a whole number")),
        _ => default,
    }
}

/// Run every target, `threads` at a time; print the figures; fail on any
/// failure.
fn run_all(cases_per_target: u32, threads: usize, seed: u64, limit: Duration) {
    let settings = Settings {
        cases: cases_per_target,
        seed,
        limit,
    };
    let _watch = watchdog(limit.max(Duration::from_secs(10)), seed);
    // CONTEXTD_FUZZ_TARGETS=a,b runs only those.
    let only = std::env::var("CONTEXTD_FUZZ_TARGETS").unwrap_or_default();
    let targets: Vec<&Target> = TARGETS
        .iter()
        .filter(|(name, _)| only.is_empty() || only.split(',').any(|o| o.trim() == *name))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((_, run)) = targets.get(i) else {
                        break;
                    };
                    let o = run(&settings);
                    println!(
                        "fuzz: {:<16} {:>9} inputs {:>8.1} s {:>10.0} inputs/s{}",
                        o.name,
                        o.cases,
                        o.took.as_secs_f64(),
                        f64::from(o.cases) / o.took.as_secs_f64().max(1e-9),
                        if o.failure.is_some() { "  FAILED" } else { "" }
                    );
                    outcomes.lock().unwrap_or_else(|e| e.into_inner()).push(o);
                }
            });
        }
    });
    let wall = start.elapsed();
    let outcomes = outcomes.into_inner().unwrap_or_else(|e| e.into_inner());
    let total: u64 = outcomes.iter().map(|o| u64::from(o.cases)).sum();
    println!(
        "fuzz: total {total} inputs over {} targets in {:.1} s on {threads} threads ({:.0} inputs/s), seed {seed}",
        outcomes.len(),
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64().max(1e-9),
    );
    let failures: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| o.failure.as_deref())
        .collect();
    assert!(
        failures.is_empty(),
        "{} target(s) failed (reproduce with CONTEXTD_FUZZ_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The slice `make test` runs: every target, a fixed seed, seconds.
#[test]
fn slice() {
    run_all(SLICE_CASES, 1, env_seed(), SLICE_INPUT_LIMIT);
}

/// The driver fails a slow input, a greedy one and a panicking one. Only
/// the slow one runs under a short limit (its input always outlasts it):
/// the others get a limit no scheduling stall reaches, so a loaded machine
/// cannot fail the harmless check.
#[test]
fn the_driver_catches_slow_greedy_and_panicking_inputs() {
    let failure = |limit: Duration, check: fn(u8)| {
        let settings = Settings {
            cases: 4,
            seed: DEFAULT_SEED,
            limit,
        };
        drive("driver", &settings, any::<u8>(), check)
            .failure
            .unwrap_or_default()
    };
    let generous = Duration::from_secs(60);
    assert!(failure(generous, |_| ()).is_empty());
    let slow = failure(Duration::from_millis(50), |_| {
        std::thread::sleep(Duration::from_millis(200))
    });
    assert!(slow.contains("took"), "{slow}");
    let greedy = failure(generous, |_| {
        drop(std::hint::black_box(vec![1u8; ALLOC_LIMIT + 1]))
    });
    assert!(greedy.contains("held"), "{greedy}");
    let panics = failure(generous, |_| panic!("a panic"));
    assert!(panics.contains("a panic"), "{panics}");
}

/// `make fuzz`: at least `CONTEXTD_FUZZ_CASES` inputs in all.
#[test]
#[ignore = "long: `make fuzz` runs it"]
fn full() {
    let total = env_number("CONTEXTD_FUZZ_CASES", 1_000_000);
    let threads = env_number("CONTEXTD_FUZZ_THREADS", 2) as usize;
    let per = total
        .div_ceil(TARGETS.len() as u64)
        .clamp(1, u64::from(u32::MAX)) as u32;
    run_all(per, threads, env_seed(), INPUT_LIMIT);
}

// ---------------------------------------------------------------------------
// Inputs.

/// Bytes, shown as a byte string (to paste into a regression test).
#[derive(Clone)]
struct Bytes(Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= 1024 {
            return write!(f, "b\"{}\"", self.0.escape_ascii());
        }
        let (head, tail) = (&self.0[..256], &self.0[self.0.len() - 256..]);
        write!(
            f,
            "b\"{}\" ... ({} bytes) ... b\"{}\"",
            head.escape_ascii(),
            self.0.len(),
            tail.escape_ascii()
        )
    }
}

impl Bytes {
    fn text(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

/// One edit of a seed.
#[derive(Debug, Clone)]
enum Edit {
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    Replace(Index, usize, Vec<u8>),
    Repeat(Index, usize, usize),
    Flip(Index, u8),
}

fn token(words: &'static [&'static str]) -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        4 => proptest::sample::select(words).prop_map(|w| w.as_bytes().to_vec()),
        2 => proptest::sample::select(PUNCTUATION).prop_map(|w| w.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..6),
        1 => any::<char>().prop_map(|c| c.to_string().into_bytes()),
    ]
    .boxed()
}

fn edit(words: &'static [&'static str]) -> BoxedStrategy<Edit> {
    prop_oneof![
        3 => (any::<Index>(), token(words)).prop_map(|(i, t)| Edit::Insert(i, t)),
        2 => (any::<Index>(), 1..16usize).prop_map(|(i, n)| Edit::Delete(i, n)),
        3 => (any::<Index>(), 1..8usize, token(words)).prop_map(|(i, n, t)| Edit::Replace(i, n, t)),
        1 => (any::<Index>(), 1..32usize, 1..4usize).prop_map(|(i, n, k)| Edit::Repeat(i, n, k)),
        1 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
    ]
    .boxed()
}

fn apply(mut s: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
        match e {
            Edit::Insert(i, t) => {
                let p = at(i, s.len());
                s.splice(p..p, t.iter().copied());
            }
            Edit::Delete(i, n) => {
                let p = at(i, s.len());
                let end = (p + n).min(s.len());
                s.drain(p..end);
            }
            Edit::Replace(i, n, t) => {
                let p = at(i, s.len());
                let end = (p + n).min(s.len());
                s.splice(p..end, t.iter().copied());
            }
            Edit::Repeat(i, n, k) => {
                let p = at(i, s.len());
                let end = (p + n).min(s.len());
                let part = s[p..end].to_vec();
                for _ in 0..*k {
                    s.splice(end..end, part.iter().copied());
                }
            }
            Edit::Flip(i, b) => {
                if !s.is_empty() {
                    let p = i.index(s.len());
                    s[p] ^= b | 1;
                }
            }
        }
    }
    s
}

const PUNCTUATION: &[&str] = &[
    "\"",
    "'",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "=",
    "\n",
    "\r\n",
    " ",
    "\t",
    "\\",
    "\\u0000",
    "\\ud800",
    "%",
    "%00",
    "%zz",
    "%ff",
    "&",
    "?",
    "/",
    "#",
    "\0",
    "\u{feff}",
    "\u{10ffff}",
    "é",
    "0",
    "-1",
    "1e999",
    "9223372036854775808",
    "null",
    "true",
    "[[",
    "]]",
    "...",
];

/// Bytes of a format: random, or a run of its words, or (mostly) a seed
/// with a few edits.
fn input(seeds: &'static [&'static str], words: &'static [&'static str]) -> BoxedStrategy<Bytes> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..256),
        1 => prop::collection::vec(token(words), 0..32).prop_map(|t| t.concat()),
        6 => (proptest::sample::select(seeds), prop::collection::vec(edit(words), 0..6))
            .prop_map(|(seed, edits)| apply(seed.as_bytes().to_vec(), &edits)),
    ]
    .prop_map(Bytes)
    .boxed()
}

/// A JSON value whose keys and strings are mostly the format's words.
fn json(words: &'static [&'static str]) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            any::<i64>(),
            Just(0i64),
            Just(-1),
            Just(i64::MAX),
            Just(i64::MIN),
            0..100i64
        ]
        .prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        proptest::sample::select(words).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        4 => proptest::sample::select(words).prop_map(str::to_owned),
                        1 => ".{0,8}"
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

// ---------------------------------------------------------------------------
// The targets.

mod targets {
    use super::*;
    use crate::mcp::jsonrpc::{self, Checked, Screened};

    /// Every request rmcp parses (from the screen itself, so a new one is
    /// fuzzed too), notifications, and one nobody knows.
    fn methods() -> Vec<&'static str> {
        let mut m = jsonrpc::KNOWN_REQUESTS.to_vec();
        m.extend([
            "notifications/initialized",
            "notifications/cancelled",
            "notifications/progress",
            "no/such",
        ]);
        m
    }

    const RPC_WORDS: &[&str] = &[
        "jsonrpc",
        "2.0",
        "id",
        "method",
        "params",
        "result",
        "error",
        "code",
        "message",
        "name",
        "arguments",
        "uri",
        "cursor",
        "_meta",
        "progressToken",
        "io.modelcontextprotocol/protocolVersion",
        "2026-07-28",
        "2025-06-18",
        "2025-03-26",
        "ref",
        "type",
        "ref/prompt",
        "ref/resource",
        "argument",
        "value",
        "context",
        "arguments",
        "protocolVersion",
        "capabilities",
        "clientInfo",
        "version",
        "level",
        "requestId",
        "reason",
        "since",
        "until",
        "app",
        "limit",
        "kind",
        "get_active_window",
        "get_recent_activity",
        "context://snapshot",
        "context://windows/active",
        "context://history{?since,until,app}",
        "initialize",
        "ping",
        "tools/call",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "tools/list",
        "logging/setLevel",
    ];

    const RPC_SEEDS: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":"c"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_active_window","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_recent_activity","arguments":{"since":"2026-11-22T09:00:00Z","limit":5},"_meta":{"progressToken":7}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"context://history?since=2026-11-22T09:00:00Z&app=x"}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"context://windows/active"}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"context://history{?since,until,app}"},"argument":{"name":"app","value":"or"}}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"debug","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"resources/templates/list"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":10,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":11,"error":{"code":-32601,"message":"no"}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"server/discover\",\"params\":{}}",
    ];

    fn rpc_input() -> BoxedStrategy<Bytes> {
        prop_oneof![
            3 => input(RPC_SEEDS, RPC_WORDS),
            1 => rpc_message().prop_map(|v| Bytes(v.to_string().into_bytes())),
        ]
        .boxed()
    }

    /// A JSON-RPC message of a known method with generated params.
    fn rpc_message() -> BoxedStrategy<Value> {
        (
            proptest::sample::select(methods()),
            prop_oneof![
                Just(None),
                (0..1000i64).prop_map(|i| Some(Value::from(i))),
                ".{0,4}".prop_map(|s| Some(Value::from(s))),
                json(RPC_WORDS).prop_map(Some),
            ],
            prop_oneof![Just(None), json(RPC_WORDS).prop_map(Some)],
        )
            .prop_map(|(method, id, params)| {
                let mut m = serde_json::Map::new();
                m.insert("jsonrpc".into(), "2.0".into());
                m.insert("method".into(), method.into());
                if let Some(id) = id {
                    m.insert("id".into(), id);
                }
                if let Some(p) = params {
                    m.insert("params".into(), p);
                }
                Value::Object(m)
            })
            .boxed()
    }

    pub(super) fn screen_all(bytes: &[u8]) {
        let checked = jsonrpc::check(bytes);
        let screened = jsonrpc::screen(bytes);
        match &checked {
            Checked::Reject(r) => {
                let _ = r.to_json().to_string();
            }
            Checked::Pass(_) | Checked::Ignore(_) => {}
        }
        if let Screened::Reject(r) = &screened {
            let _ = serde_json::to_string(&r.clone().into_message());
        }
        // What `check` passes (for /mcp), `screen` passes too.
        if matches!(checked, Checked::Pass(_)) {
            assert!(
                matches!(screened, Screened::Pass(_)),
                "check passed what screen did not: {screened:?}"
            );
        }
    }

    pub(super) fn jsonrpc_message(s: &Settings) -> Outcome {
        drive("jsonrpc_message", s, rpc_input(), |b| screen_all(&b.0))
    }

    pub(super) fn mcp_params(s: &Settings) -> Outcome {
        drive(
            "mcp_params",
            s,
            (proptest::sample::select(methods()), json(RPC_WORDS)),
            |(method, params)| {
                let _ = jsonrpc::fit_params(method, Some(&params));
                let _ = jsonrpc::fit_params(method, None);
                let msg = serde_json::json!({
                    "jsonrpc": "2.0", "id": 1, "method": method, "params": params,
                });
                screen_all(msg.to_string().as_bytes());
            },
        )
    }

    /// The argument lists of the tools.
    pub(super) fn mcp_tool_args(s: &Settings) -> Outcome {
        use crate::core::cursor::{decode, encode};
        use crate::mcp::schema::*;
        use crate::mcp::tools::page;
        let kind = proptest::sample::select(&["windows", "notifications", "x"][..]);
        let cursor = prop_oneof![
            (kind.clone(), any::<usize>()).prop_map(|(k, n)| encode(k, n)),
            (kind.clone(), 0..300usize).prop_map(|(k, n)| encode(k, n)),
            ".{0,24}",
        ]
        .prop_map(Value::from);
        let args = (json(RPC_WORDS), prop::option::of(cursor)).prop_map(|(v, c)| {
            let mut m = match v {
                Value::Object(m) => m,
                other => serde_json::Map::from_iter([("limit".to_owned(), other)]),
            };
            if let Some(c) = c {
                m.insert("cursor".into(), c);
            }
            m
        });
        drive(
            "mcp_tool_args",
            s,
            (
                0..6usize,
                prop::option::of(args),
                kind,
                0..300usize,
                ".{0,24}",
            ),
            |(tool, args, kind, n, raw)| {
                let _ = decode::<usize>(kind, &raw);
                // Every tool's argument type; the pages of the list tools.
                let args = match tool {
                    0 => return drop(parse::<NoArgs>(args)),
                    1 => return drop(parse::<ProvidedArgs>(args)),
                    2 => return drop(parse::<NotifyArgs>(args)),
                    3 => return drop(parse::<ActivityArgs>(args)),
                    4 => return drop(parse::<PeriodArgs>(args)),
                    _ => match parse::<PageArgs>(args) {
                        Ok(a) => a,
                        Err(_) => return,
                    },
                };
                if let Ok((items, next)) = page(vec![(); n], kind, &args) {
                    assert!(items.len() <= crate::mcp::schema::MAX_PAGE);
                    if let Some(next) = next {
                        assert!(decode::<usize>(kind, &next).is_ok_and(|o| o < n));
                    }
                }
            },
        )
    }

    /// An `AsyncRead` that hands out its bytes in the given chunk sizes (a
    /// 0 is one `Pending` first), and cancels `eof` when it runs out.
    struct Chunked {
        data: Vec<u8>,
        at: usize,
        chunks: Vec<usize>,
        next: usize,
        yielded: bool,
        eof: tokio_util::sync::CancellationToken,
    }

    impl tokio::io::AsyncRead for Chunked {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let me = &mut *self;
            if me.at >= me.data.len() {
                me.eof.cancel();
                return std::task::Poll::Ready(Ok(()));
            }
            let chunk = me.chunks.get(me.next % me.chunks.len().max(1)).copied();
            if chunk == Some(0) && !me.yielded {
                me.yielded = true;
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            me.yielded = false;
            me.next += 1;
            let n = chunk
                .unwrap_or(usize::MAX)
                .max(1)
                .min(me.data.len() - me.at)
                .min(buf.remaining());
            buf.put_slice(&me.data[me.at..me.at + n]);
            me.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime");
    }

    /// Feed `data` to the stdio socket's line reader; what it passed and
    /// what it answered.
    pub(super) fn frame(data: Vec<u8>, chunks: Vec<usize>) -> (usize, Vec<jsonrpc::Rejection>) {
        RUNTIME.with(|rt| {
            rt.block_on(async move {
                let (tx, mut rx) = tokio::sync::mpsc::channel(8);
                let (etx, mut erx) = tokio::sync::mpsc::channel(8);
                let eof = tokio_util::sync::CancellationToken::new();
                let reader = Chunked {
                    data,
                    at: 0,
                    chunks,
                    next: 0,
                    yielded: false,
                    eof: eof.clone(),
                };
                let read = crate::mcp::stdio::read_lines(
                    reader,
                    tx,
                    etx,
                    (crate::mcp::stdio::Pending::default(), None),
                    eof,
                );
                let collect = async {
                    let (mut passed, mut rejected) = (0, Vec::new());
                    let (mut a, mut b) = (true, true);
                    while a || b {
                        tokio::select! {
                            m = rx.recv(), if a => match m { Some(_) => passed += 1, None => a = false },
                            r = erx.recv(), if b => match r { Some(r) => rejected.push(*r), None => b = false },
                        }
                    }
                    (passed, rejected)
                };
                let ((), out) = tokio::join!(read, collect);
                out
            })
        })
    }

    pub(super) fn stdio_framing(s: &Settings) -> Outcome {
        let lines = prop_oneof![
            8 => rpc_input(),
            1 => prop_oneof![Just(""), Just(" \t"), Just("\r")].prop_map(|s| Bytes(s.into())),
        ];
        let ends = prop_oneof![Just("\n"), Just("\r\n"), Just(""), Just("\n\n")];
        let stream = prop::collection::vec((lines, ends), 0..8).prop_map(|parts| {
            let mut v = Vec::new();
            for (l, e) in parts {
                v.extend_from_slice(&l.0);
                v.extend_from_slice(e.as_bytes());
            }
            v
        });
        // Now and then a line at or over the 1 MiB limit (`extra` bytes
        // over it), between good ones.
        let huge = (0..64usize, 0..3usize).prop_map(|(extra, at)| {
            let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".to_vec();
            let mut long = vec![b'x'; jsonrpc::MAX_MESSAGE_BYTES + extra];
            long.push(b'\n');
            let mut v = Vec::new();
            for i in 0..3 {
                v.extend_from_slice(if i == at { &long } else { &ping });
            }
            (v, Some(extra))
        });
        let data = prop_oneof![
            200 => stream.prop_map(|v| (v, None)),
            1 => huge,
        ];
        let chunks = prop_oneof![
            prop::collection::vec(0..80usize, 1..8),
            prop::collection::vec(1..100_000usize, 1..4),
        ];
        drive(
            "stdio_framing",
            s,
            (data.prop_map(|(v, huge)| (Bytes(v), huge)), chunks),
            |((data, huge), mut chunks)| {
                if huge.is_some() {
                    // An over-long line in chunks of 4 KiB and more: in tiny
                    // ones the debug build's read loop (26 000 rounds a
                    // MiB) would be timed, not the limit.
                    chunks.iter_mut().for_each(|c| *c = (*c).max(1) * 4096);
                }
                let (passed, rejected) = frame(data.0, chunks);
                if let Some(extra) = huge {
                    let refused = rejected
                        .iter()
                        .any(|r| r.error.message.contains("larger than"));
                    assert_eq!(
                        refused,
                        extra > 0,
                        "a line {extra} bytes over the limit: {rejected:?}"
                    );
                    assert_eq!(passed, 2, "the pings around it pass");
                }
            },
        )
    }

    const URI_WORDS: &[&str] = &[
        "context://",
        "snapshot",
        "windows",
        "windows/",
        "active",
        "media",
        "session",
        "power",
        "network",
        "notifications",
        "vocabulary",
        "history",
        "history?",
        "provided/",
        "document",
        "selection",
        "task",
        "x-",
        "since=",
        "until=",
        "app=",
        "&",
        "2026-11-22T09:00:00Z",
        "2026-11-22T09:00:00%2B01:00",
        "9999-12-31T23:59:59Z",
        "0000-01-01T00:00:00+23:59",
        "%20",
        "%C3%A9",
        "%ED%A0%80",
        "%0A",
    ];

    const URI_SEEDS: &[&str] = &[
        "context://snapshot",
        "context://windows",
        "context://windows/active",
        "context://windows/w1",
        "context://media",
        "context://notifications",
        "context://vocabulary",
        "context://history",
        "context://history?since=2026-11-22T09:00:00Z&until=2026-11-22T10:00:00Z&app=org.gnome.TextEditor",
        "context://history?app=exe%3A%2Fusr%2Fbin%2Ffoot",
        "context://provided/document",
        "context://provided/x-my-kind",
    ];

    pub(super) fn resource_uri(s: &Settings) -> Outcome {
        use crate::mcp::resources::Res;
        drive("resource_uri", s, input(URI_SEEDS, URI_WORDS), |b| {
            let uri = b.text();
            let Some(res) = Res::parse(&uri) else { return };
            let again = res.uri();
            assert_eq!(
                Res::parse(&again).as_ref(),
                Some(&res),
                "{uri} is {res:?}, written {again}"
            );
            let _ = (res.categories(), res.mime(), res.listing());
            if let Res::History(p) = &res {
                let now = chrono::Utc::now();
                let _ = crate::mcp::timeline::period(
                    p.since.as_deref(),
                    p.until.as_deref(),
                    chrono::Duration::hours(24),
                    now,
                );
            }
        })
    }

    const CATEGORY_WORDS: &[&str] = &[
        "windows",
        "windows.titles",
        "media",
        "media.playback",
        "media.capture",
        "session",
        "power",
        "network",
        "network.ssid",
        "notifications",
        "notifications.bodies",
        "actions.notify",
        "provided.",
        "provided.document",
        "provided.x-foo",
        "provided.*",
        "*",
        "once",
        "always",
        "duration",
        "deny",
        "cancel",
        "exe:/usr/bin/foot",
        "token:",
        "org.gnome.TextEditor",
        "1700000000000:5",
        "-9223372036854775808:9223372036854775807",
    ];

    const TIMES: &[i64] = &[
        0,
        1,
        -1,
        i64::MAX,
        i64::MIN,
        1_700_000_000,
        8_210_266_876_799,
        8_210_266_876_800,
        -8_334_601_228_800,
        -8_334_601_228_801,
        315_360_000,
        315_360_001,
    ];

    fn time() -> BoxedStrategy<i64> {
        prop_oneof![proptest::sample::select(TIMES), any::<i64>()].boxed()
    }

    fn word() -> BoxedStrategy<String> {
        input(CATEGORY_WORDS, CATEGORY_WORDS)
            .prop_map(|b| b.text().into_owned())
            .boxed()
    }

    pub(super) fn dbus_args(s: &Settings) -> Outcome {
        let duration = prop_oneof![
            Just(Dur::None),
            any::<u32>().prop_map(Dur::U32),
            any::<i32>().prop_map(Dur::I32),
            any::<u64>().prop_map(Dur::U64),
            time().prop_map(Dur::I64),
            any::<bool>().prop_map(Dur::Bool),
        ];
        drive(
            "dbus_args",
            s,
            (
                word(),
                prop::collection::vec(word(), 0..4),
                (time(), time()),
                duration,
            ),
            |(w, list, (a, b), d)| {
                use crate::dbus::{agent, consent1, context1, history1};
                if let Ok(c) = consent1::category_arg(&w) {
                    assert_eq!(
                        c.to_string().parse::<crate::model::Category>().ok(),
                        Some(c)
                    );
                }
                let _ = consent1::app_arg(&w);
                let _ = crate::model::AppId::from_exe(&w);
                let _ = crate::model::AppId::from_token(&w);
                let _ = crate::model::Category::provided(&w);
                let _ = consent1::time_arg("since", a);
                let now = chrono::Utc::now();
                let _ = history1::period_args((a, b), now - chrono::Duration::hours(1), now);
                let _ = history1::kinds_for(&list);
                let _ = crate::core::history::parse_cursor(&w);
                let _ = context1::parse_categories(&list);
                let mut options = HashMap::new();
                if let Some(d) = d.variant() {
                    options.insert("duration_s".to_owned(), d);
                }
                let _ = agent::parse_answer(&w, &options);
                let _ = crate::core::consent::Answer::parse(&w, Some(a));
            },
        )
    }

    /// The `duration_s` of an answer's `a{sv}` options, of any type.
    #[derive(Debug, Clone)]
    enum Dur {
        None,
        U32(u32),
        I32(i32),
        U64(u64),
        I64(i64),
        Bool(bool),
    }

    impl Dur {
        fn variant(&self) -> Option<zbus::wire::OwnedVariant> {
            use zbus::wire::OwnedVariant;
            Some(match *self {
                Dur::None => return None,
                Dur::U32(n) => OwnedVariant::from(n),
                Dur::I32(n) => OwnedVariant::from(n),
                Dur::U64(n) => OwnedVariant::from(n),
                Dur::I64(n) => OwnedVariant::from(n),
                Dur::Bool(b) => OwnedVariant::from(b),
            })
        }
    }

    const ENTRY_WORDS: &[&str] = &[
        "@context",
        "@type",
        "https://contextd.org/vocabulary",
        "name",
        "text",
        "url",
        "title",
        "length",
        "isPartOf",
        "encodingFormat",
        "dateModified",
        "startDate",
        "endDate",
        "due",
        "status",
        "attendees",
        "email",
        "location",
        "geo",
        "accuracy",
        "channel",
        "DigitalDocument",
        "Quotation",
        "Action",
        "Event",
        "Person",
        "Place",
        "ActiveActionStatus",
        "CompletedActionStatus",
        "2026-11-22T09:00:00Z",
        "file:///home/u/a.txt",
        "text/plain",
    ];

    const ENTRY_SEEDS: &[&str] = &[
        r#"{"name":"report.odt","url":"file:///home/u/report.odt","encodingFormat":"application/vnd.oasis.opendocument.text"}"#,
        r#"{"text":"hello world"}"#,
        r#"{"name":"Write the report","status":"ActiveActionStatus","due":"2026-11-23T17:00:00Z"}"#,
        r#"{"name":"Standup","startDate":"2026-11-22T09:00:00Z","endDate":"2026-11-22T09:15:00Z","attendees":[{"name":"A","email":"a@example.org"}]}"#,
        r#"{"name":"Ada","email":"ada@example.org"}"#,
        r#"{"name":"Office","geo":{"latitude":48.1,"longitude":11.5},"accuracy":20}"#,
        r#"{"@context":"https://contextd.org/vocabulary","@type":"DigitalDocument","name":"x"}"#,
        r##"{"channel":"#general","text":"hi"}"##,
    ];

    pub(super) fn provider_entry(s: &Settings) -> Outcome {
        let kinds = prop_oneof![
            4 => proptest::sample::select(&["document", "selection", "task", "event", "person", "location"][..])
                .prop_map(str::to_owned),
            1 => "x-[a-z0-9-]{0,8}",
            1 => ".{0,10}",
        ];
        let data = prop_oneof![
            3 => input(ENTRY_SEEDS, ENTRY_WORDS),
            1 => json(ENTRY_WORDS).prop_map(|v| Bytes(v.to_string().into_bytes())),
        ];
        drive("provider_entry", s, (kinds, data), |(kind, data)| {
            let _ = crate::core::vocabulary::check_kind(&kind);
            if let Ok(v) = crate::core::vocabulary::check_entry(&kind, &data.text()) {
                let _ = crate::core::vocabulary::title(&crate::model::ProvidedData::new(&v));
            }
        })
    }

    const TOML_WORDS: &[&str] = &[
        "[[grant]]",
        "[grant]",
        "app",
        "categories",
        "expires",
        " = ",
        "\"\"\"",
        "'''",
        "2026-12-31T00:00:00Z",
        "2026-12-31",
        "00:00:00",
        "1979-05-27T07:32:00-08:00",
        "inf",
        "nan",
        "0x7f",
        "1_000",
        "[sources]",
        "disabled",
        "[sources.v4l2]",
        "dir",
        "[consent]",
        "undecided",
        "ask",
        "prompt_timeout_s",
        "cooldown_s",
        "audit_days",
        "agents",
        "[history]",
        "enabled",
        "days",
        "[mcp]",
        "bridge",
        "[mcp.http]",
        "listen",
        "127.0.0.1:8765",
        "[::1]:0",
        "allow_remote",
        "allowed_hosts",
        "allowed_origins",
        "responses",
        "json",
        "sse",
        "conformance",
        "[dashboard]",
        "windows",
        "provided.*",
        "*",
    ];

    const POLICY_SEEDS: &[&str] = &[
        "[[grant]]\napp = \"org.gnome.TextEditor\"\ncategories = [\"windows\", \"windows.titles\"]\nexpires = \"2026-12-31T00:00:00Z\"\n",
        "[[grant]]\napp = \"exe:/usr/bin/busctl\"\ncategories = [\"*\"]\n\n[[grant]]\napp = \"b\"\ncategories = [\"provided.*\", \"provided.x-a\"]\nexpires = 2026-12-31T00:00:00Z\n",
        "# nothing granted\n",
    ];

    pub(super) fn policy_toml(s: &Settings) -> Outcome {
        drive("policy_toml", s, input(POLICY_SEEDS, TOML_WORDS), |b| {
            let now = chrono::Utc::now();
            match crate::core::policy::Policy::parse(&b.text(), "policy.toml") {
                Ok(p) => {
                    let _ = p.next_expiry(now);
                    let apps: Vec<_> = p.apps().map(|(a, _)| a.clone()).collect();
                    for a in &apps {
                        for c in crate::model::Category::fixed() {
                            let _ = p.allows(a, c, now);
                        }
                    }
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        })
    }

    const CONFIG_SEEDS: &[&str] = &[
        "[sources]\ndisabled = [\"wayland\", \"v4l2\"]\n\n[sources.v4l2]\ndir = \"/dev\"\n",
        "[consent]\nundecided = \"ask\"\nprompt_timeout_s = 60\ncooldown_s = 30\naudit_days = 90\n",
        "[mcp]\nbridge = \"/usr/bin/contextctl\"\n\n[mcp.http]\nlisten = \"127.0.0.1:8765\"\nallowed_hosts = [\"a.local\"]\nallowed_origins = [\"http://a.local\"]\nresponses = \"json\"\n",
        "[dashboard]\nenabled = true\nlisten = \"[::1]:0\"\n\n[history]\n",
    ];

    pub(super) fn config_toml(s: &Settings) -> Outcome {
        drive("config_toml", s, input(CONFIG_SEEDS, TOML_WORDS), |b| {
            match crate::config::ConfigFile::parse(&b.text(), "config.toml".into()) {
                Ok(c) => {
                    if let Some(h) = &c.mcp.http {
                        let _ = crate::mcp::http::check_listen(h);
                    }
                    let _ = crate::dashboard::check(&c.dashboard);
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        })
    }

    #[cfg(feature = "replay")]
    const REPLAY_WORDS: &[&str] = &[
        "type",
        "source-status",
        "window",
        "window-closed",
        "focus",
        "windows-reset",
        "stream",
        "stream-removed",
        "streams-reset",
        "session",
        "power",
        "network",
        "notification",
        "notification-closed",
        "provided",
        "provided-removed",
        "clock",
        "sleep_ms",
        "id",
        "app_id",
        "title",
        "states",
        "activated",
        "kind",
        "playback",
        "microphone",
        "camera",
        "screen",
        "pid",
        "state",
        "running",
        "active",
        "locked",
        "at",
        "source",
        "available",
        "id_prefix",
        "context",
        "data",
        "owner",
        "3600000",
        "3600001",
        "2026-11-22T09:00:00Z",
    ];

    #[cfg(feature = "replay")]
    const REPLAY_SEEDS: &[&str] = &[
        r#"{"type": "clock", "at": "2026-11-22T09:00:00Z"}"#,
        r#"{"type": "focus", "id": "w1"}"#,
        r#"{"type": "focus"}"#,
        r#"{"type": "window", "window": {"id": "w1", "app_id": "org.gnome.TextEditor", "title": "T-1"}}"#,
        r#"{"type": "window-closed", "id": "w1"}"#,
        r#"{"type": "windows-reset"}"#,
        r#"{"type": "session", "session": {"active": true, "locked": false}}"#,
        r#"{"type": "stream", "stream": {"id": "pw-1-5", "kind": "microphone", "app_id": "exe:/usr/bin/pw-record", "pid": 42, "state": "running"}}"#,
        r#"{"type": "stream-removed", "id": "pw-1-5"}"#,
        r#"{"type": "streams-reset", "id_prefix": "pw-1-"}"#,
        r#"{"type": "source-status", "source": "wayland", "available": false, "error": "gone"}"#,
        r#"{"type": "power", "power": null}"#,
        r#"{"type": "provided-removed", "app_id": "org.a", "kind": "document"}"#,
        r#"{"sleep_ms": 5}"#,
        "# a comment",
        "   ",
    ];

    #[cfg(feature = "replay")]
    pub(super) fn replay_line(s: &Settings) -> Outcome {
        drive(
            "replay_line",
            s,
            (any::<usize>(), input(REPLAY_SEEDS, REPLAY_WORDS)),
            |(n, b)| {
                if let Err(e) = crate::sources::replay::parse_line(n, &b.text()) {
                    let _ = e.to_string();
                }
            },
        )
    }

    const DESKTOP_WORDS: &[&str] = &[
        "[Desktop Entry]",
        "[Desktop Action new]",
        "Name",
        "Name[de]",
        "Icon",
        "Type",
        "Application",
        "Link",
        "Hidden",
        "true",
        "false",
        "StartupWMClass",
        "Exec",
        "=",
        "\\s",
        "\\n",
        "\\t",
        "\\r",
        "\\\\",
        "\\",
        "\n",
        "#",
    ];

    const DESKTOP_SEEDS: &[&str] = &[
        "[Desktop Entry]\nType=Application\nName=Text Editor\nIcon=org.gnome.TextEditor\nStartupWMClass=gnome-text-editor\nExec=gnome-text-editor %U\n\n[Desktop Action new]\nName=New\n",
        "# comment\n[Desktop Entry]\nName=A\\sB\\nC\\\\\nType=Application\nHidden=false\n",
        "[Desktop Entry]\nType=Application\nName=Gone\nHidden=true\n",
    ];

    const CALENDAR_WORDS: &[&str] = &[
        "BEGIN:VEVENT\n",
        "END:VEVENT\n",
        "BEGIN:VTODO\n",
        "END:VTODO\n",
        "DTSTART",
        "DTEND",
        "RRULE:",
        "EXDATE",
        "RECURRENCE-ID",
        ";TZID=",
        "Europe/Berlin",
        "America/New_York",
        "/freeassociation.sourceforge.net/",
        "../../etc/passwd",
        ";VALUE=DATE",
        "FREQ=",
        "DAILY",
        "WEEKLY",
        "MONTHLY",
        "YEARLY",
        "SECONDLY",
        ";INTERVAL=",
        ";COUNT=",
        ";UNTIL=",
        ";BYDAY=",
        "-1FR",
        "1MO",
        ";BYMONTHDAY=",
        "-31",
        ";BYMONTH=2",
        ";BYSETPOS=",
        ";BYWEEKNO=",
        ";BYYEARDAY=",
        ";BYHOUR=",
        ";WKST=SU",
        "20261207T100000",
        "20261207T100000Z",
        "20260329T023000",
        "20261207",
        "00010101T000000",
        "99991231T235959",
        "DURATION:",
        "PT1H",
    ];

    const CALENDAR_SEEDS: &[&str] = &[
        "BEGIN:VEVENT\nUID:s\nDTSTART;TZID=/freeassociation.sourceforge.net/Europe/Berlin:20261102T100000\nDTEND;TZID=Europe/Berlin:20261102T103000\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;INTERVAL=2\nEXDATE;TZID=Europe/Berlin:20261207T100000\nSUMMARY:Weekly\nEND:VEVENT",
        "BEGIN:VEVENT\nUID:m\nDTSTART:20260105T090000Z\nDURATION:PT30M\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;COUNT=40\nEND:VEVENT",
        "BEGIN:VEVENT\nUID:y\nDTSTART;VALUE=DATE:19801210\nRRULE:FREQ=YEARLY;BYMONTH=12;BYDAY=-1SU\nEXDATE;VALUE=DATE:20261227\nEND:VEVENT",
        "BEGIN:VEVENT\nUID:n\nDTSTART;TZID=America/New_York:20260308T023000\nRRULE:FREQ=DAILY;BYMONTHDAY=31;BYMONTH=2;UNTIL=20301231T000000Z\nEND:VEVENT",
        "BEGIN:VTODO\nUID:t\nDUE;TZID=Europe/Berlin:20261208T090000\nSUMMARY:Task\nEND:VTODO",
    ];

    /// One object of a calendar as the source reads it, at a fixed time.
    pub(super) fn calendar_object(s: &Settings) -> Outcome {
        let now = chrono::DateTime::from_timestamp(1_796_000_000, 0).unwrap_or_default();
        drive(
            "calendar_object",
            s,
            input(CALENDAR_SEEDS, CALENDAR_WORDS),
            |b| {
                let _ = crate::sources::calendar::read_for_fuzz(&[b.text().into_owned()], now);
            },
        )
    }

    /// A zone file (a damaged system file is an unknown zone).
    pub(super) fn tzif(s: &Settings) -> Outcome {
        use crate::sources::calendar::tzif::{Tzif, Zone};
        static SEEDS: std::sync::LazyLock<Vec<Vec<u8>>> = std::sync::LazyLock::new(|| {
            [
                "Europe/Berlin",
                "America/New_York",
                "Australia/Sydney",
                "UTC",
            ]
            .iter()
            .filter_map(|z| std::fs::read(format!("/usr/share/zoneinfo/{z}")).ok())
            .collect()
        });
        let seeds: Vec<Vec<u8>> = if SEEDS.is_empty() {
            vec![b"TZif2".to_vec()]
        } else {
            SEEDS.clone()
        };
        drive(
            "tzif",
            s,
            (
                proptest::sample::select(seeds),
                prop::collection::vec(edit(&["TZif", "\n", "CET-1CEST,M3.5.0,M10.5.0/3"]), 0..6),
            )
                .prop_map(|(seed, edits)| Bytes(apply(seed, &edits))),
            |b| {
                if let Ok(z) = Tzif::parse(&b.0) {
                    let z = Zone::Tz(std::sync::Arc::new(z));
                    for t in [i64::MIN, -1, 0, 1_774_746_000, 4_102_444_800, i64::MAX] {
                        if let Some(d) = chrono::DateTime::from_timestamp(t, 0) {
                            let _ = z.to_utc(z.to_local(d));
                        }
                    }
                }
            },
        )
    }

    pub(super) fn desktop_entry(s: &Settings) -> Outcome {
        drive(
            "desktop_entry",
            s,
            (".{0,16}", input(DESKTOP_SEEDS, DESKTOP_WORDS)),
            |(id, b)| {
                let _ = crate::desktop_entry::parse(&id, &b.text());
            },
        )
    }

    const PROP_KEYS: &[&str] = &[
        "media.class",
        "media.name",
        "media.role",
        "node.name",
        "node.description",
        "device.api",
        "device.id",
        "client.id",
        "target.object",
        "application.name",
        "application.id",
        "application.process.binary",
        "application.process.id",
        "pipewire.sec.pid",
        "pipewire.access.portal.app_id",
        "object.serial",
        "media.title",
    ];

    const PROP_VALUES: &[&str] = &[
        "Stream/Output/Audio",
        "Stream/Output/Video",
        "Stream/Input/Audio",
        "Stream/Input/Video",
        "Video/Source",
        "Video/Source/Virtual",
        "Audio/Sink",
        "meta-screen-cast-src",
        "gnome-shell",
        "kwin-screencast-1",
        "xdpw-stream-ABC123",
        "xdpw-stream",
        "xdph-streaming-0",
        "xdg-desktop-portal-gnome",
        "Screen",
        "Camera",
        "Music",
        "v4l2",
        "libcamera",
        "42",
        "0",
        "-1",
        "4294967296",
        "1",
        "2",
        "3",
        "org.example.App",
        "",
        "firefox",
    ];

    fn props() -> BoxedStrategy<BTreeMap<String, String>> {
        let key = prop_oneof![
            6 => proptest::sample::select(PROP_KEYS).prop_map(str::to_owned),
            1 => ".{0,8}",
        ];
        let value = prop_oneof![
            6 => proptest::sample::select(PROP_VALUES).prop_map(str::to_owned),
            1 => ".{0,300}",
        ];
        prop::collection::btree_map(key, value, 0..8).boxed()
    }

    pub(super) fn pipewire_props(s: &Settings) -> Outcome {
        use crate::model::StreamState;
        use crate::sources::pipewire::classify;
        use crate::sources::pipewire::tracker::{Obs, Tracker};
        let id = 0..6u32;
        let state = prop_oneof![
            Just(None),
            Just(Some(StreamState::Running)),
            Just(Some(StreamState::Idle)),
            Just(Some(StreamState::Suspended)),
            Just(Some(StreamState::Other)),
        ];
        let obs = prop_oneof![
            4 => (id.clone(), prop::option::of(props()), state)
                .prop_map(|(id, props, state)| Obs::Node { id, props, state }),
            2 => (id.clone(), props()).prop_map(|(id, props)| Obs::NodeGlobal { id, props }),
            2 => (id.clone(), props()).prop_map(|(id, props)| Obs::Client { id, props }),
            1 => (id.clone(), props()).prop_map(|(id, props)| Obs::Device { id, props }),
            2 => (id.clone(), id.clone(), id.clone())
                .prop_map(|(id, output, input)| Obs::Link { id, output, input }),
            1 => id.prop_map(|id| Obs::Removed { id }),
        ];
        drive(
            "pipewire_props",
            s,
            prop::collection::vec(obs, 0..16),
            |seq| {
                let mut t = Tracker::new(
                    "pw-1-".into(),
                    Box::new(|pid| {
                        let app = match pid % 3 {
                            0 => "exe:/usr/libexec/xdg-desktop-portal".to_owned(),
                            1 => format!("org.example.App{pid}"),
                            _ => return None,
                        };
                        crate::model::AppId::new(app).ok()
                    }),
                );
                let now = chrono::Utc::now();
                for o in seq {
                    if let Obs::Node { props: Some(p), .. } = &o {
                        let role = classify::node_role(p, None);
                        let _ = classify::stream_kind(role, p, &[role]);
                        let _ = classify::video_capture_kind(p, &[role]);
                    }
                    let _ = t.observe(o, now);
                }
            },
        )
    }

    const FORM_WORDS: &[&str] = &[
        "app",
        "category",
        "decision",
        "csrf",
        "until",
        "=",
        "&",
        "+",
        "%",
        "%2",
        "%26",
        "%3D",
        "%C3%A9",
        "%FF",
        "%ED%A0%80",
        "contextd_dashboard",
        ";",
    ];

    const FORM_SEEDS: &[&str] = &[
        "app=org.gnome.TextEditor&category=windows&decision=allow&csrf=abc",
        "app=exe%3A%2Fusr%2Fbin%2Ffoot&until=2026-12-31T00%3A00&decision=deny+for+now",
        "contextd_dashboard=abc; other=1",
    ];

    pub(super) fn dashboard_form(s: &Settings) -> Outcome {
        drive("dashboard_form", s, input(FORM_SEEDS, FORM_WORDS), |b| {
            let _ = crate::dashboard::form_pairs(&b.0);
            if let Ok(v) = http::HeaderValue::from_bytes(&b.0) {
                let mut h = http::HeaderMap::new();
                h.append(http::header::COOKIE, v);
                let _ = crate::dashboard::cookies(&h, crate::dashboard::COOKIE).count();
            }
        })
    }

    /// The token store of the HTTP target: one token, `ctxd_fuzz`, and
    /// one that expired, `ctxd_old`.
    #[derive(Debug)]
    struct OneToken;

    impl crate::core::tokens::TokenStore for OneToken {
        fn create<'a>(
            &'a self,
            _: &'a str,
            _: Option<chrono::DateTime<chrono::Utc>>,
        ) -> crate::core::consent::BoxFut<'a, Result<String, crate::core::tokens::TokenError>>
        {
            Box::pin(async { Err(crate::core::tokens::TokenError::Random) })
        }
        fn list(&self) -> Vec<crate::model::admin::TokenInfo> {
            Vec::new()
        }
        fn revoke<'a>(
            &'a self,
            name: &'a str,
        ) -> crate::core::consent::BoxFut<'a, Result<(), crate::core::tokens::TokenError>> {
            Box::pin(async move { Err(crate::core::tokens::TokenError::NoSuch(name.into())) })
        }
        fn verify(&self, presented: &str) -> crate::core::tokens::Presented {
            use crate::core::tokens::{Bearer, Presented};
            match presented {
                "ctxd_fuzz" => Presented::Live(Bearer::unrevocable("fuzz")),
                "ctxd_old" => Presented::Expired("old".into()),
                _ => Presented::Unknown,
            }
        }
        fn end_expired(&self) -> Vec<String> {
            Vec::new()
        }
        fn next_expiry(&self) -> Option<std::time::Duration> {
            None
        }
    }

    static GUARD: LazyLock<crate::mcp::http::Guard> = LazyLock::new(|| {
        let addr: std::net::SocketAddr = "127.0.0.1:8765".parse().expect("an address");
        let mut cfg = crate::config::McpHttpConfig::listen_on(addr);
        cfg.allowed_hosts = vec!["Example.local".into()];
        cfg.allowed_origins = vec!["http://Example.local/".into()];
        crate::mcp::http::Guard::new(
            crate::core::tokens::Tokens::new(Arc::new(OneToken), None),
            addr,
            &cfg,
            tokio_util::task::TaskTracker::new(),
        )
    });

    const HEADER_NAMES: &[&str] = &[
        "host",
        "origin",
        "authorization",
        "content-length",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "accept",
        "cookie",
    ];

    const HEADER_WORDS: &[&str] = &[
        "127.0.0.1",
        "127.0.0.1:8765",
        "localhost:8765",
        "[::1]:8765",
        "LOCALHOST:8765",
        "example.local",
        "http://localhost:8765",
        "http://localhost:8765/",
        "http://example.local",
        "null",
        "Bearer ctxd_fuzz",
        "Bearer ctxd_old",
        "bearer  ctxd_fuzz ",
        "Basic x",
        "ctxd_",
        "1048576",
        "1048577",
        "18446744073709551616",
        "+5",
        "application/json",
        "text/event-stream",
    ];

    const HEADER_SEEDS: &[&str] = &[
        "127.0.0.1:8765",
        "http://localhost:8765",
        "Bearer ctxd_fuzz",
        "Bearer ctxd_old",
        "1048576",
        "application/json, text/event-stream",
    ];

    pub(super) fn http_head(s: &Settings) -> Outcome {
        let method =
            proptest::sample::select(&["GET", "POST", "DELETE", "OPTIONS", "PUT", "post", "X"][..]);
        let uri = prop_oneof![
            proptest::sample::select(
                &[
                    "/mcp",
                    "/sse",
                    "/messages?sessionId=1",
                    "http://localhost:8765/mcp",
                    "*",
                    "//x"
                ][..]
            )
            .prop_map(|s| Bytes(s.into())),
            input(&["/mcp", "http://127.0.0.1:8765/mcp?x=1"], HEADER_WORDS),
        ];
        let header = (
            prop_oneof![
                6 => proptest::sample::select(HEADER_NAMES).prop_map(|s| Bytes(s.into())),
                1 => prop::collection::vec(any::<u8>(), 0..8).prop_map(Bytes),
            ],
            input(HEADER_SEEDS, HEADER_WORDS),
        );
        drive(
            "http_head",
            s,
            (method, uri, prop::collection::vec(header, 0..6)),
            |(method, uri, headers)| {
                let mut b = http::Request::builder().method(method).uri(&uri.0[..]);
                for (k, v) in &headers {
                    b = b.header(&k.0[..], &v.0[..]);
                }
                let Ok(req) = b.body(axum::body::Body::empty()) else {
                    return;
                };
                let _ = GUARD.head(&req);
            },
        )
    }
}

// ---------------------------------------------------------------------------
// Inputs the fuzzer found, kept.

mod regressions {
    use super::targets::{frame, screen_all};
    use crate::mcp::jsonrpc::MAX_MESSAGE_BYTES;

    /// A cursor of offset `usize::MAX` overflowed `offset + limit` in
    /// `tools::page` (a panic in a debug build, a wrapped next cursor in
    /// release).
    #[test]
    fn page_cursor_at_the_end_of_usize() {
        use crate::mcp::schema::{PageArgs, parse};
        use crate::mcp::tools::page;
        let cursor = crate::core::cursor::encode("windows", usize::MAX);
        let args = serde_json::json!({ "cursor": cursor });
        let args = parse::<PageArgs>(args.as_object().cloned()).expect("args");
        let (items, next) = page(vec![1, 2, 3], "windows", &args).expect("a page");
        assert!(items.is_empty());
        assert_eq!(next, None);
    }

    /// `check` passed array params that `screen` refused (fixed in
    /// `jsonrpc::check`).
    #[test]
    fn array_params_are_screened_alike() {
        screen_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"prompts/list","params":[null,"jsonrpc"]}"#,
        );
        screen_all(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["x"]}"#);
    }

    /// The stdio limit is the message's bytes, the newline aside: a line
    /// of exactly [`MAX_MESSAGE_BYTES`] is read (and refused as no JSON), a
    /// byte more is refused as too large; the lines around it pass.
    #[test]
    fn stdio_line_limit() {
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        for (extra, too_large) in [(0, false), (1, true)] {
            let mut data = ping.to_vec();
            data.extend(std::iter::repeat_n(b'x', MAX_MESSAGE_BYTES + extra));
            data.push(b'\n');
            data.extend_from_slice(ping);
            for chunks in [vec![4096], vec![1 << 20, 1], vec![0, 65536]] {
                let (passed, rejected) = frame(data.clone(), chunks);
                assert_eq!(passed, 2);
                assert_eq!(rejected.len(), 1, "{rejected:?}");
                assert_eq!(
                    rejected[0].error.message.contains("larger than"),
                    too_large,
                    "{rejected:?}"
                );
            }
        }
    }
}
