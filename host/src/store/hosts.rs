//! Live hosts and the storage format gate (`spindle_core::upgrade` decides; this file
//! reads the facts under the gate's lock and writes the answer, one transaction each).
//!
//! The gate's row is the lock: a host that announces itself and an operator who moves
//! the gate both lock it first, so a host of an older build cannot join between the
//! moment the gate reads the live hosts and the moment it moves.

use async_trait::async_trait;
use spindle_core::Timestamp;
use spindle_core::upgrade::{Format, Formats, GateRefusal, LiveHost};

use super::error::StoreError;
use super::handle::SqlStore;
use super::rows::Columns;
use super::sql::{Row, Tx, Ty, Value};

/// A host as it announced itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRow {
    /// Its id (the engine's `host_id`, which its claims carry).
    pub id: String,
    /// Its build (`spindle 0.1.0`).
    pub build: String,
    /// The storage formats its build reads and writes.
    pub formats: Formats,
    /// The contract versions its sandbox runs (`0.1.0`, `0.2.0`).
    pub contracts: Vec<String>,
    /// Whether it finishes what it holds and claims nothing new.
    pub draining: bool,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// When it is gone unless it beats again.
    pub expires_at: Timestamp,
}

/// The gate as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateRow {
    /// The format every host writes.
    pub format: Format,
    /// When it was set or last moved.
    pub moved_at: Timestamp,
    /// Who set or moved it: the first host, or the operator token that finalized.
    pub moved_by: String,
}

/// What a gate decision answered: a format, or the core's refusal (nothing written).
pub type Gated<T> = Result<T, GateRefusal>;

/// Live hosts and the gate.
#[async_trait]
pub trait HostStore: Send + Sync {
    /// Records `host` (or renews it) if `decide`, given the gate's format (`None` on a
    /// database no host has joined), admits it; a database no host joined is set to
    /// the format `decide` answers. A refused host writes nothing.
    async fn announce(
        &self,
        host: &HostRow,
        decide: &(dyn Fn(Option<Format>) -> Gated<Format> + Sync),
    ) -> Result<Gated<Format>, StoreError>;
    /// Removes a host's row (it stopped).
    async fn leave(&self, id: &str) -> Result<(), StoreError>;
    /// Every recorded host, expired ones too (a caller tells them apart), by id.
    async fn hosts(&self) -> Result<Vec<HostRow>, StoreError>;
    /// The gate, if any host joined.
    async fn gate(&self) -> Result<Option<GateRow>, StoreError>;
    /// Moves the gate to the format `decide` answers from the recorded one and the hosts
    /// live at `now`; answers (from, to).
    async fn move_gate(
        &self,
        now: Timestamp,
        by: &str,
        decide: &(dyn for<'h> Fn(Format, &'h [LiveHost]) -> Gated<Format> + Sync),
    ) -> Result<Gated<(Format, Format)>, StoreError>;
}

static HOST: Columns = Columns {
    table: "hosts",
    names: &[
        "id",
        "build",
        "reads_from",
        "reads_to",
        "writes",
        "contracts",
        "draining",
        "started_at",
        "heartbeat_at",
        "expires_at",
    ],
    tys: &[Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Int],
};

fn host_from_row(mut row: Row) -> Result<HostRow, StoreError> {
    let r = HOST.read(&mut row);
    let contracts = r.text("contracts")?;
    Ok(HostRow {
        id: r.text("id")?,
        build: r.text("build")?,
        formats: Formats { reads: r.num("reads_from")?..=r.num("reads_to")?, writes: r.num("writes")? },
        contracts: contracts.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect(),
        draining: r.int("draining")? != 0,
        started_at: r.ts("started_at")?,
        heartbeat_at: r.ts("heartbeat_at")?,
        expires_at: r.ts("expires_at")?,
    })
}

/// The gate's format, locked until `tx` ends.
async fn locked_gate(tx: &mut Tx) -> Result<Option<Format>, StoreError> {
    let lock = tx.backend().for_update();
    let rows = tx.fetch(&format!("SELECT format FROM storage_gate WHERE id = 1{lock}"), vec![], &[Ty::Int]).await?;
    rows.first().map(|r| r.num(0, "storage_gate.format")).transpose()
}

