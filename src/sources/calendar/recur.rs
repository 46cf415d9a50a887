//! RFC 5545 recurrence rules (`RRULE`, section 3.3.10) for the calendar
//! source: parsed into a [`Rule`] and expanded into the starts of the
//! occurrences within a window.
//!
//! Why not a crate: `rrule` brought `regex` (0.8 MB of code in the
//! daemon) to parse a line of `NAME=VALUE` pairs, and the source needs
//! only the next two weeks of a series.
//!
//! What is read: `FREQ` `DAILY`, `WEEKLY`, `MONTHLY` and `YEARLY`
//! (`HOURLY`, `MINUTELY` and `SECONDLY` are refused as unsupported: no
//! calendar program writes them for an event), `INTERVAL`, `COUNT`,
//! `UNTIL` (a date, a UTC time, or a floating time read in the event's
//! zone), `BYDAY` (with ordinals such as `1MO` and `-1FR` in monthly and
//! yearly rules), `BYMONTHDAY` (negative from the month's end),
//! `BYYEARDAY`, `BYWEEKNO`, `BYMONTH`, `BYHOUR`, `BYMINUTE`, `BYSECOND`,
//! `BYSETPOS` and `WKST`; `X-` parts are ignored, any other part is an
//! error (`RSCALE` or `SKIP` would change the meaning). The semantics are
//! RFC 5545's as python-dateutil and the `rrule` crate read them: the
//! `BYxxx` parts are intersected, a rule without a day part takes the
//! day of `DTSTART`, and `DTSTART` is an occurrence only when the rule
//! makes it one (RFC 5545 leaves the other case undefined).
//!
//! Occurrences are made in the event's local wall time and only then
//! turned into instants ([`Zone::to_utc`]), so a 09:00 meeting in
//! Europe/Berlin stays at 09:00 across daylight saving time; a time the
//! clock skips moves forward by the gap, a time it repeats is the first.
//!
//! The rule is anyone's (an invitation): every value is range-checked,
//! and an expansion examines at most [`MAX_STEPS`] days and times, so
//! that a rule that never matches (`FREQ=DAILY;BYMONTHDAY=31;BYMONTH=2`)
//! or a `COUNT` from the year 1 ends with an error, never a hang.

use chrono::{
    DateTime, Datelike, Days, Months, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc, Weekday,
};

use super::tzif::Zone;

/// Values in one `BYxxx` part.
const MAX_LIST: usize = 64;
/// Times of day one day may hold (`BYHOUR` × `BYMINUTE` × `BYSECOND`):
/// one a minute.
const MAX_TIMES: usize = 1440;
/// The largest `INTERVAL` (a daily rule's is 27 years).
const MAX_INTERVAL: u32 = 10_000;
/// Days and times one expansion examines, at most: a daily rule with a
/// `COUNT` since 1480 fits.
pub(crate) const MAX_STEPS: u64 = 200_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RuleError {
    #[error("no FREQ")]
    NoFreq,
    #[error("FREQ={0} is not supported")]
    Unsupported(String),
    #[error("'{0}' is no rule part")]
    BadPart(String),
    #[error("{0} is given twice")]
    Twice(String),
    #[error("{0}={1} is not valid")]
    BadValue(&'static str, String),
    #[error("{0}")]
    Conflict(&'static str),
    #[error("expanding the rule takes more than {MAX_STEPS} steps")]
    TooLong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freq {
    Yearly,
    Monthly,
    Weekly,
    Daily,
}

/// The last possible occurrence, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// A whole day: occurrences on it still count.
    Date(NaiveDate),
    /// `...Z`.
    Utc(NaiveDateTime),
    /// A floating time: read in the event's zone.
    Local(NaiveDateTime),
}

/// A parsed `RRULE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    freq: Freq,
    interval: u32,
    count: Option<u32>,
    until: Option<Until>,
    /// `(ordinal, day)`; ordinal 0 is every such day.
    by_day: Vec<(i8, Weekday)>,
    by_monthday: Vec<i8>,
    by_yearday: Vec<i16>,
    by_weekno: Vec<i8>,
    by_month: Vec<u32>,
    by_hour: Vec<u32>,
    by_minute: Vec<u32>,
    by_second: Vec<u32>,
    by_setpos: Vec<i16>,
    wkst: Weekday,
}

/// At most 40 characters of what was written, for an error.
fn shown(s: &str) -> String {
    s.chars().take(40).collect()
}

fn weekday(s: &str) -> Option<Weekday> {
    Some(match s.to_ascii_uppercase().as_str() {
        "MO" => Weekday::Mon,
        "TU" => Weekday::Tue,
        "WE" => Weekday::Wed,
        "TH" => Weekday::Thu,
        "FR" => Weekday::Fri,
        "SA" => Weekday::Sat,
        "SU" => Weekday::Sun,
        _ => return None,
    })
}

/// A comma-separated list, each value through `one`.
fn list<T>(
    name: &'static str,
    v: &str,
    one: impl Fn(&str) -> Option<T>,
) -> Result<Vec<T>, RuleError> {
    let bad = || RuleError::BadValue(name, shown(v));
    let items: Vec<&str> = v.split(',').collect();
    if items.len() > MAX_LIST {
        return Err(bad());
    }
    items
        .into_iter()
        .map(|i| one(i.trim()).ok_or_else(bad))
        .collect()
}

/// A number in `lo..=hi` or `-hi..=-lo` (when `signed`).
fn number(s: &str, lo: i32, hi: i32, signed: bool) -> Option<i32> {
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'+' || b == b'-')
    {
        return None;
    }
    let n: i32 = s.parse().ok()?;
    ((lo..=hi).contains(&n) || (signed && (-hi..=-lo).contains(&n))).then_some(n)
}

