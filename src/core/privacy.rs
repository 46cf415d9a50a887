//! What nobody means to share: private-browsing windows, password
//! managers, one-time codes and card numbers, and the user's own
//! never-share rules (`[privacy]`).
//!
//! Decided here, once, and applied where events enter the state
//! ([`super::state::State::apply`]): the live state, the change feed, the
//! history recorder and so every publisher (D-Bus methods and signals,
//! MCP tools, resources, prompts and completions, the dashboard, exports
//! of the timeline) only ever hold the cleaned value. Cleaning at the
//! entry, rather than in each view, means no reader path can forget it
//! and the secret is not even in the broker's memory after the event
//! passed. What was held back is said by a reason ([`Hidden`]), never by
//! the content: a window keeps its app id and loses its title
//! (`title_hidden`), a notification keeps the rest of its text with the
//! code replaced by [`CODE_MARKER`].
//!
//! A new rule applies at once to what the state holds
//! ([`super::state::State::set_privacy`]): titles and notifications it
//! matches are hidden and readers told by an ordinary change. A rule
//! removed cannot give back what was never kept: a window shows its title
//! again when its app next sends it.

use std::sync::{Arc, RwLock};

use crate::model::{Calendar, Hidden, Notification, RecentDocument, Window};

/// What replaces a one-time code, verification code, PIN or passcode.
pub(crate) const CODE_MARKER: &str = "[code hidden]";
/// What replaces a card number.
pub(crate) const CARD_MARKER: &str = "[card number hidden]";

pub(crate) use crate::model::privacy::{PrivacySettings, SENSITIVE_APPS};

/// Names that are a password manager only when they are the whole name
/// (a notification's claimed app name): "Secrets" is GNOME's, but
/// "secrets" inside another id is not.
const SENSITIVE_NAMES: &[&str] = &["secrets", "passwords", "authenticator"];

/// App ids of browsers whose every window is private (Tor Browser), or
/// that name their private instance (GNOME Web's incognito mode).
const PRIVATE_APP_IDS: &[&str] = &[
    "torbrowser",
    "tor browser",
    "tor-browser",
    "org.torproject",
    "incognito",
];

/// What private windows put in their titles, lowercased: Firefox and its
/// forks ("— Mozilla Firefox Private Browsing", "(Private Browsing)",
/// localised), Chromium and Chrome ("(Incognito)", localised), Edge
/// ("InPrivate"), Brave ("(Private)", "Private Tab"), Tor Browser.
const PRIVATE_TITLE_MARKERS: &[&str] = &[
    "private browsing",
    "privater modus",
    "navigation privée",
    "navegación privada",
    "(incognito)",
    "- incognito",
    "(inkognito)",
    "(incógnito)",
    "inprivate",
    "(private)",
    "private tab",
    "private window with tor",
    "— tor browser",
    "- tor browser",
];

/// Whether `hay` lowercased contains `needle` lowercased (as
/// `str::to_lowercase` lowercases both), without allocating when both are
/// ASCII: app ids and most titles are, and every window event asks this
/// of each pattern.
pub(crate) fn contains_lowercase(hay: &str, needle: &str) -> bool {
    if hay.is_ascii() && needle.is_ascii() {
        let (h, n) = (hay.as_bytes(), needle.as_bytes());
        return n.is_empty() || h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    hay.to_lowercase().contains(&needle.to_lowercase())
}

fn any_in(hay: &str, patterns: &[impl AsRef<str>]) -> bool {
    patterns.iter().any(|p| {
        let p = p.as_ref();
        !p.is_empty() && contains_lowercase(hay, p)
    })
}

/// The rule set in force: the built-in lists and the user's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    user: PrivacySettings,
}

impl Rules {
    pub(crate) fn new(user: PrivacySettings) -> Self {
        Rules {
            user: PrivacySettings::default().merged(&user),
        }
    }

    /// The user's rules in force.
    pub(crate) fn user(&self) -> &PrivacySettings {
        &self.user
    }

