//! The client side of the daemon's admin socket (`contextctl token …`):
//! one JSON request a connection, answered by `mcp::admin`.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub use crate::model::admin::Request;
use crate::model::admin::{Answer, TokenInfo};
use crate::names::ADMIN_SOCKET;

/// How long a request may take.
const TIMEOUT: Duration = Duration::from_secs(5);

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
        Request::TokenCreate { name, .. } => {
            println!("{}", answer.token.unwrap_or_default());
            eprintln!(
                "This is the only time the token is shown. Grant it context in policy.toml as app \"token:{name}\", and send it as `Authorization: Bearer TOKEN`."
            );
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
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    super::ctl::table(&["NAME", "CONSENT SUBJECT", "CREATED"], &rows)
                );
            }
        }
        Request::TokenRevoke { name } => println!("Revoked token {name}."),
    }
    Ok(())
}
