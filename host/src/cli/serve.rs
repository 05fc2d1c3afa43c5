//! `spindle serve`: a long-running host (dispatcher, sandbox, reconciler, API).

use std::sync::Arc;

use anyhow::Context;

use crate::api::{ApiState, router};
use crate::config::{ServeArgs, ServeConfig};
use crate::host::Host;

/// Runs a host until SIGINT or SIGTERM, then shuts down gracefully: stop claiming, let
/// running steps finish within the grace period, hand back the rest.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig::resolve(args)?;
    let mut host = Host::open(config.host.clone()).await.context("opening the host")?;
    host.start();
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let host = Arc::new(host);
    tracing::info!(%addr, database = %redact(&config.host.database_url()), host = %config.host.engine.host_id, "spindle is serving");
    println!("spindle listening on http://{addr}");
    let app = router(ApiState { host: host.clone() });
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await.context("serving the API")?;
    tracing::info!("shutting down");
    match Arc::try_unwrap(host) {
        Ok(host) => host.shutdown(config.shutdown_grace).await,
        Err(_) => tracing::warn!("the host is still shared at shutdown; leaving its claims to lapse"),
    }
    Ok(())
}

/// A database URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
