//! Just enough iCalendar (RFC 5545) for the calendar source: content
//! lines (unfolded, with parameters, quoted or not), components nested
//! in each other, text values unescaped, and the date and time values of
//! `DTSTART`, `DTEND`, `DUE`, `RECURRENCE-ID` and `EXDATE` (UTC, with a
//! `TZID`, floating, or a whole day) and `DURATION`.
//!
//! What the calendar service hands out is what any program (or an
//! invitation from anyone) wrote: every limit is checked, a line or a
//! value that makes no sense is an error the caller warns about, and
//! nothing here panics.

use chrono::{Duration, NaiveDate, NaiveDateTime, NaiveTime};

use super::tzif::{Zone, Zones};

/// The largest object the source reads (bytes): a meeting with a long
/// description and a few hundred attendees is far below it.
pub(crate) const MAX_OBJECT_BYTES: usize = 256 * 1024;
/// Properties in one object, and components nested in each other.
const MAX_PROPS: usize = 4096;
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IcalError {
    #[error("larger than {MAX_OBJECT_BYTES} bytes")]
    TooLarge,
    #[error("more than {MAX_PROPS} properties")]
    TooManyProps,
    #[error("components nested more than {MAX_DEPTH} deep")]
    TooDeep,
    #[error("no component")]
    Empty,
    #[error("line {0} is no content line")]
    BadLine(usize),
    #[error("END:{found} where END:{expected} belongs")]
    BadEnd { expected: String, found: String },
    #[error("END:{0} is missing")]
    Unterminated(String),
    #[error("{0} has no valid date or time: '{1}'")]
    BadTime(&'static str, String),
    #[error("DURATION '{0}' is no duration")]
    BadDuration(String),
}

/// One property: its name upper-cased, its parameters (names
/// upper-cased, values unquoted) and its raw value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prop {
    pub(crate) name: String,
    pub(crate) params: Vec<(String, String)>,
    pub(crate) value: String,
}

impl Prop {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A component (`VEVENT`, `VTODO`, `VCALENDAR`, `VALARM`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Component {
    pub(crate) name: String,
    pub(crate) props: Vec<Prop>,
    pub(crate) children: Vec<Component>,
}

impl Component {
    pub(crate) fn prop(&self, name: &str) -> Option<&Prop> {
        self.props.iter().find(|p| p.name == name)
    }

    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Prop> + 'a {
        self.props.iter().filter(move |p| p.name == name)
    }

    /// A text property's value, unescaped.
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        self.prop(name).map(|p| unescape(&p.value))
    }

    /// Every component named `name`, this one or inside it (a
    /// `VCALENDAR` holds its `VEVENT`s).
    pub(crate) fn find<'a>(&'a self, name: &str, out: &mut Vec<&'a Component>) {
        if self.name == name {
            out.push(self);
        }
        for c in &self.children {
            c.find(name, out);
        }
    }
}

/// The first component of `text` (an object as the calendar service
/// returns it: one `VEVENT`, or a `VCALENDAR` around some).
pub(crate) fn parse(text: &str) -> Result<Component, IcalError> {
    if text.len() > MAX_OBJECT_BYTES {
        return Err(IcalError::TooLarge);
    }
    let mut stack: Vec<Component> = Vec::new();
    let mut props = 0usize;
    for (n, line) in unfold(text).into_iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let prop = content_line(&line).ok_or(IcalError::BadLine(n + 1))?;
        props += 1;
        if props > MAX_PROPS {
            return Err(IcalError::TooManyProps);
        }
        match prop.name.as_str() {
            "BEGIN" => {
                if stack.len() >= MAX_DEPTH {
                    return Err(IcalError::TooDeep);
                }
                stack.push(Component {
                    name: prop.value.trim().to_ascii_uppercase(),
                    ..Component::default()
                });
            }
            "END" => {
                let found = prop.value.trim().to_ascii_uppercase();
                let Some(done) = stack.pop() else {
                    return Err(IcalError::BadEnd {
                        expected: String::new(),
                        found,
                    });
                };
                if done.name != found {
                    return Err(IcalError::BadEnd {
                        expected: done.name,
                        found,
                    });
                }
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => return Ok(done),
                }
            }
            _ => match stack.last_mut() {
                Some(c) => c.props.push(prop),
                // A property outside any component: not iCalendar.
                None => return Err(IcalError::BadLine(n + 1)),
            },
        }
    }
    match stack.pop() {
        Some(c) => Err(IcalError::Unterminated(c.name)),
        None => Err(IcalError::Empty),
    }
}

