//! The client side of the daemon's admin socket (`contextctl token …`):
//! one JSON request a connection, answered by `mcp::admin`.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub use crate::model::admin::Request;
use crate::model::admin::{Answer, TokenInfo};
use crate::names::ADMIN_SOCKET;

/// How long a request may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// When a token made now with `--expires WHEN` expires: `WHEN` is a
/// duration (`90s`, `30m`, `12h`, `30d`, `2w`, as `contextctl grant
/// --for` takes) after `now`, or an RFC 3339 time; it must be later than
/// `now` (the daemon checks again with its clock).
pub fn expiry(when: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let at = match super::ctl::parse_duration(when) {
        Ok(d) => now
            .checked_add_signed(d)
            .ok_or_else(|| format!("'{when}' is too far away"))?,
        Err(_) => DateTime::parse_from_rfc3339(when.trim())
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                format!(
                    "'{when}' is neither a duration (90s, 30m, 12h, 30d, 2w) nor an RFC 3339 time (2027-01-05T10:00:00Z)"
                )
            })?,
    };
    if at <= now {
        return Err(format!("'{when}' is not in the future"));
    }
    Ok(at)
}

/// How `token list` shows a token's expiry.
fn expiry_cell(t: &TokenInfo) -> String {
    let at = |e: DateTime<Utc>| e.format("%Y-%m-%d %H:%M UTC").to_string();
    match t.expires {
        None => "never".to_owned(),
        Some(e) if t.expired => format!("EXPIRED {}", at(e)),
        Some(e) => format!("expires {}", at(e)),
    }
}

/// The client side: send one request to the daemon at `socket`; its
/// answer when done, or why not.
pub async fn request(socket: &Path, req: &Request) -> Result<Answer, String> {
    let mut s = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("cannot reach contextd at {}: {e}", socket.display()))?;
    let mut line = serde_json::to_string(req).map_err(|e| e.to_string())?;
    line.push('\n');
    let exchange = async {
        s.write_all(line.as_bytes()).await?;
        let mut out = String::new();
        BufReader::new(&mut s)
            .take(1024 * 1024)
            .read_to_string(&mut out)
            .await?;
        Ok::<String, std::io::Error>(out)
    };
    let out = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| "contextd did not answer within 5 s".to_owned())?
        .map_err(|e| format!("talking to contextd: {e}"))?;
    let answer: Answer =
        serde_json::from_str(out.trim()).map_err(|e| format!("odd answer from contextd: {e}"))?;
    if answer.ok {
        Ok(answer)
    } else {
        Err(answer
            .error
            .unwrap_or_else(|| "contextd refused".to_owned()))
    }
}

/// `contextctl token …`: send `req` (starting the daemon if needed) and
/// print the answer.
pub async fn command(req: &Request, json: bool) -> Result<(), String> {
    // Connecting also activates the daemon when it is not running.
    drop(
        super::bridge::connect(ADMIN_SOCKET)
            .await
            .map_err(|e| e.to_string())?,
    );
    let socket = super::runtime_path(ADMIN_SOCKET).map_err(|e| e.to_string())?;
    let answer = request(&socket, req).await?;
    if json {
        // The daemon's line as it wrote it: the same type, written the
        // same way (fields in name order, absent ones left out).
        println!(
            "{}",
            serde_json::to_string(&answer).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    match req {
        Request::TokenCreate { name, expires } => {
            println!("{}", answer.token.unwrap_or_default());
            eprintln!(
                "This is the only time the token is shown. Grant it context in policy.toml as app \"token:{name}\", and send it as `Authorization: Bearer TOKEN`."
            );
            match expires {
                Some(at) => eprintln!(
                    "It expires {} (then revoke it and create it again: contextctl token revoke {name}).",
                    at.format("%Y-%m-%d %H:%M:%S UTC")
                ),
                None => {
                    eprintln!("It never expires (revoke it with contextctl token revoke {name}).")
                }
            }
        }
        Request::TokenList => {
            let list: Vec<TokenInfo> = answer.tokens.unwrap_or_default();
            if list.is_empty() {
                println!("No tokens.");
            } else {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|t| {
                        vec![
                            t.name.clone(),
                            format!("token:{}", t.name),
                            t.created.to_rfc3339(),
                            expiry_cell(t),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    super::ctl::table(&["NAME", "CONSENT SUBJECT", "CREATED", "EXPIRY"], &rows)
                );
            }
        }
        Request::TokenRevoke { name } => println!("Revoked token {name}."),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_durations_or_times_in_the_future() {
        let now = DateTime::parse_from_rfc3339("2026-12-07T10:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        let after = |when: &str| expiry(when, now).map(|t| (t - now).num_seconds());
        assert_eq!(after("3s"), Ok(3));
        assert_eq!(after("90m"), Ok(5400));
        assert_eq!(after("12h"), Ok(43200));
        assert_eq!(after("30d"), Ok(30 * 86400));
        assert_eq!(after("2w"), Ok(14 * 86400));
        assert_eq!(after("2027-01-05T10:00:00Z"), Ok(29 * 86400));
        assert_eq!(after("2027-01-05T11:00:00+01:00"), Ok(29 * 86400));
        for bad in [
            "0s",
            "soon",
            "",
            "-5m",
            "2026-12-07T10:00:00Z",
            "2020-01-01T00:00:00Z",
        ] {
            assert!(expiry(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_list_says_when_a_token_expires_or_that_it_did() {
        let t = |expires: Option<&str>, expired| TokenInfo {
            created: Utc::now(),
            expired,
            expires: expires.map(|e| {
                DateTime::parse_from_rfc3339(e)
                    .expect("time")
                    .with_timezone(&Utc)
            }),
            name: "a".into(),
        };
        assert_eq!(expiry_cell(&t(None, false)), "never");
        assert_eq!(
            expiry_cell(&t(Some("2027-01-05T10:00:00Z"), false)),
            "expires 2027-01-05 10:00 UTC"
        );
        assert_eq!(
            expiry_cell(&t(Some("2026-01-05T10:00:00Z"), true)),
            "EXPIRED 2026-01-05 10:00 UTC"
        );
    }
}
