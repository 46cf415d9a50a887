//! Time zones for the calendar source, read at run time from the system's
//! TZif files (RFC 8536; Debian's `tzdata`, under `/usr/share/zoneinfo`
//! or `$TZDIR`) instead of tables compiled into the binary.
//!
//! Why not a crate: `chrono-tz` compiles every IANA zone into the binary
//! as tables of pointers, which a position-independent executable
//! relocates at load, so all of them were dirty memory of the daemon
//! (about 1 MB) for the few zones a calendar names. A TZif file is a
//! sorted list of transitions and a footer with the POSIX `TZ` rule for
//! what comes after the last one (slim files stop at the present day),
//! which is all this module reads.
//!
//! What it offers is what expanding an event needs: a local date and time
//! in a zone to UTC, with RFC 5545's rule for the hour a clock skips (the
//! time moves forward by the gap) and the hour it repeats (the first of
//! the two), and UTC to the local date and time. A name is looked up
//! once and kept ([`Zones`]); a name that is no zone, or a file that is
//! no TZif, is an unknown zone, never a panic: the files are the
//! system's, the names are what anyone wrote in an invitation.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, Datelike, Local, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};

/// The largest zone file read (bytes): the largest of tzdata's "fat"
/// files is below 4 KB.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Transitions and local time types in one file (far above tzdata's).
const MAX_TRANSITIONS: u32 = 4096;
const MAX_TYPES: u32 = 256;
/// The largest UTC offset RFC 8536 allows (one second short of 26 h).
const MAX_OFFSET: i32 = 93_599;
/// Zones (and names that are none) kept at once: a calendar names a few;
/// a hostile one with many names only makes the cache start over.
const MAX_CACHED: usize = 64;
/// The longest `TZID` looked up (IANA names are below 40 characters).
const MAX_NAME: usize = 128;

/// Why a file is no zone this module reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TzifError {
    #[error("not a TZif file")]
    NotTzif,
    #[error("the file ends early")]
    Truncated,
    #[error("{0}")]
    Invalid(&'static str),
    #[error("the file counts leap seconds (a \"right/\" zone)")]
    LeapSeconds,
}

/// One zone: its transitions (UTC seconds, ascending), the UTC offset
/// that starts at each, and the footer's rule for the time after the
/// last one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Tzif {
    transitions: Vec<i64>,
    /// The offset (seconds east of UTC) from each transition on.
    offsets: Vec<i32>,
    /// The offset before the first transition (the first local time type).
    initial: i32,
    footer: Option<PosixTz>,
}

impl Tzif {
    /// The zone in a TZif file's bytes (version 1 to 4).
    pub(crate) fn parse(data: &[u8]) -> Result<Tzif, TzifError> {
        let mut r = Reader { data, pos: 0 };
        let h = Header::read(&mut r)?;
        if h.version < 2 {
            return h.body(&mut r, 4, None);
        }
        // Version 2 and later repeat the data with 64-bit times, then the
        // footer: the 32-bit block is skipped.
        r.take(h.len(4)?)?;
        let h2 = Header::read(&mut r)?;
        let start = r.pos;
        r.take(h2.len(8)?)?;
        let footer = footer(&mut r)?;
        let mut body = Reader {
            data: &data[..r.pos],
            pos: start,
        };
        h2.body(&mut body, 8, footer)
    }