    /// Why nothing of `app` (an app id or a claimed name) is shared, if
    /// nothing is.
    pub(crate) fn app(&self, app: &str) -> Option<Hidden> {
        if any_in(app, SENSITIVE_APPS)
            || SENSITIVE_NAMES
                .iter()
                .any(|n| app.trim().eq_ignore_ascii_case(n))
        {
            Some(Hidden::SensitiveApp)
        } else if any_in(app, &self.user.apps) {
            Some(Hidden::UserRule)
        } else {
            None
        }
    }

    /// Why a title (a window's, a document's name) is never shared, if it
    /// is not.
    pub(crate) fn title(&self, title: &str) -> Option<Hidden> {
        if any_in(title, PRIVATE_TITLE_MARKERS) {
            Some(Hidden::PrivateWindow)
        } else if any_in(title, &self.user.titles) {
            Some(Hidden::UserRule)
        } else {
            None
        }
    }

    /// Why the title of window `w` is held back, if it is.
    ///
    /// The app rules are asked of both the app id the window claims and,
    /// where the compositor told the window's process, the kernel's name
    /// of that process ([`Window::process`]): a password manager that
    /// claims another app id is still the password manager, and the
    /// rules only ever hide, so a claim can add a rule's treatment but
    /// never take one away.
    pub(crate) fn window(&self, w: &Window) -> Option<Hidden> {
        let process = w.process.as_ref().map(|p| p.app_id.as_str());
        std::iter::once(w.app_id.as_str())
            .chain(process)
            .find_map(|app| {
                self.app(app)
                    .or_else(|| any_in(app, PRIVATE_APP_IDS).then_some(Hidden::PrivateWindow))
            })
            .or_else(|| self.title(&w.title))
    }

    /// Hold back `w`'s title when a rule says so: whether `w` changed.
    pub(crate) fn clean_window(&self, w: &mut Window) -> bool {
        let before = (w.title_hidden, w.title.is_empty());
        if w.title_hidden.is_none() {
            w.title_hidden = self.window(w);
        }
        if w.title_hidden.is_some() {
            w.title.clear();
        }
        before != (w.title_hidden, w.title.is_empty())
    }

    /// Hold back what the calendar must not show: an event whose title a
    /// never-share rule matches loses its title, place and attendees, a
    /// task its summary (each says why, `hidden`). Whether it changed.
    pub(crate) fn clean_calendar(&self, c: &mut Calendar) -> bool {
        let mut changed = false;
        for e in &mut c.events {
            if let Some(why) = e.title.as_deref().and_then(|t| self.title(t)) {
                e.hidden = Some(why);
                e.title = None;
                e.location = None;
                e.attendees.clear();
                changed = true;
            }
        }
        for t in &mut c.tasks {
            if let Some(why) = t.summary.as_deref().and_then(|s| self.title(s)) {
                t.hidden = Some(why);
                t.summary = None;
                changed = true;
            }
        }
        changed
    }

    /// Hold back what `n` must not show: all of its text when its app is
    /// never shared, else its codes and card numbers. Whether it changed.
    ///
    /// Action labels are content like the body (a label can carry the
    /// code: "Copy 482913"), so what they hide is said as the body's.
    pub(crate) fn clean_notification(&self, n: &mut Notification) -> bool {
        if let Some(why) = self.app(&n.app_name) {
            let changed = n.summary_hidden.is_none()
                || n.body_hidden.is_none()
                || !n.summary.is_empty()
                || !n.body.is_empty()
                || !n.actions.is_empty();
            n.summary.clear();
            n.body.clear();
            n.actions.clear();
            n.summary_hidden = Some(why);
            n.body_hidden = Some(why);
            return changed;
        }
        let words = speaks_of_codes(&n.summary)
            || speaks_of_codes(&n.body)
            || n.actions.iter().any(|a| speaks_of_codes(a));
        let mut changed = false;
        for (text, hidden) in [
            (&mut n.summary, &mut n.summary_hidden),
            (&mut n.body, &mut n.body_hidden),
        ] {
            if let Some((masked, why)) = mask(text, words) {
                *text = masked;
                hidden.get_or_insert(why);
                changed = true;
            }
        }
        for label in &mut n.actions {
            if let Some((masked, why)) = mask(label, words) {
                *label = masked;
                n.body_hidden.get_or_insert(why);
                changed = true;
            }
        }
        changed
    }

