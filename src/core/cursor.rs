//! The one page cursor of every paged list the publishers serve (MCP's
//! `list_windows`, `list_notifications`, provided entries by app id, the
//! same over D-Bus): opaque to readers (URL-safe base64 of
//! `list:position`), so that its form can change, and bound to the list
//! it pages, so that a cursor of one list is no position in another.
//! It tells no more than the page it ends (an offset, or the app id of
//! the page's last entry).

use std::fmt::Display;
use std::str::FromStr;

use base64::Engine;

/// A cursor that no page of this list returned: another list's, forged,
/// or not a cursor at all. Its text (the first 64 characters) is said
/// back, so that the reader sees what it sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cursor '{shown}'")]
pub(crate) struct InvalidCursor {
    shown: String,
}

impl InvalidCursor {
    pub(crate) fn of(cursor: &str) -> Self {
        Self {
            shown: cursor.chars().take(64).collect(),
        }
    }
}

/// The cursor of the page that starts after `position` in `list`.
pub(crate) fn encode(list: &str, position: impl Display) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{list}:{position}"))
}

/// Where a cursor of `list` points; a cursor of another list, or anything
/// [`encode`] did not make, is [`InvalidCursor`].
pub(crate) fn decode<P: FromStr>(list: &str, cursor: &str) -> Result<P, InvalidCursor> {
    let bad = || InvalidCursor::of(cursor);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix(list)
        .and_then(|rest| rest.strip_prefix(':'))
        .ok_or_else(bad)?
        .parse()
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_foreign_ones_fail() {
        let c = encode("windows", 50);
        assert_eq!(decode::<usize>("windows", &c), Ok(50));
        // Another list's cursor, one whose list only starts like ours, a
        // forged one and one that is no base64 all fail alike.
        assert!(decode::<usize>("notifications", &c).is_err());
        assert!(decode::<usize>("window", &c).is_err());
        let forged = encode("windows", "-1");
        assert!(decode::<usize>("windows", &forged).is_err());
        let e = decode::<usize>("windows", "!!");
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("invalid cursor '!!'".into())
        );
        let app = encode("provided.document", "org.example.App");
        assert_eq!(
            decode::<String>("provided.document", &app).as_deref(),
            Ok("org.example.App")
        );
        assert!(decode::<String>("provided.task", &app).is_err());
    }
}
