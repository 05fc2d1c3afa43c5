//! Tenants and their tokens as the API shows them (operator token).

use crate::api::time::rfc3339;
use crate::engine::Tenant;
use spindle_views::TenantView;

impl From<&Tenant> for TenantView {
    fn from(t: &Tenant) -> Self {
        Self {
            name: t.name.clone(),
            created_at: rfc3339(t.created_at),
            retention_secs: t.retention.map(|r| r.as_secs()),
        }
    }
}
