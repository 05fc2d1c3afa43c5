//! Exclusive lease keys inside a write's transaction: locked in key order, taken,
//! checked, renewed and released for a claim, its heartbeats and its end.

use std::collections::BTreeSet;

use spindle_core::Timestamp;

use super::error::StoreError;
use super::sql::{Backend, Tx, Ty, Value};

/// Locks the rows of `keys` in key order, making a free row for a key never used before:
/// after this, the transaction waits for no lease row, so transactions that lock their
/// keys this way never wait for each other in a cycle.
pub(super) async fn lock_in_order(tx: &mut Tx, keys: &BTreeSet<&str>) -> Result<(), StoreError> {
    if keys.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = keys.iter().copied().collect();
    for chunk in keys.chunks(super::rows::MAX_PARAMS) {
        // In key order (the set is sorted, and rows are inserted as they come).
        let rows = chunk.iter().map(|k| vec![Value::from(*k)]).collect();
        let insert = |source: &str| {
            format!(
                "INSERT INTO leases (key, job_id, holder_fence, token, owner, expires_at) \
                 SELECT column1, '', 0, 0, '', 0 FROM {source} WHERE true ON CONFLICT (key) DO NOTHING"
            )
        };
        super::rows::over_rows(tx, rows, 1, insert, &[]).await?;
        if tx.backend() == Backend::Postgres {
            let sql = format!(
                "SELECT key FROM leases WHERE key IN ({}) ORDER BY key FOR UPDATE",
                super::rows::placeholders(1, chunk.len())
            );
            tx.fetch(&sql, chunk.iter().map(|k| Value::from(*k)).collect(), &[Ty::Text]).await?;
        }
    }
    Ok(())
}

/// Takes `key` for job `id`'s claim under `fence` until `expires_at`; answers when the
/// lease of the job that holds it lapses, if another job holds it (and then takes
/// nothing).
pub(super) async fn acquire_one(
    tx: &mut Tx,
    id: &str,
    key: &str,
    fence: i64,
    owner: &str,
    expires_at: Timestamp,
    now: Timestamp,
) -> Result<Option<Timestamp>, StoreError> {
    let taken = tx
        .execute(
            "INSERT INTO leases (key, job_id, holder_fence, token, owner, expires_at) VALUES ($1, $2, $3, 1, $4, $5) \
             ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, holder_fence = excluded.holder_fence, \
             token = leases.token + 1, owner = excluded.owner, expires_at = excluded.expires_at \
             WHERE leases.expires_at <= $6 OR leases.job_id = excluded.job_id",
            vec![
                Value::from(key),
                Value::from(id),
                Value::from(fence),
                Value::from(owner),
                Value::from(expires_at.as_micros()),
                Value::from(now.as_micros()),
            ],
        )
        .await?;
    if taken > 0 {
        return Ok(None);
    }
    let holder = tx.fetch("SELECT expires_at FROM leases WHERE key = $1", vec![Value::from(key)], &[Ty::Int]).await?;
    Ok(Some(holder.first().map_or(Ok(now), |r| r.int(0, "leases.expires_at").map(Timestamp::from_micros))?))
}

/// Whether job `id` still holds every one of `keys` under `fence`.
pub(super) async fn holds_all(tx: &mut Tx, id: &str, fence: i64, keys: &[String]) -> Result<bool, StoreError> {
    let held = tx
        .fetch(
            "SELECT COUNT(*) FROM leases WHERE job_id = $1 AND holder_fence = $2",
            vec![Value::from(id), Value::from(fence)],
            &[Ty::Int],
        )
        .await?;
    let needed = i64::try_from(keys.iter().collect::<BTreeSet<_>>().len()).unwrap_or(i64::MAX);
    Ok(held.first().map_or(Ok(0), |r| r.int(0, "leases.count (held)"))? >= needed)
}

/// Extends `key`, held by job `id` under `fence`, until `expires_at`.
pub(super) async fn renew_one(
    tx: &mut Tx,
    id: &str,
    key: &str,
    fence: i64,
    expires_at: Timestamp,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE leases SET expires_at = $1 WHERE key = $2 AND job_id = $3 AND holder_fence = $4",
        vec![Value::from(expires_at.as_micros()), Value::from(key), Value::from(id), Value::from(fence)],
    )
    .await?;
    Ok(())
}

/// Lets go of `key` if job `id` holds it under `fence` or an earlier one.
pub(super) async fn release_one(tx: &mut Tx, id: &str, key: &str, fence: i64) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE leases SET job_id = '', holder_fence = 0, owner = '', expires_at = 0 \
         WHERE key = $1 AND job_id = $2 AND holder_fence <= $3",
        vec![Value::from(key), Value::from(id), Value::from(fence)],
    )
    .await?;
    Ok(())
}

/// Which of a job's key rows [`free`] lets go.
#[derive(Clone, Copy, Debug)]
pub(super) enum FenceMatch {
    /// Those taken under the fence.
    Exactly,
}

/// Lets go of the keys job `id` holds under `fence` (they are this transaction's own:
/// it took them, so it waits for no lock).
pub(super) async fn free(tx: &mut Tx, id: &str, fence: i64, which: FenceMatch) -> Result<(), StoreError> {
    let op = match which {
        FenceMatch::Exactly => "=",
    };
    let sql = format!(
        "UPDATE leases SET job_id = '', holder_fence = 0, owner = '', expires_at = 0 \
         WHERE job_id = $1 AND holder_fence {op} $2"
    );
    tx.execute(&sql, vec![Value::from(id), Value::from(fence)]).await?;
    Ok(())
}
