//! `contextctl`'s commands, in the library so that tests can drive them.

mod fdo;

use std::collections::BTreeSet;

use futures_util::StreamExt;
use serde_json::Value;
use zbus::Connection;

use crate::client::json::{dict_to_json, to_json};
use crate::client::proxy::{
    Consent1Proxy, Context1Proxy, History1Proxy, Provider1Proxy, Subscription1Proxy,
};

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// No bus, or no daemon and nothing that starts it: what to do.
    #[error("{0}")]
    Unreachable(#[from] crate::client::reach::Unreachable),
    #[error("{0}")]
    Call(String),
}

impl From<zbus::Error> for CtlError {
    fn from(e: zbus::Error) -> Self {
        // D-Bus errors already read well: "org.contextd.Error.NotAllowed: ...".
        // The daemon gone or not startable: what to do instead.
        let unreachable = match &e {
            zbus::Error::MethodError(name, msg, _) => {
                crate::client::reach::from_call_error(name.as_str(), msg.as_deref().unwrap_or(""))
            }
            // The bus's own errors (Spawn.*, ServiceUnknown) arrive parsed.
            zbus::Error::FDO(fdo) => crate::client::reach::from_call_error(
                zbus::DBusError::name(fdo.as_ref()).as_str(),
                zbus::DBusError::description(fdo.as_ref()).unwrap_or(""),
            ),
            _ => None,
        };
        if let Some(u) = unreachable {
            return CtlError::Unreachable(u);
        }
        match &e {
            zbus::Error::MethodError(name, Some(msg), _) => {
                let short = name.as_str().trim_start_matches("org.contextd.Error.");
                CtlError::Call(format!("{short}: {msg}"))
            }
            _ => CtlError::Call(e.to_string()),
        }
    }
}

pub type Result<T> = std::result::Result<T, CtlError>;

/// The session bus, with contextd on it or activatable (else an error
/// that says what to do: `client::reach`).
pub async fn connect() -> Result<Connection> {
    Ok(crate::client::reach::session_bus().await?)
}

/// `--json`, or the sentence for an empty list: `true` when nothing is
/// left to print.
fn printed_plainly(out: Output, v: &[Value], empty: &str) -> bool {
    if out.json {
        print_json(&Value::Array(v.to_vec()));
        return true;
    }
    if v.is_empty() {
        println!("{empty}");
        return true;
    }
    false
}

fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// Render rows as an aligned table with a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                out.push_str(c);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

fn short_time(t: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| {
            d.with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| t.to_owned())
}

fn sources_table(sources: &[Value]) -> String {
    let rows: Vec<Vec<String>> = sources
        .iter()
        .map(|v| {
            vec![
                s(v, "name").to_owned(),
                if v.get("available").and_then(Value::as_bool).unwrap_or(false) {
                    "available".into()
                } else {
                    "unavailable".into()
                },
                short_time(s(v, "since")),
                s(v, "last_error").to_owned(),
            ]
        })
        .collect();
    table(&["SOURCE", "STATE", "SINCE", "LAST ERROR"], &rows)
}

