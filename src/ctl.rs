//! `contextctl`'s commands, in the library so that tests can drive them.

use std::collections::BTreeSet;

use futures_util::StreamExt;
use serde_json::Value;
use zbus::Connection;

use crate::dbus::proxy::{Context1Proxy, Subscription1Proxy};
use crate::dbus::variant::{dict_to_json, to_json};

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot reach the session bus: {0}")]
    Connect(zbus::Error),
    #[error("{0}")]
    Call(String),
}

impl From<zbus::Error> for CtlError {
    fn from(e: zbus::Error) -> Self {
        // D-Bus errors already read well: "org.contextd.Error.NotAllowed: ...".
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

pub async fn connect() -> Result<Connection> {
    Connection::session().await.map_err(CtlError::Connect)
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
        ("notifications", "Notifications:"),
    ] {
        if let Some(a) = snap.get(key).and_then(Value::as_array) {
            println!("{label:<15} {}", a.len());
        }
    }
    for key in ["session", "power", "network"] {
        if let Some(v) = snap.get(key) {
            println!("{:<15} {}", format!("{}:", capitalize(key)), compact(v));
        }
    }
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

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
