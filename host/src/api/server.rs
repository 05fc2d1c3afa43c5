//! Serving the API over HTTP/1.1 with limits a slow or greedy client cannot get around:
//! a request's headers must arrive within [`ServerLimits::header_read_timeout`] (an idle
//! kept-alive connection waits no longer for its next request), and one client address
//! holds at most [`ServerLimits::max_client_connections`] connections; past it, new ones
//! are closed at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// How the server guards itself against its clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest a client may take to send a request's headers, or to start its next
    /// request on a kept-alive connection (default 10 s).
    pub header_read_timeout: Duration,
    /// Most connections one client address may hold at once (default 256).
    pub max_client_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self { header_read_timeout: Duration::from_secs(10), max_client_connections: 256 }
    }
}

/// Connections held per client address.
#[derive(Debug, Default)]
struct Clients(Mutex<HashMap<IpAddr, usize>>);

/// One connection's place in its client's count, given back when the connection ends.
struct Slot {
    clients: Arc<Clients>,
    ip: IpAddr,
}

impl Clients {
    fn admit(self: &Arc<Self>, ip: IpAddr, cap: usize) -> Option<Slot> {
        let mut held = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = held.entry(ip).or_default();
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(Slot { clients: self.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.clients.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests in
/// flight finish.
pub async fn serve(listener: TcpListener, app: Router, limits: ServerLimits, shutdown: impl Future<Output = ()>) {
    let clients = Arc::new(Clients::default());
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, a reset before accept: keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = clients.admit(peer.ip(), limits.max_client_connections) else {
            tracing::debug!(client = %peer.ip(), "a client over its connection cap was refused");
            drop(stream);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(client = %peer.ip(), error = %e, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
