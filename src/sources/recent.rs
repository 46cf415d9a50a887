//! The recently used files → category `documents.recent`, from
//! `$XDG_DATA_HOME/recently-used.xbel` (the freedesktop desktop-bookmark
//! spec, which GTK's `GtkRecentManager` and KDE's `KRecentDocument` write).
//!
//! - **Watching**: inotify on the file's *directory*, because GTK replaces
//!   the file by renaming a new one over it (`MOVED_TO`); writers that
//!   write in place end with `CLOSE_WRITE`. Both re-read the file; a file
//!   that goes away is an empty list. Nothing polls while nothing changes.
//! - **Parsing**: a real XML parser (quick-xml): names, entities and
//!   nesting are checked, so that a half-written or malformed file is
//!   refused rather than half-read. It is logged once (a warning), the
//!   last good list stays in force, and `ListSources` shows the error
//!   until the file parses again.
//! - **Exclusions** (`[recent_documents] exclude`): a file under one of
//!   these paths never reaches the state, so no reader, signal or timeline
//!   row ever carries it. `~/` is the home directory; a pattern matches the
//!   path itself and everything under it; `*` matches any run of
//!   characters (`/` included) and `?` one; a pattern with `://` is
//!   matched against the URI instead. Paths are compared after `.` and
//!   `..` are resolved (lexically; symbolic links are not followed).
//! - **Limit**: newest first (by the latest of the bookmark's `modified`
//!   and `visited`), at most `[recent_documents] limit` (50).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use inotify::{Inotify, WatchMask};
use quick_xml::events::{BytesStart, Event};

use super::{Backoff, SourceContext};
use crate::core::SourceEvent;
use crate::model::RecentDocument;

pub(crate) const NAME: &str = "recent";
/// The file's name in `$XDG_DATA_HOME`.
pub(crate) const FILE: &str = "recently-used.xbel";
/// A larger file is not read (GTK keeps a few hundred entries: well
/// under a megabyte).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The longest list the broker keeps.
const MAX_LIMIT: usize = 1000;

/// The exclusions of [`crate::config::RecentDocumentsConfig::exclude`], with `~` expanded.
#[derive(Debug, Clone)]
pub(crate) struct Exclusions {
    patterns: Vec<String>,
}

impl Exclusions {
    pub(crate) fn new(patterns: &[String], home: Option<&Path>) -> Exclusions {
        let patterns = patterns
            .iter()
            .filter(|p| !p.is_empty())
            .filter_map(|p| match (p.strip_prefix("~/"), p.as_str(), home) {
                (Some(rest), _, Some(h)) => Some(h.join(rest).to_string_lossy().into_owned()),
                (None, "~", Some(h)) => Some(h.to_string_lossy().into_owned()),
                // `~` without a home: nothing can match it.
                (Some(_), _, None) | (None, "~", None) => None,
                (None, _, _) => Some(p.trim_end_matches('/').to_owned()),
            })
            .collect();
        Exclusions { patterns }
    }

    /// Whether `doc` is excluded.
    pub(crate) fn excludes(&self, doc: &RecentDocument) -> bool {
        let path = doc.path.as_deref().map(normalize);
        self.patterns.iter().any(|p| {
            if p.contains("://") {
                return glob(p, &doc.uri) || doc.uri.starts_with(&format!("{p}/"));
            }
            let Some(path) = path.as_deref() else {
                return false;
            };
            if p.contains(['*', '?']) {
                glob(p, path)
            } else {
                path == p || path.starts_with(&format!("{p}/"))
            }
        })
    }
}