    /// Whether a recently used file may be shown: not one a never-shared
    /// app registered, nor one whose name a title rule matches.
    pub(crate) fn document_shown(&self, d: &RecentDocument) -> bool {
        d.app.as_deref().is_none_or(|a| self.app(a).is_none()) && self.title(&d.name).is_none()
    }
}

/// The rules in force, swapped whole when the user changes them.
#[derive(Debug, Default)]
pub(crate) struct Privacy {
    rules: RwLock<Arc<Rules>>,
}

impl Privacy {
    pub(crate) fn rules(&self) -> Arc<Rules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Put `rules` in force: whether they differ from those before.
    pub(crate) fn set(&self, rules: Rules) -> bool {
        let mut cur = self.rules.write().unwrap_or_else(|e| e.into_inner());
        if **cur == rules {
            return false;
        }
        *cur = Arc::new(rules);
        true
    }
}

/// Whether `text` speaks of a code: the words banks, shops and sign-ins
/// use in English, German, French and Spanish (compounds included:
/// "Bestätigungscode", "Sicherheitscode").
pub(crate) fn speaks_of_codes(text: &str) -> bool {
    let lower = text.to_lowercase();
    const PHRASES: &[&str] = &[
        "one-time",
        "one time",
        "two-factor",
        "two factor",
        "2-step",
        "sign in",
        "sign-in",
        "log in",
        "zwei-faktor",
        "mot de passe",
        "usage unique",
        "un solo uso",
        "único uso",
    ];
    if PHRASES.iter().any(|p| lower.contains(p)) {
        return true;
    }
    lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| {
            matches!(
                w,
                "otp"
                    | "totp"
                    | "pin"
                    | "pins"
                    | "tan"
                    | "mtan"
                    | "smstan"
                    | "pushtan"
                    | "2fa"
                    | "mfa"
                    | "nip"
                    | "clave"
            ) || w.ends_with("code")
                || w.ends_with("codes")
                || w.starts_with("código")
                || w.starts_with("codigo")
                || w.starts_with("verif")
                || w.starts_with("vérif")
                || w.starts_with("einmal")
                || w.starts_with("authentif")
                || w.starts_with("authenticat")
                || w.ends_with("passwort")
                || w.ends_with("kennwort")
                || w.ends_with("password")
                || w.starts_with("contraseña")
        })
}

/// Whether the digits pass the Luhn check (card numbers do).
fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut d = u32::from(*d);
        if i % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    sum.is_multiple_of(10)
}