/// Text from a client (titles, app ids) made safe for a terminal: control
/// characters (escape sequences, newlines) are shown as `\u{..}` escapes,
/// so that a window title cannot move the cursor or recolour the screen.
pub fn printable(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    for c in t.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// `Name (app.id) — title`: the name only when a desktop entry gave one,
/// the title only when the caller may see it.
pub fn window_line(w: &Value) -> String {
    let app_id = printable(s(w, "app_id"));
    let app = match w.get("app_name").and_then(Value::as_str) {
        Some(n) => format!("{} ({app_id})", printable(n)),
        None => app_id,
    };
    match w.get("title").and_then(Value::as_str) {
        Some(t) => format!("{app} — {}", printable(t)),
        None => app,
    }
}

fn windows_table(windows: &[Value]) -> String {
    let titles = windows.iter().any(|w| w.get("title").is_some());
    let rows: Vec<Vec<String>> = windows
        .iter()
        .map(|w| {
            let mark = if w.get("focused").and_then(Value::as_bool).unwrap_or(false) {
                "*"
            } else {
                ""
            };
            let states: Vec<&str> = w
                .get("states")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut r = vec![
                mark.to_owned(),
                printable(w.get("app_name").and_then(Value::as_str).unwrap_or("")),
                printable(s(w, "app_id")),
            ];
            if titles {
                r.push(printable(s(w, "title")));
            }
            r.push(states.join(","));
            r
        })
        .collect();
    if titles {
        table(&["", "APP", "APP ID", "TITLE", "STATES"], &rows)
    } else {
        table(&["", "APP", "APP ID", "STATES"], &rows)
    }
}

fn array(v: &Value, k: &str) -> Vec<Value> {
    v.get(k)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub async fn status(conn: &Connection, out: Output) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let snap = dict_to_json(&p.get_snapshot().await?);
    if out.json {
        print_json(&snap);
        return Ok(());
    }
    print!("{}", sources_table(&array(&snap, "sources")));
    println!();
    let withheld: BTreeSet<String> = array(&snap, "withheld")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if let Some(ws) = snap.get("windows").and_then(Value::as_array) {
        let active = snap.get("active_window").and_then(Value::as_str);
        match ws.iter().find(|w| Some(s(w, "id")) == active) {
            Some(w) => println!("Active window:  {}", window_line(w)),
            None => println!("Active window:  none"),
        }
        println!("Windows:        {}", ws.len());
    }
    for (key, label) in [
        ("media.playback", "Playing:"),
        ("media.capture", "Capturing:"),
    ] {
        if let Some(a) = snap.get(key).and_then(Value::as_array) {
            println!("{label:<15} {}", a.len());
        }
    }
    // Session, power, network, the last notifications, now playing.
    print!("{}", fdo::status_lines(&snap));
    if !withheld.is_empty() {
        println!();
        println!(
            "Withheld from contextctl: {}",
            withheld.into_iter().collect::<Vec<_>>().join(", ")
        );
        println!("(grant them in policy.toml; see `contextctl categories`)");
    }
    Ok(())
}

fn compact(v: &Value) -> String {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

pub async fn windows(conn: &Connection, out: Output) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let ws: Vec<Value> = p.list_windows().await?.iter().map(dict_to_json).collect();
    if out.json {
        print_json(&Value::Array(ws));
    } else if ws.is_empty() {
        println!("No windows.");
    } else {
        print!("{}", windows_table(&ws));
    }
    Ok(())
}

pub async fn sources(conn: &Connection, out: Output) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let v: Vec<Value> = p.list_sources().await?.iter().map(dict_to_json).collect();
    if out.json {
        print_json(&Value::Array(v));
    } else {
        print!("{}", sources_table(&v));
    }
    Ok(())
}

pub async fn categories(conn: &Connection, out: Output) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let v: Vec<Value> = p
        .list_categories()
        .await?
        .iter()
        .map(dict_to_json)
        .collect();
    if out.json {
        print_json(&Value::Array(v));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|c| {
            vec![
                s(c, "name").to_owned(),
                if c.get("allowed").and_then(Value::as_bool).unwrap_or(false) {
                    "yes".into()
                } else {
                    "no".into()
                },
                s(c, "description").to_owned(),
            ]
        })
        .collect();
    print!("{}", table(&["CATEGORY", "ALLOWED", "DESCRIPTION"], &rows));
    Ok(())
}

pub async fn watch(conn: &Connection, out: Output, categories: Vec<String>) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let cats: Vec<String> = if categories.is_empty() {
        p.list_categories()
            .await?
            .iter()
            .map(dict_to_json)
            .filter(|c| c.get("allowed").and_then(Value::as_bool).unwrap_or(false))
            .map(|c| s(&c, "name").to_owned())
            .collect()
    } else {
        categories
    };
    if cats.is_empty() {
        return Err(CtlError::Call(
            "contextctl may not read any category; grant some in policy.toml".into(),
        ));
    }
    let refs: Vec<&str> = cats.iter().map(String::as_str).collect();
    let path = p.subscribe(&refs).await?;
    let sub = Subscription1Proxy::builder(conn).path(path).build().await?;
    let mut changed = sub.receive_changed().await?;
    let mut revoked = sub.receive_revoked().await?;
    eprintln!("watching {} (Ctrl-C to stop)", cats.join(", "));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            sig = changed.next() => {
                let Some(sig) = sig else { break };
                let Ok(args) = sig.args() else { continue };
                let data = Value::Object(args.data().iter().map(|(k, v)| (k.clone(), to_json(v))).collect());
                if out.json {
                    println!("{}", serde_json::json!({"category": args.category(), "data": data}));
                } else {
                    let now = chrono::Local::now().format("%H:%M:%S%.3f");
                    println!("{now} {:<15} {}", args.category(), describe_change(&data));
                }
            }
            sig = revoked.next() => {
                if let Some(Ok(args)) = sig.map(|s| s.args().map(|a| (a.category().clone(), a.reason().clone()))) {
                    return Err(CtlError::Call(format!("revoked {}: {}", args.0, args.1)));
                }
                break;
            }
        }
    }
    let _ = sub.unsubscribe().await;
    Ok(())
}

