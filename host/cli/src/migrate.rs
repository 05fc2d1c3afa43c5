//! `spindle migrate`: the schema's steps, run by an operator. A host runs the expand
//! steps itself when it starts; the contract steps (drops, swaps) wait for this command,
//! which runs them only once the storage format gate moved (docs/operations.md).

use std::path::PathBuf;

use anyhow::Context;
use spindle::store::schema::Phase;
use spindle::store::{ConnectOptions, HostStore, SqlStore, SqliteSync};

/// `spindle migrate`'s arguments.
#[derive(Clone, Debug, clap::Args)]
pub struct MigrateArgs {
    /// `sqlite://…` or `postgres://…` (default: the data directory's SQLite file).
    #[arg(long, env = "SPINDLE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Where the embedded database lives (default: `.spindle`).
    #[arg(long, env = "SPINDLE_DATA_DIR", default_value = ".spindle")]
    pub data_dir: PathBuf,
    /// Also run the contract steps (refused until `spindle upgrade finalize` moved the gate).
    #[arg(long)]
    pub contract: bool,
}

/// Runs the expand steps, and with `--contract` the contract steps; says what it did.
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let url = args.database_url.unwrap_or_else(|| format!("sqlite://{}", args.data_dir.join("spindle.db").display()));
    let options = ConnectOptions { url, max_connections: 2, sqlite_sync: SqliteSync::Full };
    // Connecting runs the expand steps, as a starting host does.
    let store = SqlStore::connect(&options).await.context("connecting and running the expand steps")?;
    println!("expand steps: up to date");
    if args.contract {
        let gate = store.gate().await?.map(|g| g.format);
        spindle_core::upgrade::may_contract(gate)?;
        let ran = store.migrate(&[Phase::Contract]).await.context("running the contract steps")?;
        println!("contract steps: {ran} run");
    }
    let pending = store.pending_contract().await?;
    if !pending.is_empty() {
        let list: Vec<String> = pending.iter().map(ToString::to_string).collect();
        println!(
            "contract steps pending: {} (spindle migrate --contract, after spindle upgrade finalize)",
            list.join(", ")
        );
    }
    store.db().close().await;
    Ok(())
}