/// `path` with `.` and `..` resolved, lexically.
fn normalize(path: &str) -> String {
    let mut out = PathBuf::new();
    for c in Path::new(path).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

/// `*` (any run of characters) and `?` (one character) against all of `s`.
fn glob(pattern: &str, s: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = s.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ParseError(String);

/// One `<bookmark>` as read.
#[derive(Debug, Default)]
struct Raw {
    href: String,
    added: Option<DateTime<Utc>>,
    modified: Option<DateTime<Utc>>,
    visited: Option<DateTime<Utc>>,
    mime_type: Option<String>,
    /// The most recent application: (its `modified`, its `name`).
    app: Option<(Option<DateTime<Utc>>, String)>,
}

fn line_of(text: &str, offset: u64) -> usize {
    let end = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn attr(e: &BytesStart<'_>, name: &[u8]) -> Result<Option<String>, String> {
    for a in e.attributes() {
        let a = a.map_err(|e| e.to_string())?;
        if a.key.as_ref() == name {
            let v = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|e| e.to_string())?;
            return Ok(Some(v.into_owned()));
        }
    }
    Ok(None)
}

fn date(v: Option<String>) -> Option<DateTime<Utc>> {
    v.and_then(|s| DateTime::parse_from_rfc3339(&s).ok())
        .map(|d| d.with_timezone(&Utc))
}

/// Parse the text of a `recently-used.xbel` into its entries, newest
/// first (not yet filtered nor limited).
pub(crate) fn parse(text: &str) -> Result<Vec<RecentDocument>, ParseError> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut stack: Vec<Vec<u8>> = Vec::new();
    let mut root = false;
    let mut current: Option<Raw> = None;
    let mut out: Vec<Raw> = Vec::new();
    let fail = |reader: &quick_xml::Reader<&[u8]>, why: String| {
        ParseError(format!(
            "line {}: {why}",
            line_of(text, reader.buffer_position())
        ))
    };
    loop {
        let ev = reader
            .read_event()
            .map_err(|e| fail(&reader, e.to_string()))?;
        let (e, empty) = match &ev {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                let name = stack.pop();
                if name.as_deref() == Some(b"bookmark".as_slice())
                    && let Some(raw) = current.take()
                {
                    out.push(raw);
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = e.name().as_ref().to_vec();
        let a = |n: &[u8]| attr(e, n).map_err(|why| fail(&reader, why));
        match (stack.len(), name.as_slice()) {
            (0, b"xbel") => root = true,
            (0, other) => {
                return Err(fail(
                    &reader,
                    format!(
                        "the root element is <{}>, not <xbel>",
                        String::from_utf8_lossy(other)
                    ),
                ));
            }
            (1, b"bookmark") => {
                let href = a(b"href")?.unwrap_or_default();
                current = Some(Raw {
                    href,
                    added: date(a(b"added")?),
                    modified: date(a(b"modified")?),
                    visited: date(a(b"visited")?),
                    ..Raw::default()
                });
            }
            (_, b"mime:mime-type") => {
                if let Some(raw) = current.as_mut() {
                    raw.mime_type = a(b"type")?.filter(|t| !t.is_empty());
                }
            }
            (_, b"bookmark:application") => {
                if let (Some(raw), Some(app)) = (current.as_mut(), a(b"name")?) {
                    let modified = date(a(b"modified")?);
                    if raw.app.as_ref().is_none_or(|(m, _)| modified >= *m) {
                        raw.app = Some((modified, app));
                    }
                }
            }
            _ => {}
        }
        if empty {
            if name == b"bookmark"
                && let Some(raw) = current.take()
            {
                out.push(raw);
            }
        } else {
            stack.push(name);
        }
    }
    if !root {
        return Err(ParseError("no <xbel> element: not a bookmark file".into()));
    }
    if let Some(open) = stack.last() {
        return Err(ParseError(format!(
            "the file ends inside <{}>",
            String::from_utf8_lossy(open)
        )));
    }
    let mut docs: Vec<RecentDocument> = out
        .into_iter()
        .filter(|r| !r.href.is_empty())
        .map(document)
        .collect();
    docs.sort_by(|a, b| b.used().cmp(&a.used()).then_with(|| a.uri.cmp(&b.uri)));
    Ok(docs)
}

fn document(r: Raw) -> RecentDocument {
    let path = r.href.strip_prefix("file://").map(|rest| {
        // `file:///p` or `file://localhost/p`: the path starts at the
        // first `/`.
        let p = rest.find('/').map_or("", |i| &rest[i..]);
        percent_encoding::percent_decode_str(p)
            .decode_utf8_lossy()
            .into_owned()
    });
    let name = match &path {
        Some(p) => Path::new(p)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.clone()),
        None => r
            .href
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(&r.href)
            .to_owned(),
    };
    RecentDocument {
        uri: r.href,
        path,
        name,
        mime_type: r.mime_type,
        app: r.app.map(|(_, n)| n),
        modified: r.modified.or(r.added),
        visited: r.visited,
    }
}

/// What reading the file gave.
#[derive(Debug, PartialEq)]
enum Read {
    Documents(Vec<RecentDocument>),
    Failed(String),
}

/// Read and parse the file at `path`: the list (filtered and limited), or
/// why not. A missing file is an empty list.
async fn read(path: &Path, excl: &Exclusions, limit: usize) -> Read {
    let bytes = match tokio::fs::metadata(path).await {
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            return Read::Failed(format!(
                "{} is {} bytes, more than the {MAX_FILE_BYTES} read",
                path.display(),
                m.len()
            ));
        }
        Ok(_) => tokio::fs::read(path).await,
        Err(e) => Err(e),
    };
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Documents(Vec::new()),
        Err(e) => return Read::Failed(format!("cannot read {}: {e}", path.display())),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Read::Failed(format!("{}: not UTF-8", path.display()));
    };
    match parse(&text) {
        Ok(docs) => Read::Documents(
            docs.into_iter()
                .filter(|d| !excl.excludes(d))
                .take(limit.min(MAX_LIMIT))
                .collect(),
        ),
        Err(e) => Read::Failed(format!("{}: {e}", path.display())),
    }
}

