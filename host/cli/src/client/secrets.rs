//! `spindle secret`: the tenant's secrets. Values go to the host and never come back.

use std::path::PathBuf;

use anyhow::Context;

use super::percent_encode;
use super::print::emit;
use super::remote::Client;
use spindle::api::views::{SecretList, SecretView};

/// Secret management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum SecretCommand {
    /// Set a secret from standard input (or `--file`); kinds deployed with
    /// `--secret NAME@RULE` use the new value from their next step, with no redeploy.
    Set {
        /// Its name.
        name: String,
        /// Read the value from this file instead of standard input.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// List the secrets' names and when they were set.
    List,
    /// Delete a secret.
    Delete {
        /// Its name.
        name: String,
    },
}

/// Runs a `spindle secret` command.
pub(super) async fn run(client: &Client, json: bool, command: SecretCommand) -> anyhow::Result<()> {
    match command {
        SecretCommand::Set { name, file } => {
            let value = match file {
                Some(path) => std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
                None => {
                    let mut value = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut value).context("reading standard input")?;
                    value
                }
            };
            // A value piped from `echo` (or saved on Windows) ends in a line break no
            // header wants; any other CR or LF is refused by the host.
            let value =
                value.strip_suffix(b"\r\n").or_else(|| value.strip_suffix(b"\n")).map(<[u8]>::to_vec).unwrap_or(value);
            let set: SecretView = client.put_bytes(&format!("/v1/secrets/{}", percent_encode(&name)), value).await?;
            emit(json, &set, |s| out!("secret {} set at {}", s.name, s.updated_at));
        }
        SecretCommand::List => {
            let list: SecretList = client.get("/v1/secrets").await?;
            emit(json, &list, |l| {
                for s in &l.secrets {
                    out!("{:<32} set {}", s.name, s.updated_at);
                }
            });
        }
        SecretCommand::Delete { name } => {
            client.delete(&format!("/v1/secrets/{}", percent_encode(&name))).await?;
            if !json {
                out!("secret {name} deleted");
            }
        }
    }
    Ok(())
}