pub fn describe_change(d: &Value) -> String {
    let event = s(d, "event");
    if let Some(w) = d.get("window") {
        let states: Vec<&str> = w
            .get("states")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let states = if event == "focus" || states.is_empty() {
            String::new()
        } else {
            format!("  [{}]", states.join(","))
        };
        return format!("{event:<7} {}{states}", window_line(w));
    }
    if event == "focus" {
        return "focus   none".into();
    }
    for k in [
        "stream",
        "notification",
        "context",
        "session",
        "power",
        "network",
    ] {
        if let Some(v) = d.get(k) {
            return format!("{event} {k} {}", compact(v));
        }
    }
    event.to_owned()
}

/// Parse `30s`, `15m`, `8h`, `7d`, `2w`.
pub fn parse_duration(s: &str) -> Result<chrono::Duration> {
    let s = s.trim();
    let bad = || CtlError::Call(format!("'{s}' is not a duration (try 30m, 8h, 7d)"));
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 7 * 86400,
        _ => return Err(bad()),
    };
    n.checked_mul(secs)
        .filter(|v| *v > 0 && *v <= 10 * 365 * 86400)
        .map(chrono::Duration::seconds)
        .ok_or_else(bad)
}

/// `contextctl providers`: who publishes which kinds, since when; who is
/// refused. Never the data.
pub async fn providers(conn: &Connection, out: Output) -> Result<()> {
    let p = Consent1Proxy::new(conn).await?;
    let v: Vec<Value> = p.list_providers().await?.iter().map(dict_to_json).collect();
    if printed_plainly(out, &v, "No app publishes context, and none is refused.") {
        return Ok(());
    }
    let mut rows = Vec::new();
    for a in &v {
        let app = match s(a, "app_name") {
            "" => s(a, "app_id").to_owned(),
            name => format!("{name} ({})", s(a, "app_id")),
        };
        let state = if a.get("allowed").and_then(Value::as_bool) == Some(false) {
            format!(
                "refused since {}",
                a.get("refused_since")
                    .and_then(Value::as_str)
                    .map(short_time)
                    .unwrap_or_default()
            )
        } else {
            "allowed".to_owned()
        };
        let kinds = a
            .get("kinds")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if kinds.is_empty() {
            rows.push(vec![app, "-".into(), "-".into(), "-".into(), state]);
            continue;
        }
        for k in kinds {
            rows.push(vec![
                app.clone(),
                s(&k, "kind").to_owned(),
                s(&k, "name").to_owned(),
                k.get("since")
                    .and_then(Value::as_str)
                    .map(short_time)
                    .unwrap_or_default(),
                state.clone(),
            ]);
        }
    }
    print!(
        "{}",
        table(&["APP", "KIND", "NAME", "SINCE", "PUBLISHING"], &rows)
    );
    Ok(())
}

/// `contextctl readers`: live subscriptions and MCP sessions.
pub async fn readers(conn: &Connection, out: Output) -> Result<()> {
    let p = Consent1Proxy::new(conn).await?;
    let v: Vec<Value> = p.list_readers().await?.iter().map(dict_to_json).collect();
    if printed_plainly(out, &v, "Nobody follows your context right now.") {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|r| {
            let app = match (s(r, "name"), s(r, "client")) {
                ("", "") => s(r, "app_id").to_owned(),
                ("", c) => format!("{} ({c})", s(r, "app_id")),
                (n, _) => format!("{n} ({})", s(r, "app_id")),
            };
            let cats = array(r, "categories")
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",");
            vec![
                r.get("id").map(ToString::to_string).unwrap_or_default(),
                app,
                format!("{} ({})", s(r, "channel"), s(r, "transport")),
                if cats.is_empty() { "-".into() } else { cats },
                short_time(s(r, "since")),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["ID", "APP", "THROUGH", "FOLLOWS", "SINCE"], &rows)
    );
    Ok(())
}

/// `contextctl readers end ID`.
pub async fn end_reader(conn: &Connection, id: u64) -> Result<()> {
    if Consent1Proxy::new(conn).await?.end_reader(id).await? {
        println!(
            "Ended reader {id}. Its app may start again while it is allowed: change the decision to stop that."
        );
    } else {
        println!("There is no reader {id} (it may have ended already).");
    }
    Ok(())
}