/// The logical lines: a line that starts with a space or a tab continues
/// the one before (without that first character).
fn unfold(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split('\n') {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        match (raw.strip_prefix([' ', '\t']), out.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ => out.push(raw.to_owned()),
        }
    }
    out
}

/// `NAME;PARAM=VALUE;PARAM="QUOTED":VALUE`.
fn content_line(line: &str) -> Option<Prop> {
    let name_end = line.find([';', ':'])?;
    let name = &line[..name_end];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let mut params = Vec::new();
    let mut rest = &line[name_end..];
    while let Some(after) = rest.strip_prefix(';') {
        let eq = after.find('=')?;
        let key = after[..eq].to_ascii_uppercase();
        let mut v = &after[eq + 1..];
        let mut value = String::new();
        // A parameter may have several values (`a,"b",c`); kept as written
        // but unquoted.
        loop {
            if let Some(q) = v.strip_prefix('"') {
                let close = q.find('"')?;
                value.push_str(&q[..close]);
                v = &q[close + 1..];
            } else {
                let end = v.find([',', ';', ':']).unwrap_or(v.len());
                value.push_str(&v[..end]);
                v = &v[end..];
            }
            match v.strip_prefix(',') {
                Some(more) => {
                    value.push(',');
                    v = more;
                }
                None => break,
            }
        }
        params.push((key, value));
        rest = v;
    }
    let value = rest.strip_prefix(':')?;
    Some(Prop {
        name: name.to_ascii_uppercase(),
        params,
        value: value.to_owned(),
    })
}

/// A TEXT value as written: `\n` a line break, `\,` `\;` `\\` the
/// character itself.
pub(crate) fn unescape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n' | 'N') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// A date or a date and time, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum When {
    /// `...Z`.
    Utc(NaiveDateTime),
    /// In the zone `TZID` names, or floating (the user's own zone) when
    /// there is none.
    Local(NaiveDateTime, Option<String>),
    /// A whole day (`VALUE=DATE`).
    Date(NaiveDate),
}

impl When {
    pub(crate) fn is_date(&self) -> bool {
        matches!(self, When::Date(_))
    }
}

/// The value of a date or date-time property (`what` names it in errors).
pub(crate) fn when(p: &Prop, what: &'static str) -> Result<When, IcalError> {
    when_value(p.value.trim(), p.param("TZID"), p.param("VALUE"), what)
}

/// Every date of a property that may hold several (`EXDATE`, `RDATE`).
pub(crate) fn whens(p: &Prop, what: &'static str) -> Result<Vec<When>, IcalError> {
    p.value
        .split(',')
        .map(|v| when_value(v.trim(), p.param("TZID"), p.param("VALUE"), what))
        .collect()
}

fn when_value(
    v: &str,
    tzid: Option<&str>,
    value: Option<&str>,
    what: &'static str,
) -> Result<When, IcalError> {
    let bad = || IcalError::BadTime(what, v.chars().take(40).collect());
    if value.is_some_and(|t| t.eq_ignore_ascii_case("DATE")) || v.len() == 8 {
        return NaiveDate::parse_from_str(v, "%Y%m%d")
            .map(When::Date)
            .map_err(|_| bad());
    }
    if let Some(utc) = v.strip_suffix('Z') {
        return NaiveDateTime::parse_from_str(utc, "%Y%m%dT%H%M%S")
            .map(When::Utc)
            .map_err(|_| bad());
    }
    NaiveDateTime::parse_from_str(v, "%Y%m%dT%H%M%S")
        .map(|t| When::Local(t, tzid.map(str::to_owned)))
        .map_err(|_| bad())
}

/// `DURATION`: `[+-]P[nW]` or `[+-]P[nD][T[nH][nM][nS]]`.
pub(crate) fn duration(v: &str) -> Result<Duration, IcalError> {
    let bad = || IcalError::BadDuration(v.chars().take(40).collect());
    let v = v.trim();
    let (neg, v) = match v.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, v.strip_prefix('+').unwrap_or(v)),
    };
    let v = v.strip_prefix('P').ok_or_else(bad)?;
    let mut secs: i64 = 0;
    let mut num = String::new();
    let mut in_time = false;
    let mut any = false;
    for c in v.chars() {
        match c {
            '0'..='9' => num.push(c),
            'T' if !in_time && num.is_empty() => in_time = true,
            'W' | 'D' | 'H' | 'M' | 'S' => {
                let n: i64 = num.parse().map_err(|_| bad())?;
                num.clear();
                let unit = match (c, in_time) {
                    ('W', false) => 7 * 86_400,
                    ('D', false) => 86_400,
                    ('H', true) => 3_600,
                    ('M', true) => 60,
                    ('S', true) => 1,
                    _ => return Err(bad()),
                };
                secs = n
                    .checked_mul(unit)
                    .and_then(|s| secs.checked_add(s))
                    .ok_or_else(bad)?;
                any = true;
            }
            _ => return Err(bad()),
        }
    }
    if !num.is_empty() || !any {
        return Err(bad());
    }
    // Beyond a few years is no event's length; also keeps the sums below
    // far from chrono's range.
    if secs > 10 * 366 * 86_400 {
        return Err(bad());
    }
    Ok(Duration::seconds(if neg { -secs } else { secs }))
}