#[async_trait]
impl HostStore for SqlStore {
    async fn announce(
        &self,
        host: &HostRow,
        decide: &(dyn Fn(Option<Format>) -> Gated<Format> + Sync),
    ) -> Result<Gated<Format>, StoreError> {
        let mut tx = self.db.begin().await?;
        let mut recorded = locked_gate(&mut tx).await?;
        if recorded.is_none() {
            let first = match decide(None) {
                Ok(format) => format,
                Err(refusal) => return Ok(Err(refusal)),
            };
            let inserted = tx
                .fetch(
                    "INSERT INTO storage_gate (id, format, moved_at, moved_by) VALUES (1, $1, $2, $3) \
                     ON CONFLICT (id) DO NOTHING RETURNING format",
                    vec![
                        Value::from(i64::from(first)),
                        Value::from(host.heartbeat_at.as_micros()),
                        Value::from(host.id.as_str()),
                    ],
                    &[Ty::Int],
                )
                .await?;
            // Another host set it first: decide on what it set.
            recorded = if inserted.is_empty() { locked_gate(&mut tx).await? } else { None };
        }
        let format = match recorded.map(Some).map_or_else(|| decide(None), decide) {
            Ok(format) => format,
            Err(refusal) => return Ok(Err(refusal)),
        };
        tx.execute(
            "INSERT INTO hosts (id, build, reads_from, reads_to, writes, contracts, draining, started_at, heartbeat_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (id) DO UPDATE SET build = excluded.build, reads_from = excluded.reads_from, \
             reads_to = excluded.reads_to, writes = excluded.writes, contracts = excluded.contracts, \
             draining = excluded.draining, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at",
            vec![
                Value::from(host.id.as_str()),
                Value::from(host.build.as_str()),
                Value::from(i64::from(*host.formats.reads.start())),
                Value::from(i64::from(*host.formats.reads.end())),
                Value::from(i64::from(host.formats.writes)),
                Value::from(host.contracts.join(",")),
                Value::from(i64::from(host.draining)),
                Value::from(host.started_at.as_micros()),
                Value::from(host.heartbeat_at.as_micros()),
                Value::from(host.expires_at.as_micros()),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(Ok(format))
    }

    async fn leave(&self, id: &str) -> Result<(), StoreError> {
        self.db.execute("DELETE FROM hosts WHERE id = $1", vec![Value::from(id)]).await?;
        Ok(())
    }

    async fn hosts(&self) -> Result<Vec<HostRow>, StoreError> {
        let rows = self
            .db
            .fetch(&format!("SELECT {} FROM hosts ORDER BY id", HOST.list()), vec![], HOST.tys)
            .await
            .map_err(|e| HOST.in_table(e))?;
        rows.into_iter().map(host_from_row).collect()
    }

    async fn gate(&self) -> Result<Option<GateRow>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT format, moved_at, moved_by FROM storage_gate WHERE id = 1",
                vec![],
                &[Ty::Int, Ty::Int, Ty::Text],
            )
            .await?;
        rows.first()
            .map(|r| {
                Ok(GateRow {
                    format: r.num(0, "storage_gate.format")?,
                    moved_at: Timestamp::from_micros(r.int(1, "storage_gate.moved_at")?),
                    moved_by: r.text(2, "storage_gate.moved_by")?,
                })
            })
            .transpose()
    }

    async fn move_gate(
        &self,
        now: Timestamp,
        by: &str,
        decide: &(dyn for<'h> Fn(Format, &'h [LiveHost]) -> Gated<Format> + Sync),
    ) -> Result<Gated<(Format, Format)>, StoreError> {
        let mut tx = self.db.begin().await?;
        let Some(from) = locked_gate(&mut tx).await? else {
            return Err(StoreError::NotFound("the storage gate: no host has joined this database yet".into()));
        };
        let rows = tx
            .fetch(
                &format!("SELECT {} FROM hosts WHERE expires_at > $1 ORDER BY id", HOST.list()),
                vec![Value::from(now.as_micros())],
                HOST.tys,
            )
            .await
            .map_err(|e| HOST.in_table(e))?;
        let live: Vec<LiveHost> = rows
            .into_iter()
            .map(host_from_row)
            .map(|h| h.map(|h| LiveHost { id: h.id, formats: h.formats }))
            .collect::<Result<_, _>>()?;
        let to = match decide(from, &live) {
            Ok(to) => to,
            Err(refusal) => return Ok(Err(refusal)),
        };
        tx.execute(
            "UPDATE storage_gate SET format = $1, moved_at = $2, moved_by = $3 WHERE id = 1",
            vec![Value::from(i64::from(to)), Value::from(now.as_micros()), Value::from(by)],
        )
        .await?;
        tx.commit().await?;
        Ok(Ok((from, to)))
    }
}
