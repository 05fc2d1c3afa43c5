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

/// A host process as it announced itself. Each process announces itself under its own
/// instance: two processes started with one host id (a surge, a rollback in place while
/// the old process still finishes a step) are two rows, each removed only by its own
/// process, and the gate counts both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRow {
    /// Its id (the engine's `host_id`, which its claims carry).
    pub id: String,
    /// Its process's instance (random per process); empty for a row a build before
    /// instances wrote, keyed by its id alone.
    pub instance: String,
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

/// How long after its last heartbeat a process's row stays, listed as gone.
const GONE_FOR_MICROS: i64 = 3_600_000_000;

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
    /// Removes a host process's row (it stopped): its own, never another process's of
    /// the same host id.
    async fn leave(&self, id: &str, instance: &str) -> Result<(), StoreError>;
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

/// The `id` column of a host process's row: its host id and instance.
fn row_id(host: &HostRow) -> String {
    if host.instance.is_empty() { host.id.clone() } else { format!("{}#{}", host.id, host.instance) }
}

fn host_from_row(mut row: Row) -> Result<HostRow, StoreError> {
    let r = HOST.read(&mut row);
    let contracts = r.text("contracts")?;
    let stored = r.text("id")?;
    let (id, instance) = stored.split_once('#').map_or((stored.as_str(), ""), |(id, i)| (id, i));
    Ok(HostRow {
        id: id.to_owned(),
        instance: instance.to_owned(),
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
            // No host announced itself here yet: a fresh database, or one that builds
            // from before the gate wrote jobs to.
            let any = tx.fetch("SELECT count(*) FROM (SELECT 1 FROM jobs LIMIT 1) AS j", vec![], &[Ty::Int]).await?;
            let has_jobs = any.first().map(|r| r.int(0, "jobs (any)")).transpose()?.unwrap_or(0) > 0;
            let first = match decide(spindle_core::upgrade::unrecorded(has_jobs)) {
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
            // Another host set it first: decide on what it set; else on what this one set.
            recorded = if inserted.is_empty() { locked_gate(&mut tx).await? } else { Some(first) };
        }
        let format = match recorded.map(Some).map_or_else(|| decide(None), decide) {
            Ok(format) => format,
            Err(refusal) => return Ok(Err(refusal)),
        };
        // Rows of processes gone for an hour go: each process has a row of its own, and
        // every restart adds one.
        tx.execute(
            "DELETE FROM hosts WHERE expires_at < $1",
            vec![Value::from(host.heartbeat_at.as_micros().saturating_sub(GONE_FOR_MICROS))],
        )
        .await?;
        tx.execute(
            "INSERT INTO hosts (id, build, reads_from, reads_to, writes, contracts, draining, started_at, heartbeat_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (id) DO UPDATE SET build = excluded.build, reads_from = excluded.reads_from, \
             reads_to = excluded.reads_to, writes = excluded.writes, contracts = excluded.contracts, \
             draining = excluded.draining, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at",
            vec![
                Value::from(row_id(host)),
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

    async fn leave(&self, id: &str, instance: &str) -> Result<(), StoreError> {
        let row = HostRow {
            id: id.to_owned(),
            instance: instance.to_owned(),
            build: String::new(),
            formats: Formats { reads: 0..=0, writes: 0 },
            contracts: Vec::new(),
            draining: false,
            started_at: Timestamp::EPOCH,
            heartbeat_at: Timestamp::EPOCH,
            expires_at: Timestamp::EPOCH,
        };
        self.db.execute("DELETE FROM hosts WHERE id = $1", vec![Value::from(row_id(&row))]).await?;
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
            .map(|h| {
                h.map(|h| {
                    let id = if h.instance.is_empty() { h.id } else { format!("{} [process {}]", h.id, h.instance) };
                    LiveHost { id, formats: h.formats }
                })
            })
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

#[cfg(test)]
mod tests {
    use spindle_core::upgrade::{self, NEWEST};

    use super::*;
    use crate::store::schema::Phase;
    use crate::store::sql::Backend;
    use crate::store::test_db::fresh;

    fn host(id: &str, formats: Formats, at: i64) -> HostRow {
        HostRow {
            id: id.into(),
            instance: String::new(),
            build: "spindle test".into(),
            formats,
            contracts: vec!["0.1.0".into(), "0.2.0".into()],
            draining: false,
            started_at: Timestamp::from_micros(at),
            heartbeat_at: Timestamp::from_micros(at),
            expires_at: Timestamp::from_micros(at + 60_000_000),
        }
    }

    async fn join(store: &SqlStore, row: &HostRow) -> Gated<Format> {
        let formats = row.formats.clone();
        store.announce(row, &|recorded| upgrade::join(recorded, &formats)).await.expect("announce")
    }

    async fn finalize(store: &SqlStore, at: i64) -> Gated<(Format, Format)> {
        store
            .move_gate(Timestamp::from_micros(at), "operator", &|from, live| upgrade::finalize(from, live))
            .await
            .expect("move the gate")
    }

    /// The gate's rules as the store keeps them, on both backends: the first host sets
    /// it, a host that cannot read it is refused and writes nothing, and it moves only
    /// once no live host holds it back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_gate_admits_refuses_and_moves_as_the_core_decides() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { return };
            let store = SqlStore::on(test.db.clone());
            store.migrate(&[Phase::Expand, Phase::Contract]).await.expect("migrate");
            assert_eq!(store.gate().await.expect("gate"), None, "{backend:?}: no host joined");
            let old = host("old", Formats::pinned(1).expect("format 1"), 1_000);
            assert_eq!(join(&store, &old).await, Ok(1), "{backend:?}: the first host sets the gate");
            let new = host("new", Formats::this_build(), 2_000);
            assert_eq!(join(&store, &new).await, Ok(1), "{backend:?}: a newer build writes the old format");
            assert!(
                matches!(finalize(&store, 3_000).await, Err(GateRefusal::NothingToFinalize { .. })),
                "{backend:?}: the old host holds the gate"
            );
            // The old host's row expires (it was killed): the gate moves.
            assert_eq!(finalize(&store, 60_001_500).await, Ok((1, NEWEST)), "{backend:?}");
            let gate = store.gate().await.expect("gate").expect("a gate");
            assert_eq!((gate.format, gate.moved_by.as_str()), (NEWEST, "operator"));
            // An old build now is refused, and its row is not written.
            let late = host("late", Formats::pinned(1).expect("format 1"), 4_000);
            assert!(matches!(join(&store, &late).await, Err(GateRefusal::CannotRead { database: NEWEST, .. })));
            let listed = store.hosts().await.expect("hosts");
            let ids: Vec<&str> = listed.iter().map(|h| h.id.as_str()).collect();
            assert_eq!(ids, ["new", "old"], "{backend:?}: the expired row stays until it leaves");
            assert_eq!(listed[0], new, "{backend:?}: read back as written");
            store.leave("old", "").await.expect("leave");
            assert_eq!(store.hosts().await.expect("hosts").len(), 1, "{backend:?}");
            test.drop().await;
        }
    }

    /// A database that builds from before the gate wrote jobs to (it has jobs and records
    /// no format) starts at their format, 2, whatever the first host of this build could
    /// write: they may still be running on it, and would misread a lean job. A fresh one
    /// starts at the newest.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_database_with_jobs_and_no_gate_starts_at_the_format_before_the_gate() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { return };
            let store = SqlStore::on(test.db.clone());
            store.migrate(&[Phase::Expand, Phase::Contract]).await.expect("migrate");
            let rules = spindle_core::KindRules {
                cancellable: false,
                max_attempts: 1,
                failure_effect: false,
                notify_on_success: false,
                lean: false,
            };
            let at = Timestamp::from_micros(1_000);
            let submission = spindle_core::Submission {
                id: spindle_core::JobId(uuid::Uuid::from_u128(7)),
                rules,
                steps: vec![("run".into(), 1)],
                run_at: at,
            };
            let (job, history) = spindle_core::Job::submit(submission, at);
            let new = crate::store::NewJob {
                job,
                tenant: crate::store::TenantId("acme".into()),
                kind: "noop".into(),
                kind_version: 1,
                priority: spindle_core::policy::priority::Priority::Normal,
                payload: b"{}".to_vec(),
                idempotency_key: None,
                lease_keys: Vec::new(),
                history,
            };
            crate::store::JobStore::insert_jobs(&store, vec![new], at).await.expect("a job written before the gate");
            let first = host("first", Formats::this_build(), 2_000);
            assert_eq!(join(&store, &first).await, Ok(upgrade::BEFORE_THE_GATE), "{backend:?}");
            assert_eq!(store.gate().await.expect("gate").map(|g| g.format), Some(2), "{backend:?}: recorded");
            test.drop().await;
        }
        let Some(test) = fresh(Backend::Sqlite).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand, Phase::Contract]).await.expect("migrate");
        assert_eq!(join(&store, &host("first", Formats::this_build(), 1_000)).await, Ok(NEWEST), "a fresh database");
        test.drop().await;
    }

    /// Hosts that start together on a fresh database agree on one format.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn hosts_joining_at_once_agree_on_the_format() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand]).await.expect("migrate");
        let joins = (0..8).map(|i| {
            let store = store.clone();
            async move {
                let formats = if i % 2 == 0 { Formats::pinned(1).expect("1") } else { Formats::this_build() };
                join(&store, &host(&format!("h{i}"), formats, 1_000)).await
            }
        });
        let answers = futures_util::future::join_all(joins).await;
        let gate = store.gate().await.expect("gate").expect("set").format;
        for (i, answer) in answers.iter().enumerate() {
            match answer {
                Ok(format) => assert_eq!(*format, gate, "h{i}"),
                Err(GateRefusal::CannotRead { database, .. }) => assert_eq!(*database, gate, "h{i}"),
                Err(other) => panic!("h{i}: {other}"),
            }
        }
        test.drop().await;
    }
}
