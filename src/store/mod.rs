//! The encrypted store (SQLCipher through sqlx) behind traits that `core`
//! owns. Filled in by the consent issue; until then decisions come from
//! policy.toml only and nothing is written to disk.
