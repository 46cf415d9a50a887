//! `contextctl mcp`: what an MCP host starts as its stdio server. It
//! connects to the daemon's socket (starting the daemon through D-Bus
//! activation when the socket is absent) and copies bytes both ways.
//! stdout carries only what the daemon sends; logs go to stderr.
//!
//! The bridge understands nothing of MCP: framing, limits and errors are
//! the daemon's, so a host talks to the same server whichever way it
//! connects. The daemon identifies the host as this process's parent
//! (`SO_PEERCRED` on the socket gives this process; `/proc` its parent),
//! with the same rules as every other caller: a host run by an interpreter
//! (Claude Code's `node`, a Python SDK host) is named by the script or
//! package it runs, so two such hosts are two apps. Nothing the bridge
//! sends (its environment, arguments, the host's `clientInfo`) is part of
//! the identity.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::names::BUS_NAME;

/// How long to wait for an activated daemon's socket.
const START_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0}")]
    Setup(String),
    /// No bus, or no daemon and nothing that starts it: what to do.
    #[error("{0}")]
    Unreachable(#[from] super::reach::Unreachable),
    #[error("contextd did not open {path} within {secs} s after activation")]
    NoSocket { path: String, secs: u64 },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Connect to the socket `name` in the daemon's runtime directory,
/// starting the daemon when nothing listens there.
pub async fn connect(name: &str) -> Result<UnixStream, BridgeError> {
    let path = super::runtime_path(name).map_err(|e| BridgeError::Setup(e.to_string()))?;
    match UnixStream::connect(&path).await {
        Ok(s) => return Ok(s),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            tracing::debug!(path = %path.display(), "no daemon on the socket; activating {BUS_NAME}");
        }
        Err(e) => {
            return Err(BridgeError::Setup(format!(
                "cannot connect to {}: {e}",
                path.display()
            )));
        }
    }
    super::reach::start_by_name(START_TIMEOUT).await?;
    wait_for(&path).await
}

async fn wait_for(path: &Path) -> Result<UnixStream, BridgeError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match UnixStream::connect(path).await {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                tracing::debug!(error = %e, "socket still not there");
                return Err(BridgeError::NoSocket {
                    path: path.display().to_string(),
                    secs: START_TIMEOUT.as_secs(),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Copy `from` to `to`, flushing after every read so that a host waiting
/// for an answer gets it at once.
async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut from: R,
    mut to: W,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        to.write_all(&buf[..n]).await?;
        to.flush().await?;
        total += n as u64;
    }
}

/// Relay stdin/stdout to the daemon until either side ends. When the
/// daemon cannot be reached, the host's first request (its `initialize`)
/// gets a JSON-RPC error saying why and what fixes it, which hosts show
/// the user (a server that only exits shows as "disconnected", with the
/// reason buried in a log); the same line goes to stderr.
pub async fn run() -> Result<(), BridgeError> {
    let stream = match connect(crate::names::MCP_SOCKET).await {
        Ok(s) => s,
        Err(e) => {
            let message = host_message(&e);
            refuse_first_request(tokio::io::stdin(), tokio::io::stdout(), &message).await;
            return Err(BridgeError::Setup(message));
        }
    };
    relay(stream, tokio::io::stdin(), tokio::io::stdout()).await
}

/// How long to wait for the host's first request when there is only an
/// error to answer it with.
const REFUSE_WAIT: Duration = Duration::from_secs(10);

/// The JSON-RPC code of the refusal: a server error (-32000 to -32099 are
/// the implementation's own).
const UNREACHABLE_CODE: i64 = -32000;

/// The message for an MCP host's user. Without a session bus, the likely
/// cause is a host that starts servers with a bare environment: say which
/// variables to pass.
fn host_message(e: &BridgeError) -> String {
    match e {
        BridgeError::Unreachable(u @ super::reach::Unreachable::NoBus { .. }) => {
            // SAFETY: getuid(2) has no failure mode and touches no memory.
            let uid = unsafe { libc::getuid() };
            format!(
                "{u} If an MCP host runs this server, pass the session in its \"env\" in the host's config: \"env\": {{\"XDG_RUNTIME_DIR\": \"/run/user/{uid}\", \"DBUS_SESSION_BUS_ADDRESS\": \"unix:path=/run/user/{uid}/bus\"}}"
            )
        }
        other => other.to_string(),
    }
}

/// Answer the first request read from `input` (a line with an `id` and a
/// `method`) with a JSON-RPC error carrying `message`; notifications and
/// unreadable lines are skipped. Gives up at end of input or after
/// [`REFUSE_WAIT`].
async fn refuse_first_request<I, O>(input: I, mut output: O, message: &str)
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    use tokio::io::AsyncBufReadExt;
    let answer = async {
        // A line at most 1 MiB: the host's initialize is far smaller.
        let mut lines = tokio::io::BufReader::new(input.take(1 << 20)).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(request) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let (Some(id), Some(_)) = (request.get("id"), request.get("method")) else {
                continue;
            };
            let reply = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": { "code": UNREACHABLE_CODE, "message": message },
            });
            let mut text = reply.to_string();
            text.push('\n');
            let _ = output.write_all(text.as_bytes()).await;
            let _ = output.flush().await;
            return;
        }
    };
    let _ = tokio::time::timeout(REFUSE_WAIT, answer).await;
}

/// After the host closed stdin, how long the bridge still copies the
/// daemon's answers to stdout before it exits.
const GONE_GRACE: Duration = Duration::from_millis(500);

/// Relay `input` → `stream` → `output`. When the daemon closes, the bridge
/// exits. When the host closes stdin, the host is gone (an MCP host that
/// quits closes it): the daemon is told at once (half-close), stops what
/// waits for the user (its prompts are withdrawn, nothing is stored) and
/// answers the rest; the bridge copies what comes within [`GONE_GRACE`]
/// to stdout (while the host still reads it) and exits. A question nobody
/// can answer any more never keeps the bridge, or the prompt, around.
pub async fn relay<I, O>(stream: UnixStream, input: I, output: O) -> Result<(), BridgeError>
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let (sr, mut sw) = stream.into_split();
    let up = async {
        let r = pump(input, &mut sw).await;
        // Tell the daemon the host is done; it closes after its answers.
        let _ = sw.shutdown().await;
        r
    };
    let down = pump(sr, output);
    tokio::pin!(up);
    tokio::pin!(down);
    tokio::select! {
        r = &mut down => {
            r?;
            Ok(())
        }
        r = &mut up => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "reading stdin failed");
            }
            // The answers already made, for a host that still reads.
            match tokio::time::timeout(GONE_GRACE, down).await {
                Ok(r) => r.map(|_| ()).map_err(BridgeError::from),
                Err(_) => {
                    tracing::debug!("the host closed stdin; not waiting for more answers");
                    Ok(())
                }
            }
        }
    }
}

/// Where the MCP socket is (for messages).
pub fn socket_path() -> Option<PathBuf> {
    super::runtime_path(crate::names::MCP_SOCKET).ok()
}