    /// The offset east of UTC (seconds) at the UTC instant `t` (seconds).
    fn offset_at(&self, t: i64) -> i32 {
        let i = self.transitions.partition_point(|&x| x <= t);
        if i == self.transitions.len()
            && let Some(f) = &self.footer
        {
            // Past the last transition, or a file with none: the rule.
            return f.offset_at(t);
        }
        match i.checked_sub(1) {
            Some(last) => self.offsets[last],
            None => self.initial,
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TzifError> {
        let end = self.pos.checked_add(n).ok_or(TzifError::Truncated)?;
        let s = self.data.get(self.pos..end).ok_or(TzifError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, TzifError> {
        Ok(self.take(1)?[0])
    }

    fn be32(&mut self) -> Result<i32, TzifError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn be64(&mut self) -> Result<i64, TzifError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
}

/// A TZif header: the version and the counts of what follows.
struct Header {
    version: u8,
    isutcnt: u32,
    isstdcnt: u32,
    leapcnt: u32,
    timecnt: u32,
    typecnt: u32,
    charcnt: u32,
}

impl Header {
    fn read(r: &mut Reader<'_>) -> Result<Header, TzifError> {
        if r.take(4).map_err(|_| TzifError::NotTzif)? != b"TZif" {
            return Err(TzifError::NotTzif);
        }
        let version = match r.u8()? {
            0 => 1,
            v @ b'2'..=b'9' => v - b'0',
            _ => return Err(TzifError::Invalid("unknown version")),
        };
        r.take(15)?;
        let mut n = [0u32; 6];
        for c in &mut n {
            *c = u32::try_from(r.be32()?).map_err(|_| TzifError::Invalid("negative count"))?;
        }
        let [isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt] = n;
        if timecnt > MAX_TRANSITIONS || typecnt > MAX_TYPES || charcnt > 4096 || leapcnt > 4096 {
            return Err(TzifError::Invalid("too many entries"));
        }
        if typecnt == 0 {
            return Err(TzifError::Invalid("no local time type"));
        }
        if (isutcnt != 0 && isutcnt != typecnt) || (isstdcnt != 0 && isstdcnt != typecnt) {
            return Err(TzifError::Invalid("indicator counts differ from the types"));
        }
        Ok(Header {
            version,
            isutcnt,
            isstdcnt,
            leapcnt,
            timecnt,
            typecnt,
            charcnt,
        })
    }

    /// The length of the data block with `time` bytes a time.
    fn len(&self, time: usize) -> Result<usize, TzifError> {
        let n = |c: u32| c as usize;
        Ok(n(self.timecnt) * time
            + n(self.timecnt)
            + n(self.typecnt) * 6
            + n(self.charcnt)
            + n(self.leapcnt) * (time + 4)
            + n(self.isstdcnt)
            + n(self.isutcnt))
    }

    fn body(
        &self,
        r: &mut Reader<'_>,
        time: usize,
        footer: Option<PosixTz>,
    ) -> Result<Tzif, TzifError> {
        if self.leapcnt > 0 {
            return Err(TzifError::LeapSeconds);
        }
        let mut transitions = Vec::with_capacity(self.timecnt as usize);
        for _ in 0..self.timecnt {
            let t = if time == 8 {
                r.be64()?
            } else {
                i64::from(r.be32()?)
            };
            if transitions.last().is_some_and(|&l| l >= t) {
                return Err(TzifError::Invalid("transitions out of order"));
            }
            transitions.push(t);
        }
        let idx = r.take(self.timecnt as usize)?;
        let mut types = Vec::with_capacity(self.typecnt as usize);
        for _ in 0..self.typecnt {
            let off = r.be32()?;
            let _isdst = r.u8()?;
            let _desig = r.u8()?;
            if !(-MAX_OFFSET..=MAX_OFFSET).contains(&off) {
                return Err(TzifError::Invalid("offset out of range"));
            }
            types.push(off);
        }
        let offsets = idx
            .iter()
            .map(|&i| {
                types
                    .get(usize::from(i))
                    .copied()
                    .ok_or(TzifError::Invalid("transition to no type"))
            })
            .collect::<Result<Vec<i32>, _>>()?;
        // The designations and the indicators are not needed.
        let read = self.timecnt as usize * (time + 1) + self.typecnt as usize * 6;
        r.take(self.len(time)? - read)?;
        Ok(Tzif {
            transitions,
            offsets,
            initial: types[0],
            footer,
        })
    }
}

/// The footer of a version 2+ file: `\n` TZ string `\n`. A rule this
/// module does not read leaves the zone without one (the table still
/// holds), rather than making the zone unknown.
fn footer(r: &mut Reader<'_>) -> Result<Option<PosixTz>, TzifError> {
    if r.u8()? != b'\n' {
        return Err(TzifError::Invalid("no footer"));
    }
    let rest = &r.data[r.pos..];
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(TzifError::Truncated)?;
    r.pos += end + 1;
    let s = std::str::from_utf8(&rest[..end]).map_err(|_| TzifError::Invalid("footer"))?;
    if s.is_empty() {
        return Ok(None);
    }
    Ok(PosixTz::parse(s))
}

/// A POSIX `TZ` rule (`CET-1CEST,M3.5.0,M10.5.0/3`): standard time, and
/// daylight time between two dates of every year.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PosixTz {
    /// Standard time's offset east of UTC (seconds).
    std: i32,
    dst: Option<Dst>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Dst {
    off: i32,
    start: RuleDate,
    /// Seconds after local midnight (standard time), may be negative or
    /// past a day (version 3).
    start_time: i32,
    end: RuleDate,
    /// Seconds after local midnight (daylight time).
    end_time: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleDate {
    /// `Jn`: day 1..=365, February 29 never counted.
    Julian1(u16),
    /// `n`: day 0..=365, February 29 counted.
    Julian0(u16),
    /// `Mm.w.d`: day `d` (0 Sunday) of week `w` (5 the last) of month `m`.
    Mwd(u8, u8, u8),
}

impl PosixTz {
    /// The rule, or `None` when it is not one.
    pub(crate) fn parse(s: &str) -> Option<PosixTz> {
        let mut p = Posix { s: s.as_bytes() };
        p.name()?;
        let std = -p.offset(24)?;
        if p.s.is_empty() {
            return Some(PosixTz { std, dst: None });
        }
        p.name()?;
        let off = if p.s.first().is_some_and(|c| *c != b',') {
            -p.offset(24)?
        } else {
            std + 3600
        };
        let (start, start_time, end, end_time) = if p.s.is_empty() {
            // No dates: POSIX leaves it to the system; tzcode takes the
            // United States' rule.
            (RuleDate::Mwd(3, 2, 0), 7200, RuleDate::Mwd(11, 1, 0), 7200)
        } else {
            p.eat(b',')?;
            let (a, at) = p.rule()?;
            p.eat(b',')?;
            let (b, bt) = p.rule()?;
            (a, at, b, bt)
        };
        if !p.s.is_empty() || !(-MAX_OFFSET..=MAX_OFFSET).contains(&off) {
            return None;
        }
        Some(PosixTz {
            std,
            dst: Some(Dst {
                off,
                start,
                start_time,
                end,
                end_time,
            }),
        })
    }

    fn offset_at(&self, t: i64) -> i32 {
        let Some(d) = &self.dst else {
            return self.std;
        };
        // The year of `t` in standard time; the two transitions of that
        // year in UTC.
        let Some(year) =
            DateTime::from_timestamp(t.saturating_add(i64::from(self.std)), 0).map(|l| l.year())
        else {
            return self.std;
        };
        let at = |date: RuleDate, time: i32, off: i32| -> Option<i64> {
            let day = date.day_in(year)?;
            Some(day.and_hms_opt(0, 0, 0)?.and_utc().timestamp() + i64::from(time) - i64::from(off))
        };
        let (Some(start), Some(end)) = (
            at(d.start, d.start_time, self.std),
            at(d.end, d.end_time, d.off),
        ) else {
            return self.std;
        };
        let in_dst = if start < end {
            start <= t && t < end
        } else {
            // The southern hemisphere: daylight time spans the new year.
            !(end <= t && t < start)
        };
        if in_dst { d.off } else { self.std }
    }
}

impl RuleDate {
    fn day_in(self, year: i32) -> Option<NaiveDate> {
        let jan1 = NaiveDate::from_ymd_opt(year, 1, 1)?;
        match self {
            RuleDate::Julian1(n) => {
                let leap = NaiveDate::from_ymd_opt(year, 2, 29).is_some();
                let n = u64::from(n) - 1 + u64::from(leap && n >= 60);
                jan1.checked_add_days(chrono::Days::new(n))
            }
            RuleDate::Julian0(n) => jan1.checked_add_days(chrono::Days::new(u64::from(n))),
            RuleDate::Mwd(m, w, d) => {
                let first = NaiveDate::from_ymd_opt(year, u32::from(m), 1)?;
                let lead = (u32::from(d) + 7 - first.weekday().num_days_from_sunday()) % 7;
                let mut day = first.checked_add_days(chrono::Days::new(u64::from(lead)))?;
                for _ in 1..w {
                    match day.checked_add_days(chrono::Days::new(7)) {
                        Some(next) if next.month() == u32::from(m) => day = next,
                        _ => break,
                    }
                }
                Some(day)
            }
        }
    }
}

/// A cursor over a POSIX `TZ` string.
struct Posix<'a> {
    s: &'a [u8],
}

impl Posix<'_> {
    fn eat(&mut self, c: u8) -> Option<()> {
        let (&first, rest) = self.s.split_first()?;
        (first == c).then(|| self.s = rest)
    }

    /// `ABC` or `<+0330>`: only checked, the name itself is not needed.
    fn name(&mut self) -> Option<()> {
        let n = if self.eat(b'<').is_some() {
            let n = self.s.iter().position(|&c| c == b'>')?;
            let inner = &self.s[..n];
            if !inner
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'-')
            {
                return None;
            }
            self.s = &self.s[n + 1..];
            n
        } else {
            let n = self
                .s
                .iter()
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
            self.s = &self.s[n..];
            n
        };
        (n > 0).then_some(())
    }

    fn number(&mut self, max_digits: usize) -> Option<u32> {
        let n = self
            .s
            .iter()
            .take(max_digits)
            .take_while(|c| c.is_ascii_digit())
            .count();
        if n == 0 {
            return None;
        }
        let v = self.s[..n]
            .iter()
            .fold(0u32, |v, c| v * 10 + u32::from(c - b'0'));
        self.s = &self.s[n..];
        Some(v)
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, west positive as written; hours at
    /// most `max_hours`.
    fn offset(&mut self, max_hours: u32) -> Option<i32> {
        let neg = if self.eat(b'-').is_some() {
            true
        } else {
            self.eat(b'+');
            false
        };
        let h = self.number(3)?;
        let mut secs = h.checked_mul(3600)?;
        if self.eat(b':').is_some() {
            let m = self.number(2).filter(|m| *m < 60)?;
            secs += m * 60;
            if self.eat(b':').is_some() {
                secs += self.number(2).filter(|s| *s < 60)?;
            }
        }
        if h > max_hours {
            return None;
        }
        let secs = i32::try_from(secs).ok()?;
        Some(if neg { -secs } else { secs })
    }

    /// A date and its optional `/time` (default 02:00).
    fn rule(&mut self) -> Option<(RuleDate, i32)> {
        let date = if self.eat(b'J').is_some() {
            let n = self.number(3).filter(|n| (1..=365).contains(n))?;
            RuleDate::Julian1(u16::try_from(n).ok()?)
        } else if self.eat(b'M').is_some() {
            let m = self.number(2).filter(|m| (1..=12).contains(m))?;
            self.eat(b'.')?;
            let w = self.number(1).filter(|w| (1..=5).contains(w))?;
            self.eat(b'.')?;
            let d = self.number(1).filter(|d| *d <= 6)?;
            RuleDate::Mwd(
                u8::try_from(m).ok()?,
                u8::try_from(w).ok()?,
                u8::try_from(d).ok()?,
            )
        } else {
            let n = self.number(3).filter(|n| *n <= 365)?;
            RuleDate::Julian0(u16::try_from(n).ok()?)
        };
        let time = if self.eat(b'/').is_some() {
            // Version 3 allows -167..=167 hours.
            self.offset(167)?
        } else {
            7200
        };
        Some((date, time))
    }
}

/// A zone to reckon local times in.
#[derive(Debug, Clone)]
pub(crate) enum Zone {
    Utc,
    /// The user's own zone (`TZ`, `/etc/localtime`), as chrono reads it.
    Local,
    Tz(Arc<Tzif>),
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        match (self, other) {
            (Zone::Utc, Zone::Utc) | (Zone::Local, Zone::Local) => true,
            (Zone::Tz(a), Zone::Tz(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

impl Zone {
    /// A zone of a POSIX rule alone (tests, and what a slim file's footer
    /// says).
    #[cfg(test)]
    pub(crate) fn posix(rule: &str) -> Option<Zone> {
        Some(Zone::Tz(Arc::new(Tzif {
            transitions: Vec::new(),
            offsets: Vec::new(),
            initial: 0,
            footer: Some(PosixTz::parse(rule)?),
        })))
    }

    /// The offset east of UTC (seconds) at the UTC instant `t`.
    fn offset_at(&self, t: i64) -> i32 {
        match self {
            Zone::Utc => 0,
            Zone::Local => DateTime::from_timestamp(t, 0).map_or(0, |d| {
                Local
                    .offset_from_utc_datetime(&d.naive_utc())
                    .fix()
                    .local_minus_utc()
            }),
            Zone::Tz(z) => z.offset_at(t),
        }
    }

    /// The local date and time at the instant `t`.
    pub(crate) fn to_local(&self, t: DateTime<Utc>) -> NaiveDateTime {
        let off = self.offset_at(t.timestamp());
        t.naive_utc()
            .checked_add_signed(chrono::Duration::seconds(i64::from(off)))
            .unwrap_or(t.naive_utc())
    }

    /// The instant of the local date and time `local` (RFC 5545, 3.3.5):
    /// in an hour that repeats, the first of the two; in an hour that is
    /// skipped, the time the gap later (read with the offset before it).
    /// `None` only at the ends of chrono's range.
    pub(crate) fn to_utc(&self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        let n = local.and_utc().timestamp();
        // Every offset in force within two days of the time (offsets are
        // below 26 h, so the right one is among them).
        let mut offs: Vec<i32> = Vec::with_capacity(5);
        for d in -2..=2i64 {
            let o = self.offset_at(n.saturating_add(d * 86_400));
            if !offs.contains(&o) {
                offs.push(o);
            }
        }
        let exact = offs
            .iter()
            .map(|&o| n - i64::from(o))
            .filter(|&u| i64::from(self.offset_at(u)) == n - u)
            .min();
        let u = match exact {
            Some(u) => u,
            // A gap: of the readings, the one that lands soonest after it.
            None => {
                offs.iter()
                    .map(|&o| n - i64::from(o))
                    .filter_map(|u| {
                        let reads = u + i64::from(self.offset_at(u));
                        (reads > n).then_some((reads, u))
                    })
                    .min()?
                    .1
            }
        };
        DateTime::from_timestamp(u, 0)
    }
}

/// The zones looked up so far, by name.
pub(crate) struct Zones {
    dir: PathBuf,
    cache: Mutex<HashMap<String, Option<Arc<Tzif>>>>,
}

impl Zones {
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Zones {
        Zones {
            dir: dir.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The system's zones: `$TZDIR`, else `/usr/share/zoneinfo`.
    pub(crate) fn system() -> &'static Zones {
        static ZONES: OnceLock<Zones> = OnceLock::new();
        ZONES.get_or_init(|| {
            let dir = std::env::var_os("TZDIR")
                .filter(|d| !d.is_empty())
                .map_or_else(|| PathBuf::from("/usr/share/zoneinfo"), PathBuf::from);
            Zones::new(dir)
        })
    }

    /// The zone a `TZID` names, when it names one: Evolution writes
    /// `/freeassociation.sourceforge.net/Europe/Berlin` (older ones
    /// `/freeassociation.sourceforge.net/Tzfile/Europe/Berlin`), others
    /// the bare name, so the last three, two, then one parts are tried.
    /// `None` for anything else (Outlook's `W. Europe Standard Time`).
    pub(crate) fn get(&self, tzid: &str) -> Option<Zone> {
        let tzid = tzid.trim();
        if tzid.len() > MAX_NAME {
            return None;
        }
        let parts: Vec<&str> = tzid.split('/').filter(|p| !p.is_empty()).collect();
        (1..=parts.len().min(3)).rev().find_map(|n| {
            let name = parts[parts.len() - n..].join("/");
            self.named(&name)
        })
    }

    fn named(&self, name: &str) -> Option<Zone> {
        if !valid_name(name) {
            return None;
        }
        if matches!(
            name,
            "UTC" | "Etc/UTC" | "GMT" | "Etc/GMT" | "Zulu" | "Etc/Zulu" | "Universal"
        ) {
            // Known without tzdata.
            return Some(Zone::Utc);
        }
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(z) = cache.get(name) {
            return z.clone().map(Zone::Tz);
        }
        let z = load(&self.dir.join(name)).ok().map(Arc::new);
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(name.to_owned(), z.clone());
        z.map(Zone::Tz)
    }
}

/// A name that can only be a file under the zone directory: relative,
/// no `..`, only the characters of IANA names.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains("..")
        && name.split('/').all(|p| !p.is_empty())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-' | b'/'))
}

#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file of at most {MAX_FILE_BYTES} bytes")]
    NotAFile,
    #[error("{0}")]
    Tzif(#[from] TzifError),
}

fn load(path: &Path) -> Result<Tzif, LoadError> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(LoadError::NotAFile);
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_FILE_BYTES + 1).read_to_end(&mut data)?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::NotAFile);
    }
    Ok(Tzif::parse(&data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").expect("time")
    }

    fn utc(z: &Zone, s: &str) -> String {
        z.to_utc(at(s))
            .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
            .unwrap_or_default()
    }

    fn local(z: &Zone, s: &str) -> String {
        z.to_local(at(s).and_utc())
            .format("%Y-%m-%d %H:%M")
            .to_string()
    }

    fn system(name: &str) -> Zone {
        Zones::new("/usr/share/zoneinfo")
            .get(name)
            .unwrap_or_else(|| panic!("{name}: is tzdata installed (make deps)?"))
    }

    /// A version 2 TZif file of the given transitions (UTC seconds, the
    /// offset from each) and footer.
    fn tzif(initial: i32, trans: &[(i64, i32)], footer: &str) -> Vec<u8> {
        let mut types = vec![initial];
        for (_, o) in trans {
            if !types.contains(o) {
                types.push(*o);
            }
        }
        let header = |out: &mut Vec<u8>, timecnt: usize| {
            out.extend_from_slice(b"TZif2");
            out.extend_from_slice(&[0; 15]);
            for c in [0, 0, 0, timecnt, types.len(), 4] {
                out.extend_from_slice(&(c as u32).to_be_bytes());
            }
        };
        let mut out = Vec::new();
        // An empty version 1 block, as zic -b slim writes it, but with
        // its types.
        header(&mut out, 0);
        for o in &types {
            out.extend_from_slice(&o.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
        out.extend_from_slice(b"ABC\0");
        header(&mut out, trans.len());
        for (t, _) in trans {
            out.extend_from_slice(&t.to_be_bytes());
        }
        for (_, o) in trans {
            out.push(types.iter().position(|x| x == o).expect("type") as u8);
        }
        for o in &types {
            out.extend_from_slice(&o.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
        out.extend_from_slice(b"ABC\0");
        out.push(b'\n');
        out.extend_from_slice(footer.as_bytes());
        out.push(b'\n');
        out
    }

    #[test]
    fn berlin_gap_and_overlap() {
        let z = system("Europe/Berlin");
        assert_eq!(utc(&z, "2026-01-15 09:00"), "2026-01-15 08:00");
        assert_eq!(utc(&z, "2026-07-15 09:00"), "2026-07-15 07:00");
        // 29 March 2026: 02:00 CET becomes 03:00 CEST; 02:30 does not
        // exist and moves forward by the gap, to 03:30 CEST.
        assert_eq!(utc(&z, "2026-03-29 02:30"), "2026-03-29 01:30");
        assert_eq!(utc(&z, "2026-03-29 01:59"), "2026-03-29 00:59");
        assert_eq!(utc(&z, "2026-03-29 03:00"), "2026-03-29 01:00");
        // 25 October 2026: 02:30 happens twice; the first is CEST.
        assert_eq!(utc(&z, "2026-10-25 02:30"), "2026-10-25 00:30");
        assert_eq!(utc(&z, "2026-10-25 03:00"), "2026-10-25 02:00");
        assert_eq!(local(&z, "2026-10-25 00:30"), "2026-10-25 02:30");
        assert_eq!(local(&z, "2026-10-25 01:30"), "2026-10-25 02:30");
        assert_eq!(local(&z, "2026-03-29 01:00"), "2026-03-29 03:00");
    }

    #[test]
    fn new_york_gap_and_overlap() {
        let z = system("America/New_York");
        // 8 March 2026: 02:00 EST becomes 03:00 EDT.
        assert_eq!(utc(&z, "2026-03-08 02:15"), "2026-03-08 07:15");
        assert_eq!(local(&z, "2026-03-08 07:15"), "2026-03-08 03:15");
        // 1 November 2026: 01:00-02:00 twice; the first is EDT.
        assert_eq!(utc(&z, "2026-11-01 01:30"), "2026-11-01 05:30");
        assert_eq!(local(&z, "2026-11-01 06:30"), "2026-11-01 01:30");
        assert_eq!(utc(&z, "2026-12-01 12:00"), "2026-12-01 17:00");
    }

    #[test]
    fn the_footer_rule_reaches_far_beyond_the_table() {
        // The system's file, whatever it holds, in 2100 (slim files end
        // at the last transition of the present rule).
        let z = system("Europe/Berlin");
        assert_eq!(utc(&z, "2100-07-01 12:00"), "2100-07-01 10:00");
        assert_eq!(utc(&z, "2100-12-01 12:00"), "2100-12-01 11:00");
        // 2100: last Sunday of March is the 28th.
        assert_eq!(utc(&z, "2100-03-28 02:30"), "2100-03-28 01:30");
        assert_eq!(utc(&z, "2100-10-31 02:30"), "2100-10-31 00:30");
        // A slim file with one transition and the footer: only the rule
        // can say 2100.
        let slim = tzif(3208, &[(2_140_045_200, 3600)], "CET-1CEST,M3.5.0,M10.5.0/3");
        let z = Zone::Tz(Arc::new(Tzif::parse(&slim).expect("slim file")));
        assert_eq!(utc(&z, "2100-07-01 12:00"), "2100-07-01 10:00");
        assert_eq!(utc(&z, "2100-03-28 02:30"), "2100-03-28 01:30");
        assert_eq!(local(&z, "2100-10-31 01:30"), "2100-10-31 02:30");
        assert_eq!(local(&z, "1900-01-01 00:00"), "1900-01-01 00:53");
        // The southern hemisphere: daylight time spans the new year.
        let z = Zone::posix("AEST-10AEDT,M10.1.0,M4.1.0/3").expect("rule");
        assert_eq!(utc(&z, "2100-01-15 12:00"), "2100-01-15 01:00");
        assert_eq!(utc(&z, "2100-06-15 12:00"), "2100-06-15 02:00");
        // Permanent daylight time as version 3 writes it.
        let z = Zone::posix("EST5EDT,0/0,J365/25").expect("rule");
        assert_eq!(utc(&z, "2100-06-15 12:00"), "2100-06-15 16:00");
        assert_eq!(utc(&z, "2100-01-01 12:00"), "2100-01-01 16:00");
        // Quoted names and minutes.
        let z = Zone::posix("<+0530>-5:30").expect("rule");
        assert_eq!(utc(&z, "2100-01-01 12:00"), "2100-01-01 06:30");
    }

    #[test]
    fn names_are_checked_and_bad_files_are_unknown_zones() {
        let outer = tempfile::tempdir().expect("tempdir");
        let dir = outer.path().join("zoneinfo");
        std::fs::create_dir_all(dir.join("Etc")).expect("mkdir");
        // A valid zone file outside the directory: never to be read.
        std::fs::write(outer.path().join("Outside"), tzif(0, &[(0, 3600)], "")).expect("write");
        std::fs::write(dir.join("Bad"), b"not a zone").expect("write");
        std::fs::write(dir.join("Short"), &tzif(0, &[(0, 3600)], "")[..60]).expect("write");
        std::fs::write(dir.join("Good"), tzif(0, &[(0, 3600)], "<+01>-1")).expect("write");
        let zones = Zones::new(&dir);
        assert!(zones.get("Good").is_some());
        assert!(zones.get("/freeassociation.sourceforge.net/Good").is_some());
        // Only the last parts of a path are names: `../Good` is `Good`.
        assert!(zones.get("../Good").is_some());
        for bad in [
            "Bad",
            "Short",
            "Etc",
            "Missing",
            "../Outside",
            "zoneinfo/../Outside",
            "/Good/..",
            "W. Europe Standard Time",
            "Good\0",
            "",
        ] {
            assert!(zones.get(bad).is_none(), "{bad:?}");
        }
        assert_eq!(zones.get("UTC"), Some(Zone::Utc));
        assert_eq!(zones.get(&"A/".repeat(100)), None);
        // A name outside the directory is never read, even when it exists.
        assert!(!valid_name("../../etc/passwd"));
        assert!(!valid_name("/etc/localtime"));
    }

    #[test]
    fn damaged_files_never_panic() {
        let good = std::fs::read("/usr/share/zoneinfo/Europe/Berlin")
            .unwrap_or_else(|_| tzif(3600, &[(0, 7200), (100, 3600)], "CET-1"));
        assert!(Tzif::parse(&good).is_ok());
        for cut in 0..good.len() {
            let _ = Tzif::parse(&good[..cut]);
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut bad = good.clone();
            let i = (x as usize) % bad.len();
            bad[i] ^= (x >> 32) as u8 | 1;
            if let Ok(z) = Tzif::parse(&bad) {
                let z = Zone::Tz(Arc::new(z));
                let _ = z.to_utc(at("2026-03-29 02:30"));
                let _ = z.to_local(at("2100-01-01 00:00").and_utc());
            }
        }
        for rule in [
            "",
            "A",
            "ABC",
            "ABC-",
            "ABC+99",
            "ABC1DEF,",
            "ABC1DEF,M13.1.0,M1.1.0",
            "<AB",
            "ABC1DEF,J0,J1",
            "ABC1DEF,M1.1.0/999,M2.1.0",
            "ABC-1DEF-999",
        ] {
            if let Some(r) = PosixTz::parse(rule) {
                let _ = r.offset_at(0);
                let _ = r.offset_at(i64::MAX);
                let _ = r.offset_at(i64::MIN);
            }
        }
        assert_eq!(
            PosixTz::parse("EST5EDT").map(|r| r.offset_at(1_780_000_000)),
            Some(-4 * 3600)
        );
    }
}
