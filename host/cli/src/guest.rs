//! `spindle guest …`: the build steps a job kind in C or Go needs beside its compiler —
//! the contract's WIT, the world's bindings, and making the core module a component —
//! so that building one takes `spindle` and the language's toolchain, nothing else.

use std::path::PathBuf;

use anyhow::Context as _;
use spindle_guest_tools::{Adapter, Language, ProjectLanguage};

/// `spindle guest` commands.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum GuestCommand {
    /// Write the contract (`spindle:job@0.2.0` and the WASI packages it uses) into DIR.
    Wit {
        /// The directory (`job.wit`, `deps/*.wit`).
        out: PathBuf,
    },
    /// Generate the job-kind world's bindings for C or Go into DIR.
    Bindgen {
        /// The language.
        #[arg(long, value_enum)]
        lang: BindgenLang,
        /// The WIT to generate from (default: the contract compiled into this binary).
        #[arg(long)]
        wit: Option<PathBuf>,
        /// Where the bindings go.
        #[arg(long)]
        out: PathBuf,
    },
    /// Make a core module (clang's `wasm32-wasi` reactor, Go's `wasip1` c-shared build)
    /// a component of the job-kind world, with the preview-1 adapter this host links.
    Componentize {
        /// The core module.
        module: PathBuf,
        /// The component to write.
        #[arg(short, long)]
        output: PathBuf,
        /// The WIT the world comes from, if the module does not carry it (default: the
        /// contract compiled into this binary).
        #[arg(long)]
        wit: Option<PathBuf>,
        /// The module imports no `wasi_snapshot_preview1` functions: no adapter.
        #[arg(long)]
        no_adapter: bool,
        /// The adapter grows the module's memory for itself instead of calling its
        /// `cabi_realloc`: only for a module without one. Never for Go, whose heap
        /// would later take the adapter's pages over.
        #[arg(long)]
        realloc_via_memory_grow: bool,
    },
}

/// `spindle new` flags.
#[derive(Clone, Debug, clap::Args)]
pub struct NewArgs {
    /// The kind's name (also the project's): a lowercase letter first, then lowercase
    /// letters, digits, `-` or `_`.
    pub kind: String,
    /// The language.
    #[arg(long, value_enum)]
    pub lang: NewLang,
    /// Where the project goes (default: ./KIND); it must not exist or be empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// A language `spindle new` writes a project in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum NewLang {
    /// Rust (cargo, wasm32-wasip2).
    Rust,
    /// Python (componentize-py).
    Python,
    /// JavaScript (componentize-js; TypeScript types included).
    Js,
    /// TypeScript (tsc, strict; then built as JavaScript).
    Ts,
    /// C (clang-19, wasi-libc, cJSON).
    C,
    /// Go (Go's wasip1).
    Go,
}

/// Writes a new kind's project.
pub fn new_project(args: NewArgs) -> anyhow::Result<()> {
    let language = match args.lang {
        NewLang::Rust => ProjectLanguage::Rust,
        NewLang::Python => ProjectLanguage::Python,
        NewLang::Js => ProjectLanguage::Js,
        NewLang::Ts => ProjectLanguage::Ts,
        NewLang::C => ProjectLanguage::C,
        NewLang::Go => ProjectLanguage::Go,
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.kind));
    let files = spindle_guest_tools::write_project(&args.kind, language, &dir)?;
    println!(
        "wrote {} ({} files, spindle:job@{}): ./test.sh runs its local test, ./build.sh builds {}.wasm, then `spindle deploy {} {}.wasm`",
        dir.display(),
        files.len(),
        spindle_guest_tools::CONTRACT_VERSION,
        args.kind,
        args.kind,
        args.kind
    );
    Ok(())
}

/// A language `spindle guest bindgen` writes bindings for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BindgenLang {
    /// C (`job_kind.h`, `job_kind.c`, `job_kind_component_type.o`).
    C,
    /// Go (a `wit_component` module with the runtime package it imports).
    Go,
}

/// Runs a `spindle guest` command.
pub fn run(command: GuestCommand) -> anyhow::Result<()> {
    match command {
        GuestCommand::Wit { out } => {
            spindle_guest_tools::write_wit(&out)?;
            eprintln!("wrote spindle:job@{} to {}", spindle_guest_tools::CONTRACT_VERSION, out.display());
        }
        GuestCommand::Bindgen { lang, wit, out } => {
            let language = match lang {
                BindgenLang::C => Language::C,
                BindgenLang::Go => Language::Go,
            };
            let files = spindle_guest_tools::generate_bindings(language, wit.as_deref(), &out)?;
            eprintln!("wrote {} files of bindings to {}", files.len(), out.display());
        }
        GuestCommand::Componentize { module, output, wit, no_adapter, realloc_via_memory_grow } => {
            let bytes = std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?;
            let adapter = if no_adapter { Adapter::None } else { Adapter::Reactor };
            let component =
                spindle_guest_tools::componentize(&bytes, wit.as_deref(), adapter, realloc_via_memory_grow)?;
            std::fs::write(&output, &component).with_context(|| format!("writing {}", output.display()))?;
            eprintln!("wrote the component {} ({} bytes)", output.display(), component.len());
        }
    }
    Ok(())
}
