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
    #[error("cannot start contextd through D-Bus activation: {0}")]
    Activation(String),
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
    activate().await?;
    wait_for(&path).await
}

/// `StartServiceByName(org.contextd.Broker1)` on the session bus: returns
/// once the daemon owns its name (it opens its sockets right after).
async fn activate() -> Result<(), BridgeError> {
    let address = crate::config::session_bus_address().ok_or_else(|| {
        BridgeError::Activation(
            "no session bus: $DBUS_SESSION_BUS_ADDRESS is not set and there is no bus in the runtime directory; start contextd yourself (systemctl --user start contextd), or pass DBUS_SESSION_BUS_ADDRESS in this server's \"env\" in the MCP host's config".into(),
        )
    })?;
    let conn = zbus::connection::Builder::address(address.as_str())
        .build()
        .await
        .map_err(|e| {
            BridgeError::Activation(format!("cannot reach the session bus at {address}: {e}"))
        })?;
    let dbus = zbus::fdo::DBusProxy::new(&conn)
        .await
        .map_err(|e| BridgeError::Activation(e.to_string()))?;
    let name = zbus::names::WellKnownName::from_static_str_unchecked(BUS_NAME);
    let call = dbus.start_service_by_name(name, 0);
    tokio::time::timeout(START_TIMEOUT, call)
        .await
        .map_err(|_| {
            BridgeError::Activation(format!("no answer within {} s", START_TIMEOUT.as_secs()))
        })?
        .map_err(|e| BridgeError::Activation(e.to_string()))?;
    Ok(())
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

/// Relay stdin/stdout to the daemon until either side ends.
pub async fn run() -> Result<(), BridgeError> {
    let stream = connect(crate::names::MCP_SOCKET).await?;
    relay(stream, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Relay `input` → `stream` → `output`. When the host closes its end, the
/// daemon still answers what it received, then closes; when the daemon
/// closes, the bridge exits.
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
            // Drain the daemon's remaining answers.
            down.await?;
            Ok(())
        }
    }
}

/// Where the MCP socket is (for messages).
pub fn socket_path() -> Option<PathBuf> {
    super::runtime_path(crate::names::MCP_SOCKET).ok()
}
