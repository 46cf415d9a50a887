//! Text from apps, as a prompt surface shows it: one function that every
//! surface uses (the notification, the consent agent's `Ask`,
//! `Consent1.ListPending`, the dashboard), so that no surface can forget
//! a rule.
//!
//! An app chooses its reason, an MCP host its name and a tool's
//! arguments, a sandboxed app the `Name` of its own desktop entry. Any of
//! them could be written to look like the system speaking: markup on a
//! notification server that renders it (`</b><a href=…>Verified by
//! GNOME</a>`), a newline that starts a line of its own ("Settings\n—
//! Verified by your system administrator"), a right-to-left override
//! (U+202E) that reverses what follows, or a text so long that the
//! buttons leave the screen. So, for display:
//! - every control character is removed and every line break (and tab)
//!   becomes one space: the text stays on one line;
//! - Unicode's bidirectional controls (U+202A–U+202E, U+2066–U+2069,
//!   U+200E, U+200F, U+061C) and the other characters that show nothing
//!   (zero-width spaces and joiners, the word joiner and invisible
//!   operators, the byte-order mark, tags) are removed;
//! - runs of spaces become one, and the ends are trimmed;
//! - the text is cut to a bound (in characters), with an ellipsis.
//!
//! Markup is escaped separately ([`markup`]) and only where a surface
//! renders it: a notification server that announces `body-markup`. A
//! surface that shows plain text (a GNOME Shell label, JSON) would show
//! the entities themselves.

/// The longest name shown (an app's, a host's, a tool's): characters.
pub(crate) const NAME_MAX: usize = 120;
/// The longest reason shown (an app's own words, an MCP call and its
/// arguments): characters.
pub(crate) const REASON_MAX: usize = 300;
/// The longest app id shown (an executable's path may be long).
pub(crate) const ID_MAX: usize = 200;

/// Characters that change how text around them is laid out or show
/// nothing at all: bidirectional controls (embeddings, overrides,
/// isolates, marks, the Arabic letter mark) and the invisible format
/// characters (zero-width space, non-joiner and joiner, word joiner and
/// invisible operators, byte-order mark, soft hyphen, tags).
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{AD}'
            | '\u{34F}'
            | '\u{61C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Whether `c` breaks a line or spaces like one (it becomes a space).
fn breaks(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\t' | '\u{B}' | '\u{C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// `s` for display: one line, without control, bidirectional or
/// invisible characters, at most `max` characters (the last of them an
/// ellipsis when cut). See the module's documentation.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)));
    let mut space = false;
    let mut count = 0usize;
    let mut cut = false;
    for c in s.chars() {
        let c = if breaks(c) || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c.is_control() || invisible(c) {
            continue;
        }
        if c == ' ' {
            space = count > 0;
            continue;
        }
        let need = usize::from(space) + 1;
        if count + need > max {
            cut = true;
            break;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    if cut && max > 0 {
        // Room for the ellipsis: drop the last character (and a space
        // that would then end the text).
        while count >= max {
            out.pop();
            count -= 1;
        }
        while out.ends_with(' ') {
            out.pop();
        }
        out.push('…');
    }
    out
}

/// `s` with the characters markup gives a meaning escaped as the Desktop
/// Notifications specification's markup (a subset of XML) wants them:
/// `&`, `<`, `>`, `"` and `'` as entities. For a text already made
/// [`one_line`].
pub(crate) fn markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` without the characters markup gives a meaning, for a place where
/// a server may render markup but entities would show as they are (a
/// notification's summary: plain text by the specification, yet some
/// servers parse it).
pub(crate) fn without_markup(s: &str) -> String {
    let t: String = s
        .chars()
        .filter(|c| !matches!(c, '&' | '<' | '>' | '"' | '\''))
        .collect();
    one_line(&t, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tester's texts: markup, a newline, a right-to-left override.
    #[test]
    fn attacks_become_one_plain_bounded_line() {
        let reason = "</b><a href=\"https://evil.example\">Verified by GNOME</a> <b>Click Always allow</b><span foreground=\"#00000000\">hidden</span>";
        let shown = markup(&one_line(reason, REASON_MAX));
        assert!(!shown.contains('<') && !shown.contains('>'), "{shown}");
        assert!(shown.starts_with("&lt;/b&gt;&lt;a href=&quot;https://evil.example&quot;&gt;"));
        let name = "Settings\n\u{202E}rotartsinimda metsys ruoy yb deifireV —";
        let n = one_line(name, NAME_MAX);
        assert_eq!(n, "Settings rotartsinimda metsys ruoy yb deifireV —");
        for bidi in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200E}', '\u{200F}', '\u{61C}',
        ] {
            assert_eq!(
                one_line(&format!("a{bidi}b"), 10),
                "ab",
                "{:X}",
                bidi as u32
            );
        }
        assert_eq!(
            one_line("a\r\n\tb\u{0}\u{7F}\u{9B}c\u{2028}d", 20),
            "a bc d"
        );
        assert_eq!(one_line("   ", 5), "");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis() {
        let long = "é".repeat(1000);
        let cut = one_line(&long, REASON_MAX);
        assert_eq!(cut.chars().count(), REASON_MAX);
        assert!(cut.ends_with('…'));
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("abcd", 3), "ab…");
        assert_eq!(one_line("ab cd", 4), "ab…");
        assert_eq!(one_line("abcd", 0), "");
    }

    #[test]
    fn a_summary_loses_markup_characters() {
        assert_eq!(without_markup("Tom & <b>Jerry</b>"), "Tom bJerry/b");
    }
}
