//! The scripted source, for tests and benchmarks only: `contextd --replay
//! FILE` feeds [`SourceEvent`]s from JSON lines.
//!
//! Each line is one event (`{"type": "focus", "id": "w2"}`, see
//! `core::event`), or `{"sleep_ms": N}` to pause. Blank lines and lines
//! starting with `#` are skipped. A bad line is logged with its number and
//! skipped; the rest still plays. FILE may be a FIFO: the source then keeps
//! reading whatever writers send, so a test can drive changes when it wants.

use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::SourceEvent;

pub(crate) const NAME: &str = "replay";

#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum LineError {
    #[error("line {line}: {message}")]
    Bad { line: usize, message: String },
}

/// What one line asks for.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Skip,
    Sleep(Duration),
    Event(Box<SourceEvent>),
}

pub(crate) fn parse_line(n: usize, text: &str) -> Result<Line, LineError> {
    let t = text.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(Line::Skip);
    }
    let bad = |message: String| LineError::Bad { line: n, message };
    let v: serde_json::Value = serde_json::from_str(t).map_err(|e| bad(e.to_string()))?;
    if let Some(ms) = v.get("sleep_ms") {
        let ms = ms.as_u64().filter(|ms| *ms <= 3_600_000).ok_or_else(|| {
            bad("sleep_ms must be a whole number of milliseconds up to 3600000".into())
        })?;
        return Ok(Line::Sleep(Duration::from_millis(ms)));
    }
    serde_json::from_value(v)
        .map(|e| Line::Event(Box::new(e)))
        .map_err(|e| bad(e.to_string()))
}

async fn status(tx: &mpsc::Sender<SourceEvent>, available: bool, error: Option<String>) {
    let _ = tx
        .send(SourceEvent::SourceStatus {
            source: NAME.into(),
            available,
            error,
        })
        .await;
}

async fn play<R: AsyncRead + Unpin>(
    reader: R,
    tx: &mpsc::Sender<SourceEvent>,
    cancel: &CancellationToken,
) {
    let mut lines = BufReader::new(reader).lines();
    let mut n = 0;
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            l = lines.next_line() => l,
        };
        let text = match next {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                status(tx, false, Some(format!("read error: {e}"))).await;
                return;
            }
        };
        n += 1;
        match parse_line(n, &text) {
            Ok(Line::Skip) => {}
            Ok(Line::Sleep(d)) => {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(d) => {}
                }
            }
            Ok(Line::Event(e)) => {
                if tx.send(*e).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(source = NAME, "{e}; line skipped");
                status(tx, true, Some(e.to_string())).await;
            }
        }
    }
}

/// Play `path` until it ends (regular file) or until `cancel` (FIFO).
pub(crate) async fn run(path: PathBuf, tx: mpsc::Sender<SourceEvent>, cancel: CancellationToken) {
    let shown = path.display().to_string();
    let is_fifo = match tokio::fs::metadata(&path).await {
        Ok(m) => m.file_type().is_fifo(),
        Err(e) => {
            tracing::error!(source = NAME, "{shown}: {e}");
            status(&tx, false, Some(format!("{shown}: {e}"))).await;
            return;
        }
    };
    status(&tx, true, None).await;
    if is_fifo {
        // Opened read-write so the FIFO never reports end-of-file when a
        // writer closes: the next writer simply continues the script.
        match tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&path)
        {
            Ok(rx) => play(rx, &tx, &cancel).await,
            Err(e) => status(&tx, false, Some(format!("{shown}: {e}"))).await,
        }
    } else {
        match tokio::fs::File::open(&path).await {
            Ok(f) => play(f, &tx, &cancel).await,
            Err(e) => status(&tx, false, Some(format!("{shown}: {e}"))).await,
        }
    }
    tracing::debug!(source = NAME, "replay finished");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_sleeps_and_reports_bad_lines() {
        assert_eq!(parse_line(1, "  "), Ok(Line::Skip));
        assert_eq!(parse_line(1, "# comment"), Ok(Line::Skip));
        assert_eq!(
            parse_line(1, r#"{"sleep_ms": 5}"#),
            Ok(Line::Sleep(Duration::from_millis(5)))
        );
        assert!(matches!(
            parse_line(1, r#"{"type":"focus","id":"w1"}"#),
            Ok(Line::Event(_))
        ));
        let e = parse_line(7, r#"{"type":"nope"}"#).expect_err("unknown type");
        assert!(e.to_string().starts_with("line 7:"), "{e}");
        assert!(parse_line(2, "{not json").is_err());
        assert!(parse_line(2, r#"{"sleep_ms": -1}"#).is_err());
    }
}
