//! The `spindle` command.

use std::process::ExitCode;

/// `println!` for what a command prints for its reader: a reader that went away
/// (`spindle kinds greet | head -1`) ends the command quietly with success, as ripgrep
/// does, where `println!` would panic on the broken pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

mod client;
mod guest;
mod migrate;
mod serve;

use crate::client::{ClientArgs, ClientCommand};
use clap::{Parser, Subcommand};
use spindle::config::ServeArgs;

/// Writes one line to stdout ([`out!`]); exits with success when stdout's reader is gone.
fn print_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(line).and_then(|()| stdout.write_all(b"\n"));
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => panic!("failed printing to stdout: {e}"),
    }
}

/// mimalloc instead of glibc's allocator: a host allocates and frees small objects on
/// every step from many threads (records, rows, JSON), where glibc's arenas spent about
/// an eighth of the host's CPU in the throughput benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Spindle: durable workflows and background jobs whose steps run as sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "spindle", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a host: dispatcher, sandbox, reconciler and the HTTP API.
    Serve(Box<ServeArgs>),
    /// Run the schema's migration steps: the expand steps (as every host does when it
    /// starts) and, with `--contract`, the steps that wait for every host to run this
    /// build (docs/operations.md).
    Migrate(crate::migrate::MigrateArgs),
    /// Spindle's main job on the embedded default: deploy the examples and run jobs
    /// through every outcome on a SQLite file (see `cargo xtask demo`).
    Demo(spindle_bench::demo::DemoArgs),
    /// Measure throughput, latency, sandbox overhead, memory and claim latency on a
    /// fresh database (SQLite or PostgreSQL); see docs/benchmarks.md.
    Bench(spindle_bench::command::BenchArgs),
    /// Write a ready project for a new job kind in Rust, Python, JavaScript, TypeScript, C
    /// or Go (`--lang rust|python|js|ts|c|go`): the kind, its build script, a README, a
    /// local test, the SDK and the contract's WIT.
    New(crate::guest::NewArgs),
    /// Build steps for job kinds in C and Go: the contract's WIT, bindings, and making a
    /// core module a component.
    Guest {
        #[command(subcommand)]
        command: crate::guest::GuestCommand,
    },
    /// Print the API's OpenAPI 3.1 document (what `/v1/openapi.json` serves), from which
    /// the TypeScript and Python clients' types are generated.
    Openapi,
    /// Compiles the component on stdin for the sandbox `SPINDLE_COMPILE_CONFIG`
    /// describes, writing the artifact to stdout: what a host runs to compile a deploy in
    /// a process its compile timeout can kill.
    #[command(hide = true)]
    CompileComponent,
    #[command(flatten)]
    Client(ClientCommand),
}

/// The document, pretty, with a final newline (what the clients' generators read).
fn print_openapi() -> anyhow::Result<()> {
    let document = spindle::api::openapi_document();
    out!("{}", serde_json::to_string_pretty(&document)?);
    Ok(())
}

fn main() -> ExitCode {
    spindle_runtime::use_ring_for_tls();
    let cli = Cli::parse();
    if matches!(cli.command, Command::CompileComponent) {
        return compile_component();
    }
    // Commands that run here, with no runtime and no host.
    let local = match &cli.command {
        Command::Guest { command } => Some(crate::guest::run(command.clone())),
        Command::New(args) => Some(crate::guest::new_project(args.clone())),
        Command::Openapi => Some(print_openapi()),
        _ => None,
    };
    if let Some(result) = local {
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    // The demo draws progress bars and clients print results: only problems may
    // interleave with them. A host logs at info.
    let default_level = if matches!(cli.command, Command::Serve(_)) { "info" } else { "error" };
    let otlp = match &cli.command {
        Command::Serve(args) => args.otlp_endpoint.clone(),
        _ => None,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Inside the runtime (the spans are exported by a task on it); kept to the end of
    // `main` and dropped before the runtime: dropping it flushes the spans still batched.
    let telemetry = {
        let _inside = runtime.enter();
        spindle::telemetry::init(default_level, otlp.as_deref())
    };
    let _telemetry = match telemetry {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => crate::serve::run(*args).await.map(|()| 0),
            Command::Migrate(args) => crate::migrate::run(args).await.map(|()| 0),
            Command::Demo(args) => spindle_bench::demo::run(args).await.map(|()| 0),
            Command::Bench(args) => spindle_bench::command::run(args).await.map(|()| 0),
            Command::Client(command) => crate::client::run(cli.client, command).await,
            Command::CompileComponent | Command::Guest { .. } | Command::New(_) | Command::Openapi => Ok(0),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {}", crate::client::describe_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// `spindle compile-component`: stdin → artifact on stdout, or the error on stderr.
fn compile_component() -> ExitCode {
    use std::io::{Read, Write};
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("reading the component: {e}");
        return ExitCode::FAILURE;
    }
    match spindle_runtime::compile_in_this_process(&bytes) {
        Ok(artifact) => match std::io::stdout().write_all(&artifact) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("writing the artifact: {e}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