/// `contextctl dashboard`: a one-time link to the dashboard, printed
/// (stdout) and opened in the desktop's browser (unless `no_open`, or
/// there is no desktop).
///
/// The browser never gets the link on its command line: every user can
/// read `/proc/PID/cmdline`, and whoever redeems a ticket first holds the
/// session. It gets a `file://` path instead, of a 0600 page in the
/// private runtime directory that sends it on to the link (as Jupyter
/// does).
pub async fn dashboard(conn: &Connection, no_open: bool) -> Result<()> {
    let url = Consent1Proxy::new(conn).await?.open_dashboard().await?;
    println!("{url}");
    eprintln!("The link works once, within two minutes.");
    let desktop =
        std::env::var_os("WAYLAND_DISPLAY").is_some() || std::env::var_os("DISPLAY").is_some();
    if no_open || !desktop {
        return Ok(());
    }
    let dir = crate::config::user_runtime_dir().map(|d| d.join("contextd"));
    let file = match dir.as_deref().map(|d| link_file(d, &url)) {
        Some(Ok(f)) => f,
        Some(Err(e)) => {
            eprintln!("Cannot write the link for your browser ({e}); open the link yourself.");
            return Ok(());
        }
        None => {
            eprintln!(
                "No runtime directory ($XDG_RUNTIME_DIR) for the link's file; open the link yourself."
            );
            return Ok(());
        }
    };
    let target = format!(
        "file://{}",
        percent_encoding::utf8_percent_encode(&file.to_string_lossy(), FILE_PATH)
    );
    let mut cmd = opener(&std::env::var("BROWSER").unwrap_or_default(), &target);
    match cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(_) => eprintln!("Opening it in your browser."),
        Err(e) => eprintln!("Cannot open a browser ({e}); open the link yourself."),
    }
    Ok(())
}

/// What may stay unescaped in the `file://` URL of the link's page.
const FILE_PATH: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.');

/// The command that shows `target` in the user's browser: the first of
/// `browser` (`$BROWSER`, a `:`-separated list; `%s` stands for the
/// target, else it comes last), else `xdg-open`.
fn opener(browser: &str, target: &str) -> std::process::Command {
    let mut words = browser
        .split(':')
        .find(|c| !c.trim().is_empty())
        .map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .unwrap_or_default();
    if words.is_empty() {
        words.push("xdg-open".into());
    }
    let mut cmd = std::process::Command::new(&words[0]);
    let mut placed = false;
    for w in &words[1..] {
        if w.contains("%s") {
            placed = true;
            cmd.arg(w.replace("%s", target));
        } else {
            cmd.arg(w);
        }
    }
    if !placed {
        cmd.arg(target);
    }
    cmd
}

/// The link's page files are named `dashboard-RANDOM.html`.
const LINK_PREFIX: &str = "dashboard-";

/// Write the page that sends the browser on to `url` into `dir` (created
/// 0700 if missing, refused unless ours and private), readable by the
/// user alone; remove the pages of earlier runs whose tickets have
/// expired.
fn link_file(dir: &std::path::Path, url: &str) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a directory only you may enter",
            dir.display()
        )));
    }
    remove_old_links(dir);
    let random = random_name()?;
    let path = dir.join(format!("{LINK_PREFIX}{random}.html"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(link_page(url).as_bytes())?;
    Ok(path)
}

/// 32 random bytes, URL-safe base64: a link page's name nobody guesses
/// (the page holds a ticket until it is used).
fn random_name() -> std::io::Result<String> {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut b = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| std::io::Error::other("the system's random number generator failed"))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b))
}

/// Remove link pages older than a ticket lives (they open nothing any
/// more); a newer one may still be on its way to a browser.
fn remove_old_links(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(LINK_PREFIX) || !name.ends_with(".html") {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > crate::model::admin::TICKET_TTL);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A page that goes on to `url` at once (and links to it, for browsers
/// that do not follow a refresh), sending no referrer.
fn link_page(url: &str) -> String {
    let u: String = url
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta http-equiv=\"refresh\" content=\"0;url={u}\">\n\
         <title>contextd dashboard</title>\n</head>\n<body>\n\
         <p>Opening the <a href=\"{u}\">contextd dashboard</a>.</p>\n</body>\n</html>\n"
    )
}

/// `contextctl publish KIND JSON`: publish, keep the connection (the
/// entry lives as long as it does) until Ctrl-C or SIGTERM, then retract.
pub async fn publish(conn: &Connection, kind: &str, json: &str) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let p = Provider1Proxy::new(conn).await?;
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| CtlError::Call(format!("cannot watch SIGTERM: {e}")))?;
    p.publish(kind, json).await?;
    eprintln!("Published your {kind}; it stays while this runs (Ctrl-C retracts it).");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    p.retract(kind).await?;
    eprintln!("Retracted.");
    Ok(())
}

