//! What operators and tenants look back on: bulk operations (a retry of every dead letter
//! a filter matches, a cancel or retry of every job a listing's filter matches, done in
//! the background, with who asked and how it went), the operator's reads of a tenant's
//! jobs, and operational alerts (a late success after a failure, sandbox faults).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::Columns;
use super::sql::{Row, Ty, Value};

/// A bulk operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Its id (a UUID).
    pub id: String,
    /// Whose.
    pub tenant: TenantId,
    /// What it does: `retry-dead-letters`, `cancel-jobs`, `retry-jobs`, `operator-read`.
    pub action: String,
    /// What it applies to, as JSON (the filter).
    pub filter: String,
    /// `running`, `done` or `failed`.
    pub state: String,
    /// Jobs it matched so far.
    pub matched: u64,
    /// Jobs it acted on.
    pub done: u64,
    /// Jobs it could not act on.
    pub failed: u64,
    /// Who asked: the token's id.
    pub actor: String,
    /// When.
    pub created_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
}

/// An operational alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// When it was first raised.
    pub at: Timestamp,
    /// When it was raised last (alerts of one tenant, kind and code within a minute are
    /// one, counted).
    pub last_at: Timestamp,
    /// The tenant.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// The job that raised it last, if one did.
    pub job: Option<String>,
    /// What (`late-success`, `sandbox.deadline`, …).
    pub code: String,
    /// What it said.
    pub message: String,
    /// How many times it was raised.
    pub count: u64,
}

/// Which of a tenant's audit entries to list, newest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperationQuery {
    /// Only these actors' (`operator`, `api:acme`, `operator-token:<id>`, …).
    pub actor: Option<String>,
    /// Only entries of this kind (`cancel-jobs`, `operator-read`, `token-minted`, …).
    pub action: Option<String>,
    /// Only entries made at or after this time.
    pub since: Option<Timestamp>,
    /// Only entries made before this time.
    pub until: Option<Timestamp>,
    /// Only entries older than this one (its time and id): the next page.
    pub after: Option<(Timestamp, String)>,
    /// At most this many.
    pub limit: u32,
}

/// Within this long, alerts of one tenant, kind and code are one row, counted.
const ALERT_WINDOW_MICROS: i64 = 60_000_000;

/// Operations and alerts.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Records an operation as it starts, or as it stands (by id).
    async fn save_operation(&self, operation: &Operation) -> Result<(), StoreError>;
    /// A tenant's operation by id.
    async fn operation(&self, tenant: &TenantId, id: &str) -> Result<Option<Operation>, StoreError>;
    /// A tenant's operations as `query` says, newest first (by time, then id).
    async fn operations(&self, tenant: &TenantId, query: &OperationQuery) -> Result<Vec<Operation>, StoreError>;
    /// Raises an alert (counted into the last one of its tenant, kind and code within a
    /// minute).
    async fn raise_alert(&self, alert: &Alert) -> Result<(), StoreError>;
    /// The latest alerts, newest first.
    async fn alerts(&self, limit: u32) -> Result<Vec<Alert>, StoreError>;
}

const OPERATION_COLS: &str =
    "id, tenant_id, action, filter, state, matched, done, failed, actor, created_at, finished_at";
const OPERATION_TYS: &[Ty] =
    &[Ty::Text, Ty::Text, Ty::Text, Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Text, Ty::Int, Ty::OptInt];

/// [`OPERATION_COLS`] by name.
static OPERATION: Columns = Columns {
    table: "operations",
    names: &[
        "id",
        "tenant_id",
        "action",
        "filter",
        "state",
        "matched",
        "done",
        "failed",
        "actor",
        "created_at",
        "finished_at",
    ],
    tys: OPERATION_TYS,
};

fn operation_from_row(mut row: Row) -> Result<Operation, StoreError> {
    let r = OPERATION.read(&mut row);
    Ok(Operation {
        id: r.text("id")?,
        tenant: TenantId(r.text("tenant_id")?),
        action: r.text("action")?,
        filter: r.text("filter")?,
        state: r.text("state")?,
        matched: r.num("matched")?,
        done: r.num("done")?,
        failed: r.num("failed")?,
        actor: r.text("actor")?,
        created_at: r.ts("created_at")?,
        finished_at: r.opt_ts("finished_at")?,
    })
}

const ALERT_COLS: &str = "at, last_at, tenant_id, kind, job_id, code, message, count";
const ALERT_TYS: &[Ty] = &[Ty::Int, Ty::Int, Ty::Text, Ty::Text, Ty::OptText, Ty::Text, Ty::Text, Ty::Int];

