//! `spindle serve`: a long-running host (dispatcher, sandbox, reconciler, API).

use std::sync::Arc;

use anyhow::Context;

use spindle::api::router;
use spindle::config::{ServeArgs, ServeConfig};
use spindle::host::Host;

/// Runs a host until SIGINT or SIGTERM, then shuts down gracefully: stop claiming, let
/// running steps finish within the grace period, hand back the rest.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = ServeConfig::resolve(args)?;
    if config.host.sandbox.compiler.is_none() {
        // Deploys compile in a child process of this very binary, which the compile
        // timeout kills.
        config.host.sandbox.compiler = std::env::current_exe().ok();
    }
    let host = Host::open(config.host.clone()).await.context("opening the host")?;
    ensure_operator_token(&host).await?;
    host.start().await;
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let host = Arc::new(host);
    // Listened for before the host says it listens: a SIGTERM sent the moment it does
    // (a supervisor, a test) stops it cleanly instead of killing it.
    let stop = shutdown_signal()?;
    tracing::info!(%addr, database = %redact(&config.host.database_url()), host = %config.host.engine.host_id, "spindle is serving");
    println!("spindle listening on http://{addr}");
    let app = router(host.clone());
    spindle::api::server::serve(listener, app, config.server, stop).await;
    tracing::info!("shutting down");
    host.shutdown(config.shutdown_grace).await;
    Ok(())
}

/// The operator token: `SPINDLE_OPERATOR_TOKEN`, or the one in the data directory, or a
/// new one written there (owner-only permissions) on first start. Only its hash is
/// stored in the database. Registering it retires the token configured before it, so
/// changing either and restarting rotates the operator token (and a host still
/// configured with a retired one refuses to start, rather than bring it back).
async fn ensure_operator_token(host: &Host) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = host.config().data_dir.join("operator-token");
    let token = match std::env::var("SPINDLE_OPERATOR_TOKEN") {
        Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
        _ => match std::fs::read_to_string(&path) {
            Ok(token) => token.trim().to_owned(),
            Err(_) => {
                let token = spindle::tokens::generate();
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .with_context(|| format!("writing {}", path.display()))?;
                std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())?;
                println!("a new operator token was written to {}", path.display());
                token
            }
        },
    };
    host.engine.tenancy().register_operator_token(&token).await?;
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

/// Ends at the first SIGINT or SIGTERM; both are listened for from the call on.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