/// `contextctl providers refuse|allow APP`.
pub async fn set_publishing(conn: &Connection, app: &str, allowed: bool) -> Result<()> {
    let changed = Consent1Proxy::new(conn)
        .await?
        .set_publishing(app, allowed)
        .await?;
    match (allowed, changed) {
        (true, true) => println!("{app} may publish context again."),
        (true, false) => println!("{app} was not refused; nothing changed."),
        (false, true) => println!(
            "Refused what {app} publishes: its entries are gone, and its publishes fail until `contextctl providers allow {app}`."
        ),
        (false, false) => println!("{app} was already refused."),
    }
    Ok(())
}

pub async fn consent_list(conn: &Connection, out: Output) -> Result<()> {
    let p = Consent1Proxy::new(conn).await?;
    let apps: Vec<Value> = p.list_apps().await?.iter().map(dict_to_json).collect();
    let grants: Vec<Value> = p.list_grants().await?.iter().map(dict_to_json).collect();
    let paused = p.paused().await.unwrap_or(false);
    if out.json {
        print_json(&serde_json::json!({"paused": paused, "apps": apps, "grants": grants}));
        return Ok(());
    }
    if paused {
        println!("Sharing is PAUSED: no app gets anything (contextctl consent resume).\n");
    }
    let rows: Vec<Vec<String>> = grants
        .iter()
        .map(|g| {
            vec![
                s(g, "app_id").to_owned(),
                s(g, "category").to_owned(),
                s(g, "decision").to_owned(),
                match s(g, "origin") {
                    "policy" => "policy.toml".to_owned(),
                    "prompt" => "you, in a prompt".to_owned(),
                    "manage" => "you".to_owned(),
                    "import" => "an import".to_owned(),
                    o => o.to_owned(),
                },
                g.get("expires")
                    .and_then(Value::as_str)
                    .map(short_time)
                    .unwrap_or_else(|| "never".into()),
            ]
        })
        .collect();
    if rows.is_empty() {
        println!("No decisions yet.");
    } else {
        print!(
            "{}",
            table(&["APP", "CATEGORY", "DECISION", "BY", "EXPIRES"], &rows)
        );
    }
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|a| {
            vec![
                s(a, "app_id").to_owned(),
                s(a, "identity_source").to_owned(),
                short_time(s(a, "last_seen")),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        print!(
            "{}",
            table(&["APP THAT ASKED", "IDENTIFIED BY", "LAST SEEN"], &rows)
        );
    }
    Ok(())
}

pub async fn consent_set(
    conn: &Connection,
    app: &str,
    category: &str,
    decision: &str,
    duration: Option<&str>,
) -> Result<()> {
    let expires = match duration {
        Some(d) => (chrono::Utc::now() + parse_duration(d)?).timestamp(),
        None => 0,
    };
    Consent1Proxy::new(conn)
        .await?
        .set_grant(app, category, decision, expires)
        .await?;
    let until = if expires > 0 {
        format!(
            " until {}",
            short_time(
                &chrono::DateTime::from_timestamp(expires, 0)
                    .unwrap_or_default()
                    .to_rfc3339()
            )
        )
    } else {
        String::new()
    };
    let verb = if decision == "allow" {
        "may now read"
    } else {
        "may not read"
    };
    println!("{app} {verb} {category}{until}.");
    Ok(())
}

pub async fn consent_revoke(conn: &Connection, app: &str, category: &str) -> Result<()> {
    if Consent1Proxy::new(conn)
        .await?
        .revoke(app, category)
        .await?
    {
        println!("Removed your decision: {app} will be asked again for {category}.");
    } else {
        println!(
            "There was no decision of yours for {app} and {category} (policy.toml grants are changed in the file)."
        );
    }
    Ok(())
}

pub async fn consent_forget(conn: &Connection, app: &str) -> Result<()> {
    let n = Consent1Proxy::new(conn).await?.forget_app(app).await?;
    println!("Forgot {app} ({n} stored rows removed).");
    Ok(())
}

pub async fn export(conn: &Connection, history: bool) -> Result<()> {
    let data = Consent1Proxy::new(conn).await?.export(history).await?;
    use std::io::Write;
    std::io::stdout()
        .write_all(data.as_bytes())
        .map_err(|e| CtlError::Call(format!("writing the export: {e}")))?;
    Ok(())
}

pub async fn import(conn: &Connection, out: Output, file: &std::path::Path) -> Result<()> {
    let data = std::fs::read_to_string(file)
        .map_err(|e| CtlError::Call(format!("{}: {e}", file.display())))?;
    let report = dict_to_json(&Consent1Proxy::new(conn).await?.import(&data).await?);
    if out.json {
        print_json(&report);
        return Ok(());
    }
    println!(
        "Imported {} decisions ({} newer ones here kept), {} refused publishers, {} timeline entries.",
        report["decisions"],
        report["decisions_kept"],
        report["refused_publishers"],
        report["history"]
    );
    let tokens = array(&report, "tokens_to_recreate");
    if !tokens.is_empty() {
        let names: Vec<&str> = tokens.iter().filter_map(Value::as_str).collect();
        println!(
            "Tokens are never exported: create them again with contextctl token create NAME ({}).",
            names.join(", ")
        );
    }
    Ok(())
}

pub async fn key_rotate(conn: &Connection) -> Result<()> {
    let at = Consent1Proxy::new(conn).await?.rotate_key().await?;
    println!("The database has a new key, kept in {at}. The old key no longer opens it.");
    Ok(())
}

pub async fn recovery_dismiss(conn: &Connection) -> Result<()> {
    if Consent1Proxy::new(conn).await?.dismiss_recovery().await? {
        println!(
            "The new database is accepted: apps are asked again for what you have not decided."
        );
    } else {
        println!("contextd was not degraded: nothing to dismiss.");
    }
    Ok(())
}

pub async fn consent_pause(conn: &Connection, paused: bool) -> Result<()> {
    Consent1Proxy::new(conn).await?.set_paused(paused).await?;
    println!(
        "{}",
        if paused {
            "Sharing paused: no app gets any context."
        } else {
            "Sharing resumed."
        }
    );
    Ok(())
}

pub async fn audit(
    conn: &Connection,
    out: Output,
    app: Option<&str>,
    since: &str,
    limit: u32,
) -> Result<()> {
    let since = (chrono::Utc::now() - parse_duration(since)?).timestamp();
    let v: Vec<Value> = Consent1Proxy::new(conn)
        .await?
        .get_audit(since, 0, app.unwrap_or(""), limit)
        .await?
        .iter()
        .map(dict_to_json)
        .collect();
    if printed_plainly(out, &v, "No access recorded in that time.") {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|e| {
            let allowed = e.get("allowed").and_then(Value::as_bool).unwrap_or(false);
            let count = e.get("count").and_then(Value::as_i64).unwrap_or(1);
            vec![
                short_time(s(e, "time")),
                s(e, "app_id").to_owned(),
                s(e, "category").to_owned(),
                s(e, "channel").to_owned(),
                s(e, "request").to_owned(),
                if allowed {
                    "allowed".into()
                } else {
                    "refused".into()
                },
                s(e, "reason").to_owned(),
                if count > 1 {
                    format!("×{count}")
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "TIME", "APP", "CATEGORY", "CHANNEL", "CALLED", "ANSWER", "WHY", ""
            ],
            &rows
        )
    );
    Ok(())
}

fn app_of(v: &Value) -> String {
    let id = s(v, "app_id");
    let pid = v.get("pid").and_then(Value::as_u64);
    match (id.is_empty(), pid) {
        (false, _) => id.to_owned(),
        (true, Some(p)) => format!("pid {p}"),
        (true, None) => "unknown".into(),
    }
}

fn streams_table(streams: &[Value]) -> String {
    let rows: Vec<Vec<String>> = streams
        .iter()
        .map(|v| {
            vec![
                s(v, "kind").to_owned(),
                app_of(v),
                s(v, "claimed_name").to_owned(),
                s(v, "state").to_owned(),
                short_time(s(v, "since")),
                s(v, "media_role").to_owned(),
                fdo::media_of(v),
            ]
        })
        .collect();
    table(
        &[
            "KIND",
            "APP",
            "CLAIMS TO BE",
            "STATE",
            "SINCE",
            "ROLE",
            "MEDIA",
        ],
        &rows,
    )
}

fn duration_between(start: &str, end: Option<&str>) -> String {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    let end = match end {
        Some(e) => parse(e),
        None => Some(chrono::Utc::now().fixed_offset()),
    };
    match (parse(start), end) {
        (Some(a), Some(b)) => {
            let secs = (b - a).num_seconds().max(0);
            format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
        }
        _ => String::new(),
    }
}

fn sessions_table(sessions: &[Value]) -> String {
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|v| {
            let end = v.get("end").and_then(Value::as_str);
            vec![
                s(v, "kind").to_owned(),
                app_of(v),
                s(v, "claimed_name").to_owned(),
                short_time(s(v, "start")),
                end.map(short_time).unwrap_or_else(|| "now".into()),
                duration_between(s(v, "start"), end),
            ]
        })
        .collect();
    table(
        &["KIND", "APP", "CLAIMS TO BE", "START", "END", "DURATION"],
        &rows,
    )
}

/// `contextctl media`: who plays and who captures now, and who captured
/// in the last 24 hours.
pub async fn media(conn: &Connection, out: Output) -> Result<()> {
    let p = Context1Proxy::new(conn).await?;
    let v = dict_to_json(&p.get_media().await?);
    if out.json {
        print_json(&v);
        return Ok(());
    }
    let mut first = true;
    let mut section = |title: &str, body: String| {
        if !first {
            println!();
        }
        first = false;
        println!("{title}");
        print!("{body}");
    };
    if let Some(a) = v.get("media.playback").and_then(Value::as_array) {
        if a.is_empty() {
            section("Playing: nothing", String::new());
        } else {
            section("Playing:", streams_table(a));
        }
    }
    if let Some(a) = v.get("media.capture").and_then(Value::as_array) {
        if a.is_empty() {
            section("Capturing: nothing", String::new());
        } else {
            section("Capturing:", streams_table(a));
        }
    }
    if let Some(a) = v.get("capture_sessions").and_then(Value::as_array) {
        if a.is_empty() {
            section("Capture in the last 24 hours: none", String::new());
        } else {
            section("Capture in the last 24 hours:", sessions_table(a));
        }
    }
    let withheld: Vec<&str> = v
        .get("withheld")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !withheld.is_empty() {
        println!();
        println!("Withheld from contextctl: {}", withheld.join(", "));
        println!("(grant them in policy.toml; see `contextctl categories`)");
    }
    Ok(())
}

/// `contextctl history`: every event of the period, a page at a time.
pub async fn history(conn: &Connection, out: Output, since: &str, app: Option<&str>) -> Result<()> {
    let p = History1Proxy::new(conn).await?;
    let since = (chrono::Utc::now() - parse_duration(since)?).timestamp();
    let apps: Vec<&str> = app.into_iter().collect();
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let (events, next) = p.query(since, 0, &[], &apps, 500, &cursor).await?;
        all.extend(events.iter().map(dict_to_json));
        if next.is_empty() || all.len() >= 10_000 {
            break;
        }
        cursor = next;
    }
    if out.json {
        print_json(&Value::Array(all));
        return Ok(());
    }
    if all.is_empty() {
        println!("Nothing recorded in that time (or nothing contextctl may see).");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = all
        .iter()
        .map(|e| {
            let end = e
                .get("end")
                .and_then(Value::as_str)
                .map(short_time)
                .unwrap_or_else(|| "now".into());
            let dur = e
                .get("duration_s")
                .and_then(Value::as_f64)
                .map(human_duration)
                .unwrap_or_default();
            vec![
                short_time(s(e, "start")),
                end,
                dur,
                s(e, "kind").to_owned(),
                s(e, "app_id").to_owned(),
                s(e, "title").to_owned(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["START", "END", "FOR", "WHAT", "APP", "TITLE"], &rows)
    );
    Ok(())
}

fn human_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as i64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `contextctl summary`: a table with a bar per app.
pub async fn summary(conn: &Connection, out: Output, today: bool) -> Result<()> {
    let now = chrono::Local::now();
    let since = if today {
        now.date_naive()
            .and_hms_opt(0, 0, 0)
            .and_then(|d| d.and_local_timezone(chrono::Local).earliest())
            .map(|d| d.timestamp())
            .unwrap_or(now.timestamp() - 86400)
    } else {
        now.timestamp() - 86400
    };
    let v: Vec<Value> = History1Proxy::new(conn)
        .await?
        .summary(since, now.timestamp())
        .await?
        .iter()
        .map(dict_to_json)
        .collect();
    if printed_plainly(
        out,
        &v,
        "Nothing recorded in that time (or nothing contextctl may see).",
    ) {
        return Ok(());
    }
    let secs = |e: &Value, k: &str| e.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let max = v
        .iter()
        .map(|e| secs(e, "focus_s"))
        .fold(0.0, f64::max)
        .max(1.0);
    let rows: Vec<Vec<String>> = v
        .iter()
        .map(|e| {
            let f = secs(e, "focus_s");
            let bar = "█".repeat(((f / max) * 30.0).round() as usize);
            vec![
                s(e, "app_id").to_owned(),
                human_duration(f),
                bar,
                if secs(e, "capture_s") > 0.0 {
                    human_duration(secs(e, "capture_s"))
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    print!("{}", table(&["APP", "FOCUSED", "", "CAPTURING"], &rows));
    Ok(())
}

/// `contextctl forget`.
pub async fn forget(
    conn: &Connection,
    last: Option<&str>,
    app: Option<&str>,
    all: bool,
) -> Result<()> {
    if last.is_none() && app.is_none() && !all {
        return Err(CtlError::Call(
            "say what to forget: --last 1h, --app ID or --all".into(),
        ));
    }
    let since = match last {
        Some(d) => (chrono::Utc::now() - parse_duration(d)?).timestamp(),
        None => 0,
    };
    let apps: Vec<&str> = app.into_iter().collect();
    let n = History1Proxy::new(conn)
        .await?
        .forget(since, 0, &apps, &[])
        .await?;
    println!("Forgot {n} events; their content was overwritten in the database.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_parse() {
        assert_eq!(
            parse_duration("30m").map(|d| d.num_seconds()).ok(),
            Some(1800)
        );
        assert_eq!(
            parse_duration("7d").map(|d| d.num_seconds()).ok(),
            Some(604800)
        );
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0h").is_err());
        assert!(parse_duration("99999999999999w").is_err());
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
    }

    #[test]
    fn window_changes_read_well_and_titles_cannot_drive_the_terminal() {
        let w = json!({"app_id": "org.a.App", "app_name": "A", "title": "x\u{1b}[2Jy\nz",
                       "states": ["activated", "maximized"]});
        let line = describe_change(&json!({"event": "changed", "window": w}));
        assert_eq!(
            line,
            "changed A (org.a.App) — x\\u{1b}[2Jy\\u{a}z  [activated,maximized]"
        );
        let bare = json!({"app_id": "org.b.App", "states": []});
        assert_eq!(
            describe_change(&json!({"event": "opened", "window": bare})),
            "opened  org.b.App"
        );
        assert_eq!(
            describe_change(&json!({"event": "focus", "window": bare})),
            "focus   org.b.App"
        );
        assert_eq!(describe_change(&json!({"event": "focus"})), "focus   none");
    }

    #[test]
    fn the_link_file_is_private_and_old_ones_go() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("contextd");
        let url = "http://127.0.0.1:1/open?ticket=a&b\"<x>";
        let f = link_file(&dir, url).expect("written");
        assert_eq!(f.parent(), Some(dir.as_path()));
        assert_eq!(std::fs::metadata(&dir).expect("dir").mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&f).expect("file").mode() & 0o777, 0o600);
        let page = std::fs::read_to_string(&f).expect("read");
        assert!(
            page.contains("url=http://127.0.0.1:1/open?ticket=a&amp;b&quot;&lt;x&gt;\""),
            "{page}"
        );
        // An old page is removed by the next run, a fresh one stays.
        let old = dir.join("dashboard-old.html");
        std::fs::write(&old, "x").expect("old");
        let then = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
        std::fs::File::options()
            .write(true)
            .open(&old)
            .and_then(|f| f.set_modified(then))
            .expect("age it");
        let g = link_file(&dir, url).expect("again");
        assert!(!old.exists() && f.exists() && g.exists() && f != g);
        // Not a private directory: refused.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(link_file(&dir, url).is_err());
    }

    #[test]
    fn the_browser_comes_from_browser_or_xdg_open() {
        let args = |c: &std::process::Command| {
            std::iter::once(c.get_program())
                .chain(c.get_args())
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            args(&opener("firefox --new-tab %s:chromium", "file:///x")),
            ["firefox", "--new-tab", "file:///x"]
        );
        assert_eq!(
            args(&opener("chromium", "file:///x")),
            ["chromium", "file:///x"]
        );
        assert_eq!(args(&opener("", "file:///x")), ["xdg-open", "file:///x"]);
    }
}
