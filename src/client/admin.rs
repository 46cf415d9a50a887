//! The client side of the daemon's admin socket (`contextctl token …`):
//! one JSON request a connection, answered by `mcp::admin`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub use crate::model::admin::Request;
use crate::model::admin::{Answer, TokenInfo};
use crate::names::ADMIN_SOCKET;

/// How long a request may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The client side: send one request to the daemon at `socket`.
pub async fn request(socket: &Path, req: &Request) -> Result<Value, String> {
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
    let v: Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("odd answer from contextd: {e}"))?;
    let answer: Answer =
        serde_json::from_value(v.clone()).map_err(|e| format!("odd answer from contextd: {e}"))?;
    if answer.ok {
        Ok(v)
    } else {
        Err(answer
            .error
            .unwrap_or_else(|| "contextd refused".to_owned()))
    }
}

/// The token list of an answer.
pub fn token_list(v: &Value) -> Vec<TokenInfo> {
    serde_json::from_value::<Answer>(v.clone())
        .ok()
        .and_then(|a| a.tokens)
        .unwrap_or_default()
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
    let v = request(&socket, req).await?;
    if json {
        println!("{v}");
        return Ok(());
    }
    match req {
        Request::TokenCreate { name } => {
            let t = serde_json::from_value::<Answer>(v.clone())
                .ok()
                .and_then(|a| a.token)
                .unwrap_or_default();
            println!("{t}");
            eprintln!(
                "This is the only time the token is shown. Grant it context in policy.toml as app \"token:{name}\", and send it as `Authorization: Bearer TOKEN`."
            );
        }
        Request::TokenList => {
            let list = token_list(&v);
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
