//! Operators reading tenants' jobs. Where the host allows it (`operator_reads_tenants`),
//! an operator token may read a tenant's jobs, logs and kinds, never act on them; each
//! read is written to that tenant's audit trail (its operations, `operator-read`, with who
//! and what), so the tenant sees who looked. Reads of one path within a minute are one
//! entry, counted (`matched`), first and last time kept: a page that refreshes itself
//! does not bury the trail.

use std::collections::HashMap;
use std::time::Duration;

use spindle_core::Timestamp;

use super::EngineError;
use crate::store::{Operation, TenantId};

/// Reads of one path within this long are one entry.
const COALESCE: Duration = Duration::from_secs(60);

/// Entries of this host's latest reads, by tenant and path.
#[derive(Debug, Default)]
pub(crate) struct ReadAudit {
    latest: std::sync::Mutex<HashMap<(TenantId, String), Operation>>,
}

impl ReadAudit {
    /// The entry `action` on `what` at `now` writes: the open one counted once more, or a
    /// new one.
    pub(crate) fn entry(&self, tenant: &TenantId, action: &str, what: &str, actor: &str, now: Timestamp) -> Operation {
        let mut latest = self.latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Old entries go when the map grows: it holds a minute's paths at most.
        if latest.len() > 4096 {
            latest.retain(|_, o| o.finished_at.is_some_and(|at| now.since(at) < COALESCE));
        }
        let key = (tenant.clone(), format!("{action} {actor} {what}"));
        if let Some(open) = latest.get_mut(&key) {
            let recent = open.finished_at.is_some_and(|at| now.since(at) < COALESCE);
            if recent && open.actor == actor {
                open.matched += 1;
                open.done += 1;
                open.finished_at = Some(now);
                return open.clone();
            }
        }
        let entry = super::tenancy::audit_entry(tenant, action, serde_json::json!({ "read": what }), actor, now);
        latest.insert(key, entry.clone());
        entry
    }
}

impl super::Tenancy<'_> {
    /// Lets the operator read `tenant`'s `what` (a request's method and path) if this host
    /// allows operators to read tenants' jobs, and writes the read to the tenant's audit
    /// trail before anything is read. `forbidden` where the host does not allow it,
    /// `not-found` for a tenant that does not exist.
    pub async fn operator_reads(&self, tenant: &TenantId, what: &str, actor: &str) -> Result<(), EngineError> {
        if !self.config.operator_reads_tenants {
            return Err(EngineError::Forbidden(
                "this host does not let the operator read tenants' jobs (operator_reads_tenants is off)".into(),
            ));
        }
        self.store.tenant(tenant).await?.ok_or(EngineError::NotFound)?;
        let entry = self.read_audit.entry(tenant, "operator-read", what, actor, self.now());
        self.store.save_operation(&entry).await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_of_one_path_within_a_minute_are_one_entry_counted() {
        let audit = ReadAudit::default();
        let acme = TenantId("acme".into());
        let t0 = Timestamp::from_micros(1_000_000_000);
        let first = audit.entry(&acme, "operator-read", "GET /v1/jobs", "operator", t0);
        let again = audit.entry(&acme, "operator-read", "GET /v1/jobs", "operator", t0.plus(Duration::from_secs(59)));
        assert_eq!((again.id.as_str(), again.matched), (first.id.as_str(), 2), "one entry, counted");
        assert_eq!(again.created_at, t0, "first read kept");
        let other = audit.entry(&acme, "operator-read", "GET /v1/jobs/x", "operator", t0);
        assert_ne!(other.id, first.id, "another path is another entry");
        let later =
            audit.entry(&acme, "operator-read", "GET /v1/jobs", "operator", t0.plus(Duration::from_secs(59 + 61)));
        assert_ne!(later.id, first.id, "a minute's silence starts a new entry");
        let globex = audit.entry(&TenantId("globex".into()), "operator-read", "GET /v1/jobs", "operator", t0);
        assert_ne!(globex.id, first.id, "another tenant's trail");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&first.filter).unwrap()["read"], "GET /v1/jobs");
    }
}
