//! The `spindle` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use spindle::config::ServeArgs;

/// Spindle: durable workflows and background jobs whose steps run as sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "spindle", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a host: dispatcher, sandbox, reconciler and the HTTP API.
    Serve(ServeArgs),
    /// Spindle's main job on the embedded default: deploy the examples and run jobs
    /// through every outcome on a SQLite file (see `cargo xtask demo`).
    Demo(spindle::cli::demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo draws progress bars: only errors may interleave with them.
    let default_level = if matches!(cli.command, Command::Demo(_)) { "error" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPINDLE_LOG").unwrap_or_else(|_| default_level.into());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => spindle::cli::serve::run(args).await,
            Command::Demo(args) => spindle::cli::demo::run(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