#[async_trait]
impl AuditStore for SqlStore {
    async fn save_operation(&self, o: &Operation) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO operations ({OPERATION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, matched = excluded.matched, done = excluded.done, \
             failed = excluded.failed, finished_at = excluded.finished_at"
        );
        self.db
            .execute(
                &sql,
                vec![
                    Value::from(o.id.as_str()),
                    Value::from(o.tenant.0.as_str()),
                    Value::from(o.action.as_str()),
                    Value::from(o.filter.as_str()),
                    Value::from(o.state.as_str()),
                    Value::from(o.matched as i64),
                    Value::from(o.done as i64),
                    Value::from(o.failed as i64),
                    Value::from(o.actor.as_str()),
                    Value::from(o.created_at.as_micros()),
                    Value::from(o.finished_at.map(Timestamp::as_micros)),
                ],
            )
            .await?;
        Ok(())
    }

    async fn operation(&self, tenant: &TenantId, id: &str) -> Result<Option<Operation>, StoreError> {
        let sql = format!("SELECT {OPERATION_COLS} FROM operations WHERE tenant_id = $1 AND id = $2");
        let rows = self.db.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(id)], OPERATION_TYS).await?;
        rows.into_iter().next().map(operation_from_row).transpose()
    }

    async fn operations(&self, tenant: &TenantId, query: &OperationQuery) -> Result<Vec<Operation>, StoreError> {
        let mut conditions = vec!["tenant_id = $1".to_owned()];
        let mut args = vec![Value::from(tenant.0.as_str())];
        let mut bind = |condition: &str, value: Value, args: &mut Vec<Value>| {
            args.push(value);
            conditions.push(condition.replace('?', &format!("${}", args.len())));
        };
        if let Some(actor) = &query.actor {
            bind("actor = ?", Value::from(actor.as_str()), &mut args);
        }
        if let Some(action) = &query.action {
            bind("action = ?", Value::from(action.as_str()), &mut args);
        }
        if let Some(since) = query.since {
            bind("created_at >= ?", Value::from(since.as_micros()), &mut args);
        }
        if let Some(until) = query.until {
            bind("created_at < ?", Value::from(until.as_micros()), &mut args);
        }
        if let Some((at, id)) = &query.after {
            args.push(Value::from(at.as_micros()));
            args.push(Value::from(id.as_str()));
            let (a, b) = (args.len() - 1, args.len());
            conditions.push(format!("(created_at < ${a} OR (created_at = ${a} AND id < ${b}))"));
        }
        args.push(Value::from(i64::from(query.limit)));
        let sql = format!(
            "SELECT {OPERATION_COLS} FROM operations WHERE {} ORDER BY created_at DESC, id DESC LIMIT ${}",
            conditions.join(" AND "),
            args.len()
        );
        let rows = self.db.fetch(&sql, args, OPERATION_TYS).await?;
        rows.into_iter().map(operation_from_row).collect()
    }

    async fn raise_alert(&self, a: &Alert) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        let counted = tx
            .execute(
                "UPDATE alerts SET count = count + 1, last_at = $1, job_id = $2, message = $3 \
                 WHERE id = (SELECT id FROM alerts WHERE tenant_id = $4 AND kind = $5 AND code = $6 AND last_at > $7 \
                 ORDER BY last_at DESC LIMIT 1)",
                vec![
                    Value::from(a.last_at.as_micros()),
                    Value::from(a.job.clone()),
                    Value::from(a.message.as_str()),
                    Value::from(a.tenant.0.as_str()),
                    Value::from(a.kind.as_str()),
                    Value::from(a.code.as_str()),
                    Value::from(a.last_at.as_micros() - ALERT_WINDOW_MICROS),
                ],
            )
            .await?;
        if counted == 0 {
            let sql = format!("INSERT INTO alerts ({ALERT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)");
            tx.execute(
                &sql,
                vec![
                    Value::from(a.at.as_micros()),
                    Value::from(a.last_at.as_micros()),
                    Value::from(a.tenant.0.as_str()),
                    Value::from(a.kind.as_str()),
                    Value::from(a.job.clone()),
                    Value::from(a.code.as_str()),
                    Value::from(a.message.as_str()),
                    Value::from(a.count.max(1) as i64),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn alerts(&self, limit: u32) -> Result<Vec<Alert>, StoreError> {
        let sql = format!("SELECT {ALERT_COLS} FROM alerts ORDER BY last_at DESC LIMIT $1");
        static ALERT: Columns = Columns {
            table: "alerts",
            names: &["at", "last_at", "tenant_id", "kind", "job_id", "code", "message", "count"],
            tys: ALERT_TYS,
        };
        let rows =
            self.db.fetch(&sql, vec![Value::from(i64::from(limit))], ALERT_TYS).await.map_err(|e| ALERT.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = ALERT.read(&mut row);
                Ok(Alert {
                    at: r.ts("at")?,
                    last_at: r.ts("last_at")?,
                    tenant: TenantId(r.text("tenant_id")?),
                    kind: r.text("kind")?,
                    job: r.opt_text("job_id")?,
                    code: r.text("code")?,
                    message: r.text("message")?,
                    count: r.num("count")?,
                })
            })
            .collect()
    }
}