fn until(v: &str) -> Option<Until> {
    if v.len() == 8 {
        return NaiveDate::parse_from_str(v, "%Y%m%d").ok().map(Until::Date);
    }
    match v.strip_suffix(['Z', 'z']) {
        Some(u) => NaiveDateTime::parse_from_str(u, "%Y%m%dT%H%M%S")
            .ok()
            .map(Until::Utc),
        None => NaiveDateTime::parse_from_str(v, "%Y%m%dT%H%M%S")
            .ok()
            .map(Until::Local),
    }
}

impl std::str::FromStr for Rule {
    type Err = RuleError;

    /// A rule's value (`FREQ=WEEKLY;BYDAY=MO`), with or without `RRULE:`.
    fn from_str(s: &str) -> Result<Rule, RuleError> {
        let s = s.trim();
        let s = match s.get(..6) {
            Some(p) if p.eq_ignore_ascii_case("RRULE:") => &s[6..],
            _ => s,
        };
        let mut seen: Vec<String> = Vec::new();
        let mut freq = None;
        let mut r = Rule {
            freq: Freq::Daily,
            interval: 1,
            count: None,
            until: None,
            by_day: Vec::new(),
            by_monthday: Vec::new(),
            by_yearday: Vec::new(),
            by_weekno: Vec::new(),
            by_month: Vec::new(),
            by_hour: Vec::new(),
            by_minute: Vec::new(),
            by_second: Vec::new(),
            by_setpos: Vec::new(),
            wkst: Weekday::Mon,
        };
        for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| RuleError::BadPart(shown(part)))?;
            let k = k.trim().to_ascii_uppercase();
            let v = v.trim();
            if k.starts_with("X-") {
                continue;
            }
            if seen.contains(&k) {
                return Err(RuleError::Twice(shown(&k)));
            }
            seen.push(k.clone());
            let u32_in = |name: &'static str, lo: i32, hi: i32| {
                list(name, v, |x| {
                    number(x, lo, hi, false).and_then(|n| u32::try_from(n).ok())
                })
            };
            match k.as_str() {
                "FREQ" => {
                    freq = Some(match v.to_ascii_uppercase().as_str() {
                        "YEARLY" => Freq::Yearly,
                        "MONTHLY" => Freq::Monthly,
                        "WEEKLY" => Freq::Weekly,
                        "DAILY" => Freq::Daily,
                        "HOURLY" | "MINUTELY" | "SECONDLY" => {
                            return Err(RuleError::Unsupported(v.to_ascii_uppercase()));
                        }
                        _ => return Err(RuleError::BadValue("FREQ", shown(v))),
                    });
                }
                "INTERVAL" => {
                    r.interval = number(v, 1, MAX_INTERVAL as i32, false)
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| RuleError::BadValue("INTERVAL", shown(v)))?;
                }
                "COUNT" => {
                    r.count = Some(
                        number(v, 1, i32::MAX, false)
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(|| RuleError::BadValue("COUNT", shown(v)))?,
                    );
                }
                "UNTIL" => {
                    r.until = Some(until(v).ok_or_else(|| RuleError::BadValue("UNTIL", shown(v)))?);
                }
                "BYDAY" => {
                    r.by_day = list("BYDAY", v, |x| {
                        let split = x.len().checked_sub(2).filter(|&i| x.is_char_boundary(i))?;
                        let (n, d) = x.split_at(split);
                        let n = if n.is_empty() {
                            0
                        } else {
                            i8::try_from(number(n, 1, 53, true)?).ok()?
                        };
                        Some((n, weekday(d)?))
                    })?;
                }
                "BYMONTHDAY" => {
                    r.by_monthday = list("BYMONTHDAY", v, |x| {
                        i8::try_from(number(x, 1, 31, true)?).ok()
                    })?;
                }
                "BYYEARDAY" => {
                    r.by_yearday = list("BYYEARDAY", v, |x| {
                        i16::try_from(number(x, 1, 366, true)?).ok()
                    })?;
                }
                "BYWEEKNO" => {
                    r.by_weekno = list("BYWEEKNO", v, |x| {
                        i8::try_from(number(x, 1, 53, true)?).ok()
                    })?;
                }
                "BYSETPOS" => {
                    r.by_setpos = list("BYSETPOS", v, |x| {
                        i16::try_from(number(x, 1, 366, true)?).ok()
                    })?;
                }
                "BYMONTH" => r.by_month = u32_in("BYMONTH", 1, 12)?,
                "BYHOUR" => r.by_hour = u32_in("BYHOUR", 0, 23)?,
                "BYMINUTE" => r.by_minute = u32_in("BYMINUTE", 0, 59)?,
                "BYSECOND" => r.by_second = u32_in("BYSECOND", 0, 60)?,
                "WKST" => {
                    r.wkst = weekday(v).ok_or_else(|| RuleError::BadValue("WKST", shown(v)))?;
                }
                _ => return Err(RuleError::BadPart(shown(part))),
            }
        }
        r.freq = freq.ok_or(RuleError::NoFreq)?;
        r.check()?;
        Ok(r)
    }
}