/// Follow the file until cancelled.
pub(crate) async fn run(ctx: SourceContext) {
    // `data_dir` is `$XDG_DATA_HOME/contextd`.
    let Some(dir) = ctx.config.paths.data_dir.parent().map(Path::to_path_buf) else {
        ctx.status(NAME, false, Some("no data directory".into()))
            .await;
        return;
    };
    let settings = ctx.config.file.recent_documents.clone();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    if home.is_none() && settings.exclude.iter().any(|p| p.starts_with('~')) {
        tracing::warn!(
            source = NAME,
            "HOME is not set: the [recent_documents] exclusions that start with ~ match nothing"
        );
    }
    let excl = Exclusions::new(&settings.exclude, home.as_deref());
    run_in(ctx, dir, excl, settings.limit).await
}

async fn run_in(ctx: SourceContext, dir: PathBuf, excl: Exclusions, limit: usize) {
    let path = dir.join(FILE);
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    loop {
        let watch = Inotify::init().and_then(|ino| {
            let mask = WatchMask::CLOSE_WRITE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::DELETE
                | WatchMask::DELETE_SELF
                | WatchMask::MOVE_SELF;
            ino.watches().add(&dir, mask)?;
            ino.into_event_stream(vec![0u8; 4096])
        });
        let mut events = match watch {
            Ok(s) => s,
            Err(e) => {
                // Most likely the directory does not exist yet.
                let why = format!("cannot watch {}: {e}", dir.display());
                tracing::debug!(source = NAME, "{why}");
                ctx.status(NAME, false, Some(why)).await;
                if !ctx.sleep(backoff.next_delay()).await {
                    return;
                }
                continue;
            }
        };
        backoff.reset();
        let mut warned = false;
        let mut last: Option<Vec<RecentDocument>> = None;
        loop {
            match read(&path, &excl, limit).await {
                Read::Documents(docs) => {
                    warned = false;
                    ctx.status(NAME, true, None).await;
                    if last.as_ref() != Some(&docs) {
                        last = Some(docs.clone());
                        if !ctx
                            .send(SourceEvent::RecentDocuments {
                                documents: Some(docs),
                            })
                            .await
                        {
                            return;
                        }
                    }
                }
                Read::Failed(why) => {
                    if !warned {
                        tracing::warn!(source = NAME, "{why}; keeping the last good list");
                        warned = true;
                    }
                    let shown = format!("{why} (showing the last good list)");
                    ctx.status(NAME, last.is_some(), Some(shown)).await;
                }
            }
            // Wait for a change of the file (or of its directory).
            let again = loop {
                let ev = tokio::select! {
                    _ = ctx.cancel.cancelled() => return,
                    ev = events.next() => ev,
                };
                match ev {
                    Some(Ok(ev)) => {
                        if ev.mask.intersects(
                            inotify::EventMask::DELETE_SELF | inotify::EventMask::MOVE_SELF,
                        ) {
                            break false;
                        }
                        if ev.name.as_deref() == Some(std::ffi::OsStr::new(FILE)) {
                            break true;
                        }
                    }
                    Some(Err(_)) | None => break false,
                }
            };
            if !again {
                // The directory went away: watch it again when it is back.
                let _ = ctx
                    .send(SourceEvent::RecentDocuments { documents: None })
                    .await;
                ctx.status(NAME, false, Some(format!("{} went away", dir.display())))
                    .await;
                break;
            }
        }
        if !ctx.sleep(backoff.next_delay()).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GTK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<xbel version="1.0"
      xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks"
      xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info"
>
  <bookmark href="file:///home/a/old%20notes.txt" added="2026-11-20T10:00:00.000001Z" modified="2026-11-20T10:00:00.000002Z" visited="2026-11-20T10:00:00.000001Z">
    <info>
      <metadata owner="http://freedesktop.org">
        <mime:mime-type type="text/plain"/>
        <bookmark:applications>
          <bookmark:application name="gedit" exec="&apos;gedit %u&apos;" modified="2026-11-20T10:00:00Z" count="1"/>
          <bookmark:application name="Text &amp; More" exec="&apos;tm %u&apos;" modified="2026-11-21T10:00:00Z" count="1"/>
        </bookmark:applications>
      </metadata>
    </info>
  </bookmark>
  <bookmark href="file:///home/a/.ssh/id_ed25519" added="2026-11-22T10:00:00Z" modified="2026-11-22T10:00:00Z" visited="2026-11-22T10:00:00Z"/>
  <bookmark href="https://example.org/report.pdf" added="2026-11-21T10:00:00Z" modified="2026-11-21T10:00:00Z" visited="2026-11-21T10:00:00Z"/>
</xbel>"#;

    #[test]
    fn parses_gtk_files_newest_first() {
        let docs = parse(GTK).expect("parses");
        let uris: Vec<&str> = docs.iter().map(|d| d.uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "file:///home/a/.ssh/id_ed25519",
                "https://example.org/report.pdf",
                "file:///home/a/old%20notes.txt"
            ]
        );
        let notes = &docs[2];
        assert_eq!(notes.path.as_deref(), Some("/home/a/old notes.txt"));
        assert_eq!(notes.name, "old notes.txt");
        assert_eq!(notes.mime_type.as_deref(), Some("text/plain"));
        assert_eq!(notes.app.as_deref(), Some("Text & More"), "the latest app");
        assert_eq!(docs[1].name, "report.pdf");
        assert_eq!(docs[1].path, None);
    }

    #[test]
    fn malformed_files_are_refused() {
        for bad in [
            "",
            "<xbel>",
            "<xbel><bookmark href='a'></xbel>",
            "<html/>",
            "<xbel><bookmark href=\"a&nope;\"/></xbel>",
            "not xml at all",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("<xbel/>"), Ok(vec![]));
    }

    #[test]
    fn exclusions_match_paths_under_them() {
        let home = Path::new("/home/a");
        let e = Exclusions::new(
            &[
                "~/.ssh".into(),
                "/srv/secret/".into(),
                "*.kdbx".into(),
                "https://intranet.example".into(),
            ],
            Some(home),
        );
        let doc = |uri: &str| {
            document(Raw {
                href: uri.into(),
                ..Raw::default()
            })
        };
        for yes in [
            "file:///home/a/.ssh/id_ed25519",
            "file:///home/a/.ssh",
            "file:///home/a/docs/../.ssh/config",
            "file:///srv/secret/x",
            "file:///home/a/vault.kdbx",
            "https://intranet.example/wiki",
        ] {
            assert!(e.excludes(&doc(yes)), "{yes}");
        }
        for no in [
            "file:///home/a/.sshfoo",
            "file:///home/b/.ssh/id",
            "file:///srv/secretive",
            "https://example.org/.ssh",
        ] {
            assert!(!e.excludes(&doc(no)), "{no}");
        }
        assert!(!Exclusions::new(&["~/.ssh".into()], None).excludes(&doc("file:///.ssh/x")));
    }
}
