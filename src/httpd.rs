//! The HTTP server loop the loopback publishers share (MCP over HTTP, the
//! dashboard): accept with a bound on open connections, HTTP/1.1 with a
//! header timeout, and a graceful end of every connection when the
//! publisher stops. Routing, authentication and everything else is each
//! publisher's.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a client may take to send a request's head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `app` on `listener` until `cancel`, at most `max_connections` at
/// once; each connection's task is spawned on `tasks` (the publishers'
/// level of the shutdown tree). `what` names the port in logs.
pub async fn serve(
    listener: &TcpListener,
    app: Router,
    max_connections: usize,
    tasks: &TaskTracker,
    cancel: &CancellationToken,
    what: &'static str,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let permit = tokio::select! {
            _ = cancel.cancelled() => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, _) = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the {what} port failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "HTTP connection ended");
                    }
                }
                _ = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_millis(300), conn).await;
                }
            }
            drop(permit);
        });
    }
}