impl Rule {
    /// The combinations RFC 5545 forbids.
    fn check(&self) -> Result<(), RuleError> {
        use RuleError::Conflict;
        if self.count.is_some() && self.until.is_some() {
            return Err(Conflict("COUNT and UNTIL together"));
        }
        let ordinals = self.by_day.iter().any(|(n, _)| *n != 0);
        if ordinals && !matches!(self.freq, Freq::Monthly | Freq::Yearly) {
            return Err(Conflict(
                "a BYDAY with a number needs FREQ=MONTHLY or FREQ=YEARLY",
            ));
        }
        if ordinals && !self.by_weekno.is_empty() {
            return Err(Conflict("a BYDAY with a number beside BYWEEKNO"));
        }
        if !self.by_monthday.is_empty() && self.freq == Freq::Weekly {
            return Err(Conflict("BYMONTHDAY in a weekly rule"));
        }
        if !self.by_yearday.is_empty() && self.freq != Freq::Yearly {
            return Err(Conflict("BYYEARDAY needs FREQ=YEARLY"));
        }
        if !self.by_weekno.is_empty() && self.freq != Freq::Yearly {
            return Err(Conflict("BYWEEKNO needs FREQ=YEARLY"));
        }
        let others = !(self.by_day.is_empty()
            && self.by_monthday.is_empty()
            && self.by_yearday.is_empty()
            && self.by_weekno.is_empty()
            && self.by_month.is_empty()
            && self.by_hour.is_empty()
            && self.by_minute.is_empty()
            && self.by_second.is_empty());
        if !self.by_setpos.is_empty() && !others {
            return Err(Conflict("BYSETPOS without another BYxxx part"));
        }
        let times = [&self.by_hour, &self.by_minute, &self.by_second]
            .iter()
            .map(|l| l.len().max(1))
            .product::<usize>();
        if times > MAX_TIMES {
            return Err(Conflict(
                "BYHOUR, BYMINUTE and BYSECOND make more than one time a minute",
            ));
        }
        Ok(())
    }

