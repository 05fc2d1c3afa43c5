//! `spindle token`: API tokens, created, listed and revoked by their ids; a tenant token
//! manages its own tenant's, an operator token any.

use super::print::{self, emit};
use super::remote::Client;
use super::{percent_encode, whole_secs};
use spindle::api::views::{CreatedToken, NewToken, TokenList};

/// Token management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints its id, then the token (shown once).
    Create {
        /// The tenant it is for (a tenant token: only its own, the default).
        #[arg(long)]
        tenant: Option<String>,
        /// An operator token instead (operator token only).
        #[arg(long, conflicts_with = "tenant")]
        operator: bool,
        /// What it is for, shown in listings (default `issued`).
        #[arg(long)]
        name: Option<String>,
        /// Stop working after this long: `30s`, `5m`, `2h`, `30d` (default: until revoked).
        #[arg(long)]
        expires: Option<String>,
    },
    /// List tokens (revoked and expired ones too), never the tokens themselves.
    List {
        /// Only this tenant's (the operator sees every token without it).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a token by its id: it stops working at once, on every host.
    Revoke {
        /// The token's id (from `token create` or `token list`).
        id: String,
    },
}

/// Runs a `spindle token` command.
pub(super) async fn run(client: &Client, json: bool, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create { tenant, operator, name, expires } => {
            let expires_in_secs = expires.as_deref().map(|e| whole_secs(e, "--expires")).transpose()?;
            let request = NewToken { tenant, operator, name, expires_in_secs };
            let created: CreatedToken = client.post("/v1/tokens", &request).await?;
            emit(json, &created, print::created_token);
        }
        TokenCommand::List { tenant } => {
            let tokens: TokenList = client.get(&format!("/v1/tokens{}", tenant_query(tenant.as_deref()))).await?;
            emit(json, &tokens, print::tokens);
        }
        TokenCommand::Revoke { id } => {
            client.delete(&format!("/v1/tokens/{}", percent_encode(&id))).await?;
            let revoked = serde_json::json!({ "id": id.as_str(), "revoked": true });
            emit(json, &revoked, |_| out!("token {id} revoked"));
        }
    }
    Ok(())
}

/// `?tenant=NAME`, escaped.
fn tenant_query(tenant: Option<&str>) -> String {
    tenant.map(|t| format!("?tenant={}", percent_encode(t))).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_are_escaped() {
        assert_eq!(tenant_query(Some("a b/c")), "?tenant=a%20b%2Fc");
        assert_eq!(tenant_query(None), "");
    }
}