/// `text` with its codes (when `words`: it, or the notification it is
/// part of, speaks of codes) and card numbers replaced by markers, and
/// the reason; `None` when nothing was replaced.
///
/// A code is a number of 4 to 8 digits standing alone (not part of a
/// word, a decimal, a date or a time), or two groups of 3 or 4 digits
/// ("123 456", "123-456"), with an optional prefix of up to three
/// capitals ("G-123456"). A card number is 13 to 19 digits, alone or in
/// groups of 4 to 6, starting with 2 to 6 (Visa, Mastercard, Amex,
/// Discover, …) and Luhn-valid, with or without code words.
pub(crate) fn mask(text: &str, words: bool) -> Option<(String, Hidden)> {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut why: Option<Hidden> = None;
    let mut i = 0;
    let prev_char = |at: usize| text[..at].chars().next_back();
    while i < b.len() {
        if !b[i].is_ascii_digit() || prev_char(i).is_some_and(|c| c.is_alphanumeric()) {
            i += 1;
            continue;
        }
        // Part of a number with a decimal point, a date or a time.
        let joined_before = i >= 2 && matches!(b[i - 1], b'.' | b',' | b':' | b'/');
        let joined_before = joined_before && b[i - 2].is_ascii_digit();
        let digits_start = i;
        let mut start = i;
        if i >= 2 && b[i - 1] == b'-' {
            let mut k = i - 1;
            while k > 0 && b[k - 1].is_ascii_uppercase() {
                k -= 1;
            }
            let letters = i - 1 - k;
            if (1..=3).contains(&letters) && !prev_char(k).is_some_and(|c| c.is_alphanumeric()) {
                start = k;
            }
        }
        let mut groups: Vec<usize> = Vec::new();
        let mut digits: Vec<u8> = Vec::new();
        let mut j = i;
        loop {
            let g = j;
            while j < b.len() && b[j].is_ascii_digit() {
                digits.push(b[j] - b'0');
                j += 1;
            }
            groups.push(j - g);
            if j + 1 < b.len() && matches!(b[j], b' ' | b'-') && b[j + 1].is_ascii_digit() {
                j += 1;
            } else {
                break;
            }
        }
        let end = j;
        let joined_after = end + 1 < b.len()
            && matches!(b[end], b'.' | b',' | b':' | b'/')
            && b[end + 1].is_ascii_digit();
        let word_after = text[end..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric());
        i = end;
        if joined_before || joined_after || word_after {
            continue;
        }
        let n = digits.len();
        let card = (13..=19).contains(&n)
            && (2..=6).contains(&digits[0])
            && (groups.len() == 1 || groups.iter().all(|g| (4..=6).contains(g)))
            && luhn(&digits);
        let code = words
            && match groups.as_slice() {
                [g] => (4..=8).contains(g),
                [a, b] => (3..=4).contains(a) && (3..=4).contains(b),
                _ => false,
            };
        let (marker, reason, from) = if card {
            (CARD_MARKER, Hidden::CardNumber, digits_start)
        } else if code {
            (CODE_MARKER, Hidden::Code, start)
        } else {
            continue;
        };
        out.push_str(&text[copied..from]);
        out.push_str(marker);
        copied = end;
        // A card number weighs more than a code: said when either is.
        if why != Some(Hidden::CardNumber) {
            why = Some(reason);
        }
    }
    let why = why?;
    out.push_str(&text[copied..]);
    Some((out, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Urgency, WindowStates};

    fn masked(text: &str) -> String {
        let words = speaks_of_codes(text);
        mask(text, words).map_or_else(|| text.to_owned(), |(m, _)| m)
    }

    /// The attack: codes as banks, shops and sign-ins word them, in
    /// English, German, French and Spanish, reach no reader; the words
    /// around them do.
    #[test]
    fn codes_in_many_phrasings_are_replaced_and_the_rest_stays() {
        for (text, code) in [
            ("G-482913 is your Google verification code", "G-482913"),
            ("339120 is your Amazon OTP. Do not share it.", "339120"),
            ("Your verification code is 771203", "771203"),
            ("Your login code: 5521", "5521"),
            ("Use 884 211 to sign in to Example", "884 211"),
            ("Your one-time passcode is 123-456", "123-456"),
            ("Your PIN is 9071", "9071"),
            ("Security code 40581327 for your payment", "40581327"),
            ("2FA: 662091", "662091"),
            ("Ihr Bestätigungscode lautet 583920", "583920"),
            ("Ihre mTAN: 729164", "729164"),
            ("Dein Einmalpasswort ist 118822", "118822"),
            ("Votre code de vérification est 447812", "447812"),
            ("Mot de passe à usage unique : 660021", "660021"),
            ("Tu código de verificación es 902345", "902345"),
            ("Su clave de acceso: 315577", "315577"),
            ("Código: 7741", "7741"),
        ] {
            let out = masked(text);
            assert!(!out.contains(code), "{text:?} -> {out:?}");
            assert!(out.contains(CODE_MARKER), "{text:?} -> {out:?}");
            let rest = text.replace(code, "");
            let kept = rest.split_whitespace().next().unwrap_or("");
            assert!(out.contains(kept), "{text:?} -> {out:?} lost {kept:?}");
        }
    }

    /// Text around the digits in any script: no panic on a character
    /// boundary, and digits of other scripts or inside words are left.
    #[test]
    fn any_text_is_scanned_without_breaking_characters() {
        for text in [
            "é1234 code",
            "code: ४८२९१३",
            "—123456— code",
            "Код 123456: your code",
            "code 12345６",
            "🔑 code 778899 🔑",
            "code-",
            "code 1",
            "",
            "G-",
            "AB-12 code",
        ] {
            let _ = mask(text, true);
        }
        assert_eq!(masked("🔑 code 778899 🔑"), "🔑 code [code hidden] 🔑");
        assert_eq!(masked("—123456— code"), "—[code hidden]— code");
        assert_eq!(masked("é1234 code"), "é1234 code");
    }

    /// Ordinary numbers stay: counts, times, dates, amounts, order and
    /// build numbers in text that speaks of no code.
    #[test]
    fn ordinary_numbers_stay() {
        for text in [
            "3 new messages",
            "Meeting at 10:30 in room 4012",
            "Order 12345678 has shipped",
            "Your parcel 4711 arrives on 2026-12-07",
            "Invoice of 1,234.56 EUR paid",
            "Build 20261206 passed",
            "Call from +49 170 1234567",
            "Version 1.85.2 is available",
            "Battery at 15%",
            "Pay €2500 by 12/2026",
            "Meeting code review at 14:00",
        ] {
            assert_eq!(masked(text), text, "{text:?}");
        }
        // A code word alone does not make a time or a date a code.
        assert_eq!(
            masked("Your code expires at 10:30 on 2026-12-07"),
            "Your code expires at 10:30 on 2026-12-07"
        );
        // Digits inside a word are no code.
        assert_eq!(
            masked("Your code for abc123456x"),
            "Your code for abc123456x"
        );
    }

    #[test]
    fn luhn_valid_card_numbers_are_replaced_with_or_without_code_words() {
        for (text, card) in [
            (
                "Card 4111 1111 1111 1111 was charged",
                "4111 1111 1111 1111",
            ),
            ("Paid with 5555555555554444 today", "5555555555554444"),
            ("Amex 3782-822463-10005 added", "3782-822463-10005"),
        ] {
            let (out, why) = mask(text, false).expect("a card");
            assert!(!out.contains(card), "{out}");
            assert!(out.contains(CARD_MARKER), "{out}");
            assert_eq!(why, Hidden::CardNumber);
        }
        // Not Luhn-valid, or not a card's first digit: stays.
        assert!(mask("Tracking 4111 1111 1111 1112", false).is_none());
        assert!(mask("Ref 1234567812345670", false).is_none());
    }

    fn window(app: &str, title: &str) -> Window {
        Window {
            id: "w".into(),
            app_id: app.into(),
            app_name: None,
            icon: None,
            title: title.into(),
            states: WindowStates::default(),
            outputs: vec![],
            parent: None,
            first_seen: chrono::Utc::now(),
            last_focused: None,
            attributed_by: Default::default(),
            title_hidden: None,
            process: None,
            sandbox: None,
        }
    }

    /// The attack: a password manager that claims another app's id
    /// keeps its treatment where the compositor told its process, and a
    /// window claiming a password manager's id is hidden too (a claim can
    /// only add a rule, never take one away).
    #[test]
    fn the_kernel_identity_is_matched_beside_the_claim() {
        use crate::model::{AppId, IdentitySource, WindowProcess};
        let rules = Rules::default();
        let mut w = window("org.example.Notes", "vault — Bank");
        w.process = Some(WindowProcess {
            app_id: AppId::new("exe:/usr/bin/keepassxc").expect("id"),
            source: IdentitySource::Executable,
        });
        assert_eq!(rules.window(&w), Some(Hidden::SensitiveApp));
        assert!(rules.clone().clean_window(&mut w) && w.title.is_empty());
        let mut claim = window("org.keepassxc.KeePassXC", "vault");
        claim.process = Some(WindowProcess {
            app_id: AppId::new("exe:/usr/bin/python3.11").expect("id"),
            source: IdentitySource::Executable,
        });
        assert_eq!(rules.window(&claim), Some(Hidden::SensitiveApp));
        let mut plain = window("org.example.Notes", "notes");
        plain.process = Some(WindowProcess {
            app_id: AppId::new("exe:/usr/bin/notes").expect("id"),
            source: IdentitySource::Executable,
        });
        assert_eq!(rules.window(&plain), None);
    }

    /// Private windows of every browser the README names lose their
    /// title and say why; the browser itself still shows.
    #[test]
    fn private_windows_and_password_managers_lose_their_titles() {
        let rules = Rules::default();
        for (app, title, why) in [
            (
                "firefox",
                "Bank — Mozilla Firefox Private Browsing",
                Hidden::PrivateWindow,
            ),
            (
                "librewolf",
                "Bank — LibreWolf (Private Browsing)",
                Hidden::PrivateWindow,
            ),
            (
                "firefox",
                "Bank — Mozilla Firefox (Privater Modus)",
                Hidden::PrivateWindow,
            ),
            (
                "chromium",
                "Bank - Chromium (Incognito)",
                Hidden::PrivateWindow,
            ),
            (
                "google-chrome",
                "Bank - Google Chrome (Incognito)",
                Hidden::PrivateWindow,
            ),
            (
                "brave-browser",
                "Bank - Brave (Private)",
                Hidden::PrivateWindow,
            ),
            (
                "microsoft-edge",
                "[InPrivate] Bank - Microsoft Edge",
                Hidden::PrivateWindow,
            ),
            (
                "org.gnome.Epiphany.Incognito",
                "Bank",
                Hidden::PrivateWindow,
            ),
            ("Tor Browser", "Bank", Hidden::PrivateWindow),
            (
                "org.keepassxc.KeePassXC",
                "Passwords.kdbx - KeePassXC",
                Hidden::SensitiveApp,
            ),
            ("Bitwarden", "Bitwarden", Hidden::SensitiveApp),
            ("1Password", "All items", Hidden::SensitiveApp),
            (
                "org.gnome.seahorse.Application",
                "Login",
                Hidden::SensitiveApp,
            ),
            (
                "org.gnome.World.Secrets",
                "vault.kdbx",
                Hidden::SensitiveApp,
            ),
            ("org.kde.kwalletmanager5", "kdewallet", Hidden::SensitiveApp),
            ("me.proton.Pass", "Proton Pass", Hidden::SensitiveApp),
        ] {
            let mut w = window(app, title);
            assert!(rules.clean_window(&mut w), "{app} {title}");
            assert_eq!(w.title, "", "{app}");
            assert_eq!(w.title_hidden, Some(why), "{app}");
            assert_eq!(w.app_id, app);
            // Cleaning twice changes nothing more.
            assert!(!rules.clean_window(&mut w));
        }
        for (app, title) in [
            ("firefox", "Bank — Mozilla Firefox"),
            ("org.gnome.TextEditor", "notes about privacy.txt"),
            (
                "chromium",
                "Incognito mode explained - Wikipedia - Chromium",
            ),
        ] {
            let mut w = window(app, title);
            assert!(!rules.clean_window(&mut w), "{app} {title}");
            assert_eq!(w.title, title);
        }
    }

    /// The user's rules: an app and a title pattern, matched
    /// case-insensitively, said as `user-rule`.
    #[test]
    fn user_rules_hide_calendar_titles_and_what_goes_with_them() {
        use crate::model::{Calendar, CalendarEvent, CalendarTask};
        let rules = Rules::new(PrivacySettings {
            apps: vec![],
            titles: vec!["Therapy".into()],
        });
        let event = |title: &str| CalendarEvent {
            id: "e".into(),
            start: chrono::Utc::now(),
            end: None,
            all_day: false,
            ongoing: false,
            recurring: false,
            title: Some(title.into()),
            location: Some("Dr. X, Main St".into()),
            attendees: vec!["Dr. X".into()],
            hidden: None,
        };
        let mut c = Calendar {
            events: vec![event("therapy session"), event("Standup")],
            tasks: vec![CalendarTask {
                id: "t".into(),
                due: None,
                in_progress: false,
                summary: Some("Book therapy".into()),
                hidden: None,
            }],
        };
        assert!(rules.clean_calendar(&mut c));
        let e = &c.events[0];
        assert_eq!(e.hidden, Some(Hidden::UserRule));
        assert_eq!((&e.title, &e.location), (&None, &None));
        assert!(e.attendees.is_empty());
        assert_eq!(c.events[1].title.as_deref(), Some("Standup"));
        assert_eq!(c.events[1].hidden, None);
        assert_eq!(c.tasks[0].summary, None);
        assert_eq!(c.tasks[0].hidden, Some(Hidden::UserRule));
        // Clean already: nothing more to do.
        assert!(!rules.clean_calendar(&mut c));
    }

    #[test]
    fn user_rules_hide_titles_and_notifications() {
        let rules = Rules::new(PrivacySettings {
            apps: vec!["org.example.Diary".into()],
            titles: vec!["Salary".into()],
        });
        let mut w = window("org.example.diary", "Dear diary");
        assert!(rules.clean_window(&mut w));
        assert_eq!(w.title_hidden, Some(Hidden::UserRule));
        let mut w = window("org.gnome.Calc", "salary 2027.ods");
        assert!(rules.clean_window(&mut w));
        assert_eq!(w.title_hidden, Some(Hidden::UserRule));
        let mut n = Notification {
            id: "1".into(),
            app_name: "org.example.Diary".into(),
            summary: "Entry saved".into(),
            body: "Today I".into(),
            urgency: Urgency::Normal,
            time: chrono::Utc::now(),
            actions: vec!["Read Today I".into()],
            ..Notification::default()
        };
        assert!(rules.clean_notification(&mut n));
        assert_eq!((n.summary.as_str(), n.body.as_str()), ("", ""));
        assert!(n.actions.is_empty());
        assert_eq!(n.summary_hidden, Some(Hidden::UserRule));
        // A code in the body: the summary names it, the body loses it.
        let mut n = Notification {
            app_name: "Messages".into(),
            summary: "Your verification code".into(),
            body: "482913".into(),
            ..n
        };
        n.summary_hidden = None;
        n.body_hidden = None;
        assert!(rules.clean_notification(&mut n));
        assert_eq!(n.summary, "Your verification code");
        assert_eq!(n.body, CODE_MARKER);
        assert_eq!(n.body_hidden, Some(Hidden::Code));
        assert_eq!(n.summary_hidden, None);
        // A code in an action's label only: masked there, said as the
        // body's (labels are content).
        let mut n = Notification {
            app_name: "Bank".into(),
            summary: "Sign-in request".into(),
            body: "Tap to copy".into(),
            actions: vec!["Copy code 482913".into(), "Deny".into()],
            ..Notification::default()
        };
        assert!(rules.clean_notification(&mut n));
        assert_eq!(
            n.actions,
            [format!("Copy code {CODE_MARKER}"), "Deny".into()]
        );
        assert_eq!(n.body_hidden, Some(Hidden::Code));
        assert_eq!(n.summary, "Sign-in request");
    }
}