    /// The starts of the occurrences of a series that starts at `start`
    /// (local wall time in `zone`) within `[from, to]`: sorted, at most
    /// `max` (the first ones).
    pub(crate) fn expand(
        &self,
        start: NaiveDateTime,
        zone: &Zone,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<DateTime<Utc>>, RuleError> {
        let r = self.with_defaults(start.date());
        let times = r.times(start.time());
        let day = Days::new;
        let Some(mut last_day) = zone.to_local(to).date().checked_add_days(day(2)) else {
            return Ok(Vec::new());
        };
        match r.until {
            Some(Until::Date(d)) => last_day = last_day.min(d),
            Some(Until::Local(l)) => last_day = last_day.min(l.date()),
            Some(Until::Utc(u)) => {
                if let Some(d) = zone.to_local(u.and_utc()).date().checked_add_days(day(1)) {
                    last_day = last_day.min(d);
                }
            }
            None => {}
        }
        let step = i64::from(r.interval);
        // The period to begin with: the first, or (without a COUNT, which
        // counts from the first) the one just before the window.
        let mut k: i64 = 0;
        if r.count.is_none()
            && let Some(target) = zone.to_local(from).date().checked_sub_days(day(2))
        {
            let units = r.units_between(start.date(), target);
            k = (units.div_euclid(step) - 1).max(0) * step;
        }
        let mut steps: u64 = 0;
        let mut counted: u32 = 0;
        let mut out: Vec<DateTime<Utc>> = Vec::new();
        'periods: while let Some((first, days)) = r.period(start.date(), k) {
            if first > last_day {
                break;
            }
            let mut set: Vec<NaiveDateTime> = Vec::new();
            let mut d = first;
            for _ in 0..days {
                steps += 1;
                // A weekly rule's first week begins at the start, as in
                // dateutil and the `rrule` crate (it matters to BYSETPOS).
                if r.matches(d) && !(r.freq == Freq::Weekly && d < start.date()) {
                    steps += times.len() as u64;
                    set.extend(times.iter().map(|t| d.and_time(*t)));
                }
                if steps > MAX_STEPS {
                    return Err(RuleError::TooLong);
                }
                match d.succ_opt() {
                    Some(n) => d = n,
                    None => break,
                }
            }
            if !r.by_setpos.is_empty() {
                set = setpos(&set, &r.by_setpos);
            }
            for t in set {
                if t < start {
                    continue;
                }
                if r.count.is_some_and(|c| counted >= c) || r.past_until(t, zone) {
                    break 'periods;
                }
                counted += 1;
                let Some(u) = zone.to_utc(t) else {
                    continue;
                };
                if u >= from && u <= to {
                    out.push(u);
                    if out.len() >= max {
                        break 'periods;
                    }
                }
            }
            match k.checked_add(step) {
                Some(n) => k = n,
                None => break,
            }
        }
        // A time in a skipped hour may land on the next one.
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// RFC 5545's defaults: a rule without a day part takes the day (and
    /// a yearly one the month) of its start.
    fn with_defaults(&self, start: NaiveDate) -> Rule {
        let mut r = self.clone();
        if r.by_weekno.is_empty()
            && r.by_yearday.is_empty()
            && r.by_monthday.is_empty()
            && r.by_day.is_empty()
        {
            // A day of the month is 1..=31: it fits an i8.
            let mday = i8::try_from(start.day()).unwrap_or(1);
            match r.freq {
                Freq::Yearly => {
                    if r.by_month.is_empty() {
                        r.by_month = vec![start.month()];
                    }
                    r.by_monthday = vec![mday];
                }
                Freq::Monthly => r.by_monthday = vec![mday],
                Freq::Weekly => r.by_day = vec![(0, start.weekday())],
                Freq::Daily => {}
            }
        }
        r
    }

    /// The times of each day, sorted.
    fn times(&self, start: NaiveTime) -> Vec<NaiveTime> {
        let or = |l: &Vec<u32>, d: u32| if l.is_empty() { vec![d] } else { l.clone() };
        let mut out = Vec::new();
        for h in or(&self.by_hour, start.hour()) {
            for m in or(&self.by_minute, start.minute()) {
                // Second 60 (a leap second) is no time chrono makes.
                for s in or(&self.by_second, start.second()) {
                    out.extend(NaiveTime::from_hms_opt(h, m, s));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The first day of period `k` (in units of the frequency from the
    /// one holding `start`), and its length in days.
    fn period(&self, start: NaiveDate, k: i64) -> Option<(NaiveDate, u32)> {
        match self.freq {
            Freq::Daily => Some((add_days(start, k)?, 1)),
            Freq::Weekly => Some((add_days(self.week_start(start), k.checked_mul(7)?)?, 7)),
            Freq::Monthly => {
                let m0 = i64::from(start.year()) * 12 + i64::from(start.month0()) + k;
                let first = NaiveDate::from_ymd_opt(
                    i32::try_from(m0.div_euclid(12)).ok()?,
                    u32::try_from(m0.rem_euclid(12)).ok()? + 1,
                    1,
                )?;
                Some((first, month_len(first)))
            }
            Freq::Yearly => {
                let y = i32::try_from(i64::from(start.year()).checked_add(k)?).ok()?;
                let first = NaiveDate::from_ymd_opt(y, 1, 1)?;
                Some((first, year_len(y)))
            }
        }
    }

    /// Whole periods from the one holding `a` to the one holding `b`.
    fn units_between(&self, a: NaiveDate, b: NaiveDate) -> i64 {
        match self.freq {
            Freq::Daily => (b - a).num_days(),
            Freq::Weekly => (self.week_start(b) - self.week_start(a)).num_days() / 7,
            Freq::Monthly => {
                (i64::from(b.year()) * 12 + i64::from(b.month0()))
                    - (i64::from(a.year()) * 12 + i64::from(a.month0()))
            }
            Freq::Yearly => i64::from(b.year()) - i64::from(a.year()),
        }
    }

    /// The first day of the week (by `WKST`) that holds `d`.
    fn week_start(&self, d: NaiveDate) -> NaiveDate {
        let back = (7 + d.weekday().num_days_from_monday() - self.wkst.num_days_from_monday()) % 7;
        d.checked_sub_days(Days::new(u64::from(back))).unwrap_or(d)
    }

    /// Whether day `d` is one of the rule's (every `BYxxx` day part).
    fn matches(&self, d: NaiveDate) -> bool {
        let signed = |x: i32, v: i32, len: i32| x == v || x == v - len - 1;
        if !self.by_month.is_empty() && !self.by_month.contains(&d.month()) {
            return false;
        }
        if !self.by_weekno.is_empty() {
            let Some((w, n)) = week_number(d, self.wkst) else {
                return false;
            };
            if !self.by_weekno.iter().any(|&x| signed(i32::from(x), w, n)) {
                return false;
            }
        }
        if !self.by_yearday.is_empty() {
            let (v, len) = (d.ordinal() as i32, year_len(d.year()) as i32);
            if !self
                .by_yearday
                .iter()
                .any(|&x| signed(i32::from(x), v, len))
            {
                return false;
            }
        }
        if !self.by_monthday.is_empty() {
            let (v, len) = (d.day() as i32, month_len(d) as i32);
            if !self
                .by_monthday
                .iter()
                .any(|&x| signed(i32::from(x), v, len))
            {
                return false;
            }
        }
        self.by_day.is_empty()
            || self
                .by_day
                .iter()
                .any(|&(n, wd)| wd == d.weekday() && (n == 0 || self.nth(d, n)))
    }

    /// Whether `d` is the `n`th of its weekday in its month (a monthly
    /// rule, or a yearly one with `BYMONTH`) or its year; negative from
    /// the end.
    fn nth(&self, d: NaiveDate, n: i8) -> bool {
        let in_month =
            self.freq == Freq::Monthly || (self.freq == Freq::Yearly && !self.by_month.is_empty());
        let (index, len) = if in_month {
            (d.day0() as i32, month_len(d) as i32)
        } else {
            (d.ordinal0() as i32, year_len(d.year()) as i32)
        };
        let n = i32::from(n);
        n == index / 7 + 1 || n == -((len - 1 - index) / 7 + 1)
    }

    /// Whether `t` (local wall time) is after the rule's `UNTIL`.
    fn past_until(&self, t: NaiveDateTime, zone: &Zone) -> bool {
        match self.until {
            None => false,
            Some(Until::Date(d)) => t.date() > d,
            Some(Until::Local(l)) => t > l,
            Some(Until::Utc(u)) => zone.to_utc(t).is_none_or(|x| x.naive_utc() > u),
        }
    }
}

fn add_days(d: NaiveDate, n: i64) -> Option<NaiveDate> {
    if n >= 0 {
        d.checked_add_days(Days::new(n.unsigned_abs()))
    } else {
        d.checked_sub_days(Days::new(n.unsigned_abs()))
    }
}

fn month_len(d: NaiveDate) -> u32 {
    let first = d.with_day(1).unwrap_or(d);
    match first.checked_add_months(Months::new(1)) {
        Some(next) => u32::try_from((next - first).num_days()).unwrap_or(31),
        None => 31,
    }
}

fn year_len(y: i32) -> u32 {
    if NaiveDate::from_ymd_opt(y, 2, 29).is_some() {
        366
    } else {
        365
    }
}

/// The first day of week 1 of `year`: weeks start on `wkst`, and week 1
/// is the first with at least four days in the year.
fn week_one(year: i32, wkst: Weekday) -> Option<NaiveDate> {
    let jan1 = NaiveDate::from_ymd_opt(year, 1, 1)?;
    let into = (7 + jan1.weekday().num_days_from_monday() - wkst.num_days_from_monday()) % 7;
    if into <= 3 {
        jan1.checked_sub_days(Days::new(u64::from(into)))
    } else {
        jan1.checked_add_days(Days::new(u64::from(7 - into)))
    }
}

/// The week number of `d` and how many weeks its week's year has.
fn week_number(d: NaiveDate, wkst: Weekday) -> Option<(i32, i32)> {
    let y = d.year();
    let wy = if d < week_one(y, wkst)? {
        y - 1
    } else if d >= week_one(y + 1, wkst)? {
        y + 1
    } else {
        y
    };
    let a = week_one(wy, wkst)?;
    let b = week_one(wy + 1, wkst)?;
    Some((
        ((d - a).num_days() / 7 + 1) as i32,
        ((b - a).num_days() / 7) as i32,
    ))
}

/// The members of a period's set at the `BYSETPOS` positions.
fn setpos(set: &[NaiveDateTime], pos: &[i16]) -> Vec<NaiveDateTime> {
    let n = set.len() as i64;
    let mut out: Vec<NaiveDateTime> = pos
        .iter()
        .filter_map(|&p| {
            let i = if p > 0 {
                i64::from(p) - 1
            } else {
                n + i64::from(p)
            };
            usize::try_from(i).ok().and_then(|i| set.get(i).copied())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::calendar::tzif::Zones;
    use proptest::prelude::*;

    fn zone(name: &str) -> Zone {
        Zones::new("/usr/share/zoneinfo")
            .get(name)
            .unwrap_or_else(|| panic!("{name}: is tzdata installed (make deps)?"))
    }

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%S").expect("time")
    }

    /// The occurrences (local wall time, `YYYY-MM-DD HH:MM`) of `rule`
    /// from `start` in `tz`, up to 2010.
    fn occ(tz: &str, start: &str, rule: &str) -> Vec<String> {
        let z = zone(tz);
        let r: Rule = rule.parse().expect("rule");
        let from = at("19900101T000000").and_utc();
        let to = at("20100101T000000").and_utc();
        r.expand(at(start), &z, from, to, 1000)
            .expect("expands")
            .into_iter()
            .map(|u| z.to_local(u).format("%Y-%m-%d %H:%M").to_string())
            .collect()
    }

    fn days(list: &[&str], time: &str) -> Vec<String> {
        list.iter().map(|d| format!("{d} {time}")).collect()
    }

    const NY: &str = "America/New_York";

    #[test]
    fn rfc5545_daily_weekly_and_monthly() {
        assert_eq!(
            occ(NY, "19970902T090000", "FREQ=DAILY;COUNT=10"),
            days(
                &[
                    "1997-09-02",
                    "1997-09-03",
                    "1997-09-04",
                    "1997-09-05",
                    "1997-09-06",
                    "1997-09-07",
                    "1997-09-08",
                    "1997-09-09",
                    "1997-09-10",
                    "1997-09-11",
                ],
                "09:00"
            )
        );
        // Every other week on Monday, Wednesday and Friday until 24
        // December 1997: 09:00 in EDT and then in EST.
        assert_eq!(
            occ(
                NY,
                "19970901T090000",
                "FREQ=WEEKLY;INTERVAL=2;UNTIL=19971224T000000Z;WKST=SU;BYDAY=MO,WE,FR"
            ),
            days(
                &[
                    "1997-09-01",
                    "1997-09-03",
                    "1997-09-05",
                    "1997-09-15",
                    "1997-09-17",
                    "1997-09-19",
                    "1997-09-29",
                    "1997-10-01",
                    "1997-10-03",
                    "1997-10-13",
                    "1997-10-15",
                    "1997-10-17",
                    "1997-10-27",
                    "1997-10-29",
                    "1997-10-31",
                    "1997-11-10",
                    "1997-11-12",
                    "1997-11-14",
                    "1997-11-24",
                    "1997-11-26",
                    "1997-11-28",
                    "1997-12-08",
                    "1997-12-10",
                    "1997-12-12",
                    "1997-12-22",
                ],
                "09:00"
            )
        );
        // Monthly on the first Friday for 10 occurrences.
        assert_eq!(
            occ(NY, "19970905T090000", "FREQ=MONTHLY;COUNT=10;BYDAY=1FR"),
            days(
                &[
                    "1997-09-05",
                    "1997-10-03",
                    "1997-11-07",
                    "1997-12-05",
                    "1998-01-02",
                    "1998-02-06",
                    "1998-03-06",
                    "1998-04-03",
                    "1998-05-01",
                    "1998-06-05",
                ],
                "09:00"
            )
        );
        // The second-to-last Monday for 6 months.
        assert_eq!(
            occ(NY, "19970922T090000", "FREQ=MONTHLY;COUNT=6;BYDAY=-2MO"),
            days(
                &[
                    "1997-09-22",
                    "1997-10-20",
                    "1997-11-17",
                    "1997-12-22",
                    "1998-01-19",
                    "1998-02-16",
                ],
                "09:00"
            )
        );
        // The third-to-the-last day of the month.
        assert_eq!(
            occ(NY, "19970928T090000", "FREQ=MONTHLY;BYMONTHDAY=-3")[..6],
            days(
                &[
                    "1997-09-28",
                    "1997-10-29",
                    "1997-11-28",
                    "1997-12-29",
                    "1998-01-29",
                    "1998-02-26",
                ],
                "09:00"
            )
        );
        // The 2nd and 15th for 10 occurrences.
        assert_eq!(
            occ(
                NY,
                "19970902T090000",
                "FREQ=MONTHLY;COUNT=10;BYMONTHDAY=2,15"
            ),
            days(
                &[
                    "1997-09-02",
                    "1997-09-15",
                    "1997-10-02",
                    "1997-10-15",
                    "1997-11-02",
                    "1997-11-15",
                    "1997-12-02",
                    "1997-12-15",
                    "1998-01-02",
                    "1998-01-15",
                ],
                "09:00"
            )
        );
        // February 30 is no day and is skipped.
        assert_eq!(
            occ(
                NY,
                "20070115T090000",
                "FREQ=MONTHLY;BYMONTHDAY=15,30;COUNT=5"
            ),
            days(
                &[
                    "2007-01-15",
                    "2007-01-30",
                    "2007-02-15",
                    "2007-03-15",
                    "2007-03-30"
                ],
                "09:00"
            )
        );
        // Every Friday the 13th (the start itself is none).
        assert_eq!(
            occ(NY, "19970902T090000", "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13")[..5],
            days(
                &[
                    "1998-02-13",
                    "1998-03-13",
                    "1998-11-13",
                    "1999-08-13",
                    "2000-10-13"
                ],
                "09:00"
            )
        );
        // WKST changes which days an every-other-week rule takes.
        assert_eq!(
            occ(
                NY,
                "19970805T090000",
                "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO"
            ),
            days(
                &["1997-08-05", "1997-08-10", "1997-08-19", "1997-08-24"],
                "09:00"
            )
        );
        assert_eq!(
            occ(
                NY,
                "19970805T090000",
                "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU"
            ),
            days(
                &["1997-08-05", "1997-08-17", "1997-08-19", "1997-08-31"],
                "09:00"
            )
        );
        // Every day in January for 3 years.
        let jan = occ(
            NY,
            "19980101T090000",
            "FREQ=DAILY;UNTIL=20000131T140000Z;BYMONTH=1",
        );
        assert_eq!(jan.len(), 93);
        assert_eq!(jan.last().map(String::as_str), Some("2000-01-31 09:00"));
    }

    #[test]
    fn rfc5545_setpos_and_yearly() {
        // The last weekday of the month.
        assert_eq!(
            occ(
                NY,
                "19970929T090000",
                "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"
            )[..7],
            days(
                &[
                    "1997-09-30",
                    "1997-10-31",
                    "1997-11-28",
                    "1997-12-31",
                    "1998-01-30",
                    "1998-02-27",
                    "1998-03-31",
                ],
                "09:00"
            )
        );
        // The third of Tuesday, Wednesday or Thursday, for 3 months.
        assert_eq!(
            occ(
                NY,
                "19970904T090000",
                "FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3"
            ),
            days(&["1997-09-04", "1997-10-07", "1997-11-06"], "09:00")
        );
        // Every year on the last Sunday in October.
        assert_eq!(
            occ(NY, "19971026T020000", "FREQ=YEARLY;BYDAY=-1SU;BYMONTH=10")[..5],
            days(
                &[
                    "1997-10-26",
                    "1998-10-25",
                    "1999-10-31",
                    "2000-10-29",
                    "2001-10-28"
                ],
                "02:00"
            )
        );
        // Every 20th Monday of the year.
        assert_eq!(
            occ(NY, "19970519T090000", "FREQ=YEARLY;BYDAY=20MO")[..3],
            days(&["1997-05-19", "1998-05-18", "1999-05-17"], "09:00")
        );
        // Monday of week 20.
        assert_eq!(
            occ(NY, "19970512T090000", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO")[..3],
            days(&["1997-05-12", "1998-05-11", "1999-05-17"], "09:00")
        );
        // Election day: the first Tuesday after a Monday in November,
        // every 4 years.
        assert_eq!(
            occ(
                NY,
                "19961105T090000",
                "FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8"
            )[..3],
            days(&["1996-11-05", "2000-11-07", "2004-11-02"], "09:00")
        );
        // January to March every other year, 10 times.
        assert_eq!(
            occ(
                NY,
                "19970310T090000",
                "FREQ=YEARLY;INTERVAL=2;COUNT=10;BYMONTH=1,2,3"
            ),
            days(
                &[
                    "1997-03-10",
                    "1999-01-10",
                    "1999-02-10",
                    "1999-03-10",
                    "2001-01-10",
                    "2001-02-10",
                    "2001-03-10",
                    "2003-01-10",
                    "2003-02-10",
                    "2003-03-10",
                ],
                "09:00"
            )
        );
        // The 1st, 100th and 200th day, every third year.
        assert_eq!(
            occ(
                NY,
                "19970101T090000",
                "FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200"
            ),
            days(
                &[
                    "1997-01-01",
                    "1997-04-10",
                    "1997-07-19",
                    "2000-01-01",
                    "2000-04-09",
                    "2000-07-18",
                    "2003-01-01",
                    "2003-04-10",
                    "2003-07-19",
                    "2006-01-01",
                ],
                "09:00"
            )
        );
        // Times of day from the rule.
        assert_eq!(
            occ(
                NY,
                "19970902T090000",
                "FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0,30;COUNT=5"
            ),
            vec![
                "1997-09-02 09:00",
                "1997-09-02 09:30",
                "1997-09-02 10:00",
                "1997-09-02 10:30",
                "1997-09-03 09:00"
            ]
        );
    }

    #[test]
    fn local_wall_time_across_daylight_saving() {
        let berlin = "Europe/Berlin";
        let z = zone(berlin);
        let r: Rule = "FREQ=WEEKLY;BYDAY=MO".parse().expect("rule");
        let got: Vec<String> = r
            .expand(
                at("20260316T090000"),
                &z,
                at("20260301T000000").and_utc(),
                at("20260410T000000").and_utc(),
                100,
            )
            .expect("expands")
            .iter()
            .map(|u| u.to_rfc3339())
            .collect();
        assert_eq!(
            got,
            [
                "2026-03-16T08:00:00+00:00",
                "2026-03-23T08:00:00+00:00",
                "2026-03-30T07:00:00+00:00",
                "2026-04-06T07:00:00+00:00"
            ]
        );
        // A daily 02:30 moves to 03:30 on the day 02:00-03:00 is skipped
        // and is the first of the two on the day it repeats.
        let daily: Rule = "FREQ=DAILY".parse().expect("rule");
        let around = |start: &str, from: &str, to: &str| -> Vec<String> {
            daily
                .expand(at(start), &z, at(from).and_utc(), at(to).and_utc(), 100)
                .expect("expands")
                .iter()
                .map(|u| u.format("%d %H:%M").to_string())
                .collect()
        };
        assert_eq!(
            around("20260301T023000", "20260328T000000", "20260330T120000"),
            ["28 01:30", "29 01:30", "30 00:30"]
        );
        assert_eq!(
            around("20260301T023000", "20261024T000000", "20261026T120000"),
            ["24 00:30", "25 00:30", "26 01:30"]
        );
        // New York, 8 March and 1 November 2026.
        let z = zone(NY);
        let r: Rule = "FREQ=DAILY;BYHOUR=2;BYMINUTE=15".parse().expect("rule");
        let got: Vec<String> = r
            .expand(
                at("20260301T021500"),
                &z,
                at("20260307T000000").and_utc(),
                at("20260309T120000").and_utc(),
                100,
            )
            .expect("expands")
            .iter()
            .map(|u| z.to_local(*u).format("%d %H:%M").to_string())
            .collect();
        assert_eq!(got, ["07 02:15", "08 03:15", "09 02:15"]);
        let r: Rule = "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1;BYMINUTE=30"
            .parse()
            .expect("rule");
        let got = r
            .expand(
                at("20261025T013000"),
                &z,
                at("20261031T000000").and_utc(),
                at("20261102T000000").and_utc(),
                100,
            )
            .expect("expands");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to_rfc3339(), "2026-11-01T05:30:00+00:00");
    }

    #[test]
    fn window_count_until_and_the_jump_ahead() {
        let z = zone("Europe/Berlin");
        let window = |rule: &str, start: &str| -> Vec<String> {
            let r: Rule = rule.parse().expect("rule");
            r.expand(
                at(start),
                &z,
                at("20261207T000000").and_utc(),
                at("20261221T000000").and_utc(),
                100,
            )
            .expect("expands")
            .iter()
            .map(|u| z.to_local(*u).format("%Y-%m-%d").to_string())
            .collect()
        };
        // A weekly series from 1990, without a COUNT: found in the window.
        assert_eq!(
            window("FREQ=WEEKLY;INTERVAL=3", "19891225T100000"),
            ["2026-12-14"]
        );
        // A birthday from 1950.
        assert_eq!(window("FREQ=YEARLY", "19501210T000000"), ["2026-12-10"]);
        // A COUNT is counted from the start.
        assert!(window("FREQ=WEEKLY;COUNT=5", "20261102T100000").is_empty());
        assert_eq!(
            window("FREQ=WEEKLY;COUNT=7", "20261102T100000"),
            ["2026-12-07", "2026-12-14"]
        );
        // UNTIL as a date counts its own day.
        assert_eq!(
            window("FREQ=DAILY;UNTIL=20261208", "20261201T100000"),
            ["2026-12-07", "2026-12-08"]
        );
        // A floating UNTIL is read in the event's zone.
        assert_eq!(
            window("FREQ=DAILY;UNTIL=20261208T095959", "20261201T100000"),
            ["2026-12-07"]
        );
        // A rule that never matches ends, with or without a COUNT.
        assert!(window("FREQ=DAILY;BYMONTHDAY=31;BYMONTH=2", "20200101T100000").is_empty());
        assert!(
            window(
                "FREQ=YEARLY;BYMONTHDAY=30;BYMONTH=2;COUNT=3",
                "19000101T100000"
            )
            .is_empty()
        );
        // A COUNT from the year 1 is too long to count: an error.
        let r: Rule = "FREQ=DAILY;COUNT=1000000;BYMONTH=2;BYMONTHDAY=31"
            .parse()
            .expect("rule");
        assert_eq!(
            r.expand(
                at("00010101T000000"),
                &z,
                at("20261207T000000").and_utc(),
                at("20261221T000000").and_utc(),
                100
            ),
            Err(RuleError::TooLong)
        );
        // At most `max`, the first ones.
        let r: Rule = "FREQ=DAILY".parse().expect("rule");
        let got = r
            .expand(
                at("20260101T000000"),
                &z,
                at("20261207T000000").and_utc(),
                at("20261221T000000").and_utc(),
                3,
            )
            .expect("expands");
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].to_rfc3339(), "2026-12-07T23:00:00+00:00");
    }

    #[test]
    fn bad_rules_are_typed_errors() {
        let err = |s: &str| s.parse::<Rule>().expect_err(s);
        assert_eq!(err(""), RuleError::NoFreq);
        assert_eq!(err("INTERVAL=2"), RuleError::NoFreq);
        assert_eq!(
            err("FREQ=SOMETIMES"),
            RuleError::BadValue("FREQ", "SOMETIMES".into())
        );
        assert_eq!(err("FREQ=HOURLY"), RuleError::Unsupported("HOURLY".into()));
        assert_eq!(
            err("FREQ=DAILY;FREQ=DAILY"),
            RuleError::Twice("FREQ".into())
        );
        assert!(matches!(
            err("FREQ=DAILY;COUNT=2;UNTIL=20260101"),
            RuleError::Conflict(_)
        ));
        assert!(matches!(
            err("FREQ=WEEKLY;BYDAY=1MO"),
            RuleError::Conflict(_)
        ));
        assert!(matches!(
            err("FREQ=WEEKLY;BYMONTHDAY=1"),
            RuleError::Conflict(_)
        ));
        assert!(matches!(
            err("FREQ=DAILY;BYSETPOS=1"),
            RuleError::Conflict(_)
        ));
        assert!(matches!(
            err("FREQ=MONTHLY;BYWEEKNO=1"),
            RuleError::Conflict(_)
        ));
        assert!(matches!(
            err("FREQ=DAILY;RSCALE=HEBREW"),
            RuleError::BadPart(_)
        ));
        for bad in [
            "FREQ=DAILY;INTERVAL=0",
            "FREQ=DAILY;INTERVAL=-1",
            "FREQ=DAILY;COUNT=0",
            "FREQ=DAILY;COUNT=99999999999",
            "FREQ=MONTHLY;BYMONTHDAY=0",
            "FREQ=MONTHLY;BYMONTHDAY=32",
            "FREQ=MONTHLY;BYDAY=0MO",
            "FREQ=MONTHLY;BYDAY=54MO",
            "FREQ=MONTHLY;BYDAY=XX",
            "FREQ=MONTHLY;BYDAY=é",
            "FREQ=MONTHLY;BYDAY=",
            "FREQ=YEARLY;BYMONTH=13",
            "FREQ=DAILY;BYHOUR=24",
            "FREQ=DAILY;UNTIL=tomorrow",
            "FREQ=DAILY;WKST=XY",
            "FREQ=DAILY;BYMINUTE=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,0,1,2,3,4,5",
            "FREQ=DAILY;BYHOUR=0,1,2;BYMINUTE=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59;BYSECOND=0,1,2,3,4,5,6,7,8,9",
            "FREQ",
            "=",
        ] {
            assert!(bad.parse::<Rule>().is_err(), "{bad}");
        }
        // What is accepted: the prefix, any case, X- parts, a trailing ';'.
        for good in [
            "RRULE:FREQ=WEEKLY;BYDAY=MO",
            "freq=weekly;byday=mo;",
            "FREQ=WEEKLY;X-EVOLUTION-ENDDATE=20261231T000000Z;BYDAY=+1MO,-1FR"
                .replace("WEEKLY", "MONTHLY")
                .as_str(),
        ] {
            assert!(good.parse::<Rule>().is_ok(), "{good}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any rule, from any start, expands without a panic and ends (an
        /// endless loop would never let this test finish).
        #[test]
        fn random_rules_never_panic_or_hang(
            parts in prop::collection::vec(prop_oneof![
                Just("FREQ=DAILY".to_owned()),
                Just("FREQ=WEEKLY".to_owned()),
                Just("FREQ=MONTHLY".to_owned()),
                Just("FREQ=YEARLY".to_owned()),
                Just("FREQ=HOURLY".to_owned()),
                "INTERVAL=[0-9]{1,5}",
                "COUNT=[0-9]{1,7}",
                "UNTIL=(19|20|99)[0-9]{2}(0[1-9]|1[0-2])[0-3][0-9](T[0-2][0-9][0-5][0-9][0-5][0-9]Z?)?",
                "BYDAY=([+-]?[0-9]{0,2}(MO|TU|WE|TH|FR|SA|SU),){0,3}[+-]?[0-9]{0,2}(MO|TU|WE|TH|FR|SA|SU)",
                "BYMONTHDAY=([+-]?[0-9]{1,2},){0,3}[+-]?[0-9]{1,2}",
                "BYYEARDAY=[+-]?[0-9]{1,3}",
                "BYWEEKNO=[+-]?[0-9]{1,2}",
                "BYMONTH=([0-9]{1,2},){0,2}[0-9]{1,2}",
                "BYSETPOS=[+-]?[0-9]{1,3}",
                "BYHOUR=[0-9]{1,2}",
                "BYMINUTE=([0-9]{1,2},){0,3}[0-9]{1,2}",
                "WKST=(MO|SU|XX)",
                ".{0,12}",
            ], 0..7),
            year in prop_oneof![1900i32..2100, 1i32..=9999, Just(2026i32)],
            ordinal in 1u32..=366,
            secs in 0u32..86_400,
            zone_pick in 0usize..3,
        ) {
            let text = parts.join(";");
            let start = NaiveDate::from_yo_opt(year, ordinal)
                .or_else(|| NaiveDate::from_yo_opt(year, 1))
                .and_then(|d| d.and_hms_opt(secs / 3600, secs / 60 % 60, secs % 60));
            let zone = match zone_pick {
                0 => Zone::Utc,
                1 => Zone::posix("CET-1CEST,M3.5.0,M10.5.0/3").expect("rule"),
                _ => Zone::Local,
            };
            if let (Ok(rule), Some(start)) = (text.parse::<Rule>(), start) {
                let from = at("20261207T000000").and_utc();
                let to = at("20261221T000000").and_utc();
                if let Ok(got) = rule.expand(start, &zone, from, to, 100) {
                    prop_assert!(got.len() <= 100);
                    prop_assert!(got.iter().all(|u| *u >= from && *u <= to));
                    prop_assert!(got.windows(2).all(|w| w[0] < w[1]));
                }
            }
        }
    }
}
