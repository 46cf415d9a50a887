//! Sources: each turns its world into `core::SourceEvent`s and nothing
//! else. A missing source reports itself unavailable and retries; it never
//! takes the daemon down.

pub mod replay;
