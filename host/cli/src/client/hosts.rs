//! `spindle hosts` and `spindle upgrade` (operator): which hosts run which build on the
//! database, and the move of the storage format gate once every live host reads the
//! newer format (docs/operations.md, the upgrade runbook).

use super::empty_body;
use super::print::emit;
use super::remote::Client;
use spindle::api::views::{Finalized, HostList};

/// The upgrade's steps.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum UpgradeCommand {
    /// The gate and the hosts that hold it: which format every host writes, and which
    /// formats each live host reads.
    Status,
    /// Move the storage format gate to the newest format every live host reads and
    /// writes. Refused, naming them, while a live host cannot. After it, rolling back to
    /// the previous build is no longer possible.
    Finalize,
}

/// `spindle hosts`.
pub(super) async fn list(client: &Client, json: bool) -> anyhow::Result<()> {
    let hosts: HostList = client.get("/v1/hosts").await?;
    emit(json, &hosts, print_hosts);
    Ok(())
}

/// Runs a `spindle upgrade` command.
pub(super) async fn upgrade(client: &Client, json: bool, command: UpgradeCommand) -> anyhow::Result<()> {
    match command {
        UpgradeCommand::Status => list(client, json).await?,
        UpgradeCommand::Finalize => {
            let moved: Finalized = client.post("/v1/upgrade/finalize", &empty_body()).await?;
            emit(json, &moved, |m| {
                out!("storage format gate moved: every host writes format {} (was {})", m.to, m.from)
            });
        }
    }
    Ok(())
}

fn print_hosts(list: &HostList) {
    match &list.gate {
        Some(gate) => out!("storage format {} (since {}, by {})", gate.format, gate.moved_at, gate.moved_by),
        None => out!("no host has joined this database yet"),
    }
    out!(
        "{:<32} {:<9} {:<30} {:<6} {:<7} {:<13} {:<9} LAST HEARTBEAT",
        "HOST",
        "PROCESS",
        "BUILD",
        "READS",
        "WRITES",
        "CONTRACTS",
        "STATE"
    );
    for h in &list.hosts {
        let state = match (h.live, h.draining) {
            (false, _) => "gone",
            (true, true) => "draining",
            (true, false) => "live",
        };
        out!(
            "{:<32} {:<9} {:<30} {:<6} {:<7} {:<13} {:<9} {}",
            h.id,
            if h.instance.is_empty() { "-" } else { h.instance.as_str() },
            h.build,
            format!("{}-{}", h.reads[0], h.reads[1]),
            h.writes,
            h.contracts.join(","),
            state,
            h.heartbeat_at
        );
    }
}