/// The zone a `TZID` names, when it names one of the system's
/// ([`Zones::get`]): `None` for anything else (Outlook's `W. Europe
/// Standard Time`).
pub(crate) fn zone(tzid: &str) -> Option<Zone> {
    Zones::system().get(tzid)
}

/// Midnight at the start of `d` as a local date-time.
pub(crate) fn midnight(d: NaiveDate) -> NaiveDateTime {
    d.and_time(NaiveTime::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_folded_lines_params_and_nesting() {
        let text = "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:1\r\nSUMMARY:Long \r\n title\\, with\\nbreak\r\nATTENDEE;CN=\"Doe; Jane\";ROLE=REQ-PARTICIPANT:mailto:jane@example.com\r\nDTSTART;TZID=/freeassociation.sourceforge.net/Europe/Berlin:20261207T100000\r\nBEGIN:VALARM\r\nACTION:DISPLAY\r\nEND:VALARM\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";
        let c = parse(text).expect("parses");
        let mut ev = Vec::new();
        c.find("VEVENT", &mut ev);
        assert_eq!(ev.len(), 1);
        let e = ev[0];
        assert_eq!(
            e.text("SUMMARY").as_deref(),
            Some("Long title, with\nbreak")
        );
        let a = e.prop("ATTENDEE").expect("attendee");
        assert_eq!(a.param("CN"), Some("Doe; Jane"));
        assert_eq!(a.value, "mailto:jane@example.com");
        assert_eq!(e.children.len(), 1);
        let start = when(e.prop("DTSTART").expect("start"), "DTSTART").expect("time");
        let When::Local(t, Some(tz)) = start else {
            panic!("{start:?}")
        };
        let z = zone(&tz).expect("zone (is tzdata installed? make deps)");
        assert_eq!(
            z.to_utc(t).map(|d| d.to_rfc3339()),
            Some("2026-12-07T09:00:00+00:00".into())
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in [
            "",
            "garbage",
            "BEGIN:VEVENT\nSUMMARY:x",
            "BEGIN:VEVENT\nEND:VTODO",
            "END:VEVENT",
            "SUMMARY:x",
            "BEGIN:VEVENT\n;X=1:y\nEND:VEVENT",
            "BEGIN:VEVENT\nA;B=\"unclosed:x\nEND:VEVENT",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "BEGIN:X\n".repeat(20);
        assert_eq!(parse(&deep), Err(IcalError::TooDeep));
        assert_eq!(
            parse(&"x".repeat(MAX_OBJECT_BYTES + 1)),
            Err(IcalError::TooLarge)
        );
        let p = |v: &str| Prop {
            name: "DTSTART".into(),
            params: vec![],
            value: v.into(),
        };
        assert!(when(&p("2026-12-07"), "DTSTART").is_err());
        assert!(when(&p("20261399"), "DTSTART").is_err());
        assert!(when(&p("20261207T256000Z"), "DTSTART").is_err());
        assert_eq!(
            when(&p("20261207"), "DTSTART"),
            Ok(When::Date(
                NaiveDate::from_ymd_opt(2026, 12, 7).expect("date")
            ))
        );
        assert_eq!(zone("W. Europe Standard Time"), None);
        assert_eq!(zone("UTC"), Some(Zone::Utc));
    }

    #[test]
    fn durations() {
        assert_eq!(duration("PT1H30M"), Ok(Duration::minutes(90)));
        assert_eq!(duration("P1D"), Ok(Duration::days(1)));
        assert_eq!(duration("P2W"), Ok(Duration::days(14)));
        assert_eq!(duration("-PT15M"), Ok(Duration::minutes(-15)));
        assert_eq!(duration("P1DT12H"), Ok(Duration::hours(36)));
        for bad in [
            "",
            "P",
            "PT",
            "1H",
            "PT1D",
            "P1H",
            "PT99999999999999999999H",
            "P9999999D",
        ] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }
}
