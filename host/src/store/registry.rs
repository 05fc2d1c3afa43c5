//! Deployed components (content-addressed bytes every host can load) and the versions
//! of each tenant's kinds.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::{Columns, corrupt};
use super::sql::{Row, Ty, Value};

/// A version of a kind deployed by a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindVersion {
    /// The tenant.
    pub tenant: TenantId,
    /// The kind's name as deployed.
    pub kind: String,
    /// 1, 2, … per kind.
    pub version: i64,
    /// The component's content address.
    pub digest: String,
    /// What the component says about itself, as JSON.
    pub spec: String,
    /// What the deployment allows, declares and sets (outbound rules, secrets,
    /// settings), as JSON.
    pub deployment: String,
    /// When it was deployed.
    pub created_at: Timestamp,
    /// The component's size in bytes.
    #[serde(default)]
    pub size: Option<i64>,
}

/// A kind with its versions' summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindEntry {
    /// The kind's name.
    pub kind: String,
    /// The version new submissions use.
    pub current_version: i64,
    /// The newest version deployed.
    pub latest_version: i64,
    /// When the current version last changed.
    pub updated_at: Timestamp,
}

/// Where a deploy stands: the component was checked at once and compiles in the
/// background.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeployState {
    /// Compiling (and describing) on the host that took the upload.
    Compiling,
    /// Compiled, described and stored: `version` is the new current version.
    Ready,
    /// Refused after the upload was answered (a compile error or time-out, a describe
    /// that trapped, a name that does not match); `error_code` says why.
    Failed,
}

impl DeployState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Compiling => "compiling",
            Self::Ready => "ready",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "compiling" => Ok(Self::Compiling),
            "ready" => Ok(Self::Ready),
            "failed" => Ok(Self::Failed),
            other => Err(corrupt(format!("deploy state {other:?}"))),
        }
    }
}

/// One deploy of a component as a kind's next version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployRecord {
    /// Its id (a UUID).
    pub id: String,
    /// The tenant.
    pub tenant: TenantId,
    /// The kind it deploys.
    pub kind: String,
    /// The component's content address.
    pub digest: String,
    /// The component's size in bytes.
    pub size: i64,
    /// Where it stands.
    pub state: DeployState,
    /// The version it made, once ready.
    pub version: Option<i64>,
    /// Why it failed.
    pub error_code: Option<String>,
    /// What the failure said.
    pub error_message: Option<String>,
    /// When the upload was taken.
    pub created_at: Timestamp,
    /// When it became ready or failed.
    pub finished_at: Option<Timestamp>,
}

const DEPLOY_COLS: &str =
    "id, tenant_id, kind, digest, size, state, version, error_code, error_message, created_at, finished_at";
const DEPLOY_TYS: &[Ty] = &[
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::Text,
    Ty::Int,
    Ty::Text,
    Ty::OptInt,
    Ty::OptText,
    Ty::OptText,
    Ty::Int,
    Ty::OptInt,
];

/// [`DEPLOY_COLS`] by name.
static DEPLOY: Columns = Columns {
    table: "deployments",
    names: &[
        "id",
        "tenant_id",
        "kind",
        "digest",
        "size",
        "state",
        "version",
        "error_code",
        "error_message",
        "created_at",
        "finished_at",
    ],
    tys: DEPLOY_TYS,
};

fn deploy_from_row(mut row: Row) -> Result<DeployRecord, StoreError> {
    let r = DEPLOY.read(&mut row);
    Ok(DeployRecord {
        id: r.text("id")?,
        tenant: TenantId(r.text("tenant_id")?),
        kind: r.text("kind")?,
        digest: r.text("digest")?,
        size: r.int("size")?,
        state: r.parse("state", |s| DeployState::parse(s).ok())?,
        version: r.opt_int("version")?,
        error_code: r.opt_text("error_code")?,
        error_message: r.opt_text("error_message")?,
        created_at: r.ts("created_at")?,
        finished_at: r.opt_ts("finished_at")?,
    })
}

/// Components and kind versions.
#[async_trait]
pub trait RegistryStore: Send + Sync {
    /// Records a deploy as it starts (state `compiling`).
    async fn insert_deploy(&self, deploy: &DeployRecord) -> Result<(), StoreError>;
    /// Records how a deploy ended: ready with its version, or failed with a code.
    async fn finish_deploy(&self, deploy: &DeployRecord) -> Result<(), StoreError>;
    /// A tenant's deploy by id.
    async fn deploy_record(&self, tenant: &TenantId, id: &str) -> Result<Option<DeployRecord>, StoreError>;
    /// A tenant's latest deploys of `kind`, newest first.
    async fn deploy_records(&self, tenant: &TenantId, kind: &str, limit: u32) -> Result<Vec<DeployRecord>, StoreError>;
    /// A tenant's deploys still compiling (of any kind), newest first.
    async fn compiling_deploys(&self, tenant: &TenantId, limit: u32) -> Result<Vec<DeployRecord>, StoreError>;
    /// Stores component bytes under their digest (idempotent).
    async fn put_component(
        &self,
        digest: &str,
        bytes: &[u8],
        compiled_size: Option<u64>,
        now: Timestamp,
    ) -> Result<(), StoreError>;
    /// Whether any version of any tenant's kind is of component `digest`.
    async fn component_in_use(&self, digest: &str) -> Result<bool, StoreError>;
    /// Component bytes by digest.
    async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Adds the next version of a tenant's kind and makes it current.
    async fn add_kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        digest: &str,
        spec: &str,
        deployment: &str,
        now: Timestamp,
    ) -> Result<KindVersion, StoreError>;
    /// The version new submissions of a kind use.
    async fn current_kind(&self, tenant: &TenantId, kind: &str) -> Result<Option<KindVersion>, StoreError>;
    /// A specific version of a kind.
    async fn kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
    ) -> Result<Option<KindVersion>, StoreError>;
    /// A tenant's kinds.
    async fn kinds(&self, tenant: &TenantId) -> Result<Vec<KindEntry>, StoreError>;
    /// Every version of a tenant's kind.
    async fn kind_versions(&self, tenant: &TenantId, kind: &str) -> Result<Vec<KindVersion>, StoreError>;
    /// Makes an existing version current (a rollback, or a roll forward).
    async fn set_current_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
        now: Timestamp,
    ) -> Result<(), StoreError>;
}

/// [`KIND_VERSION_COLS`] by name.
static KIND_VERSION: Columns = Columns {
    table: "kind_versions",
    names: &["tenant_id", "kind", "version", "digest", "spec", "created_at", "deployment", "size"],
    tys: KIND_VERSION_TYS,
};

fn kind_version_from_row(mut row: Row) -> Result<KindVersion, StoreError> {
    let r = KIND_VERSION.read(&mut row);
    Ok(KindVersion {
        tenant: TenantId(r.text("tenant_id")?),
        kind: r.text("kind")?,
        version: r.int("version")?,
        digest: r.text("digest")?,
        spec: r.text("spec")?,
        created_at: r.ts("created_at")?,
        deployment: r.text("deployment")?,
        size: r.opt_int("size")?,
    })
}

/// A version's columns, with its component's size (`v` the version, `c` its component).
const KIND_VERSION_COLS: &str = "v.tenant_id, v.kind, v.version, v.digest, v.spec, v.created_at, v.deployment, c.size";
const KIND_VERSION_TYS: &[Ty] = &[Ty::Text, Ty::Text, Ty::Int, Ty::Text, Ty::Text, Ty::Int, Ty::Text, Ty::OptInt];
/// The tables those columns come from.
const KIND_VERSION_FROM: &str = "kind_versions v LEFT JOIN components c ON c.digest = v.digest";

#[async_trait]
impl RegistryStore for SqlStore {
    async fn insert_deploy(&self, d: &DeployRecord) -> Result<(), StoreError> {
        let sql =
            format!("INSERT INTO deployments ({DEPLOY_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)");
        self.db
            .execute(
                &sql,
                vec![
                    Value::from(d.id.as_str()),
                    Value::from(d.tenant.0.as_str()),
                    Value::from(d.kind.as_str()),
                    Value::from(d.digest.as_str()),
                    Value::from(d.size),
                    Value::from(d.state.as_str()),
                    Value::from(d.version),
                    Value::from(d.error_code.clone()),
                    Value::from(d.error_message.clone()),
                    Value::from(d.created_at.as_micros()),
                    Value::from(d.finished_at.map(Timestamp::as_micros)),
                ],
            )
            .await?;
        Ok(())
    }

    async fn finish_deploy(&self, d: &DeployRecord) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE deployments SET state = $1, version = $2, error_code = $3, error_message = $4, finished_at = $5 \
                 WHERE id = $6 AND tenant_id = $7",
                vec![
                    Value::from(d.state.as_str()),
                    Value::from(d.version),
                    Value::from(d.error_code.clone()),
                    Value::from(d.error_message.clone()),
                    Value::from(d.finished_at.map(Timestamp::as_micros)),
                    Value::from(d.id.as_str()),
                    Value::from(d.tenant.0.as_str()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn deploy_record(&self, tenant: &TenantId, id: &str) -> Result<Option<DeployRecord>, StoreError> {
        let sql = format!("SELECT {DEPLOY_COLS} FROM deployments WHERE tenant_id = $1 AND id = $2");
        let rows = self
            .db
            .fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(id)], DEPLOY_TYS)
            .await
            .map_err(|e| DEPLOY.in_table(e))?;
        rows.into_iter().next().map(deploy_from_row).transpose()
    }

    async fn deploy_records(&self, tenant: &TenantId, kind: &str, limit: u32) -> Result<Vec<DeployRecord>, StoreError> {
        let sql = format!(
            "SELECT {DEPLOY_COLS} FROM deployments WHERE tenant_id = $1 AND kind = $2 ORDER BY created_at DESC, id LIMIT $3"
        );
        let rows = self
            .db
            .fetch(
                &sql,
                vec![Value::from(tenant.0.as_str()), Value::from(kind), Value::from(i64::from(limit))],
                DEPLOY_TYS,
            )
            .await?;
        rows.into_iter().map(deploy_from_row).collect()
    }

    async fn compiling_deploys(&self, tenant: &TenantId, limit: u32) -> Result<Vec<DeployRecord>, StoreError> {
        let sql = format!(
            "SELECT {DEPLOY_COLS} FROM deployments WHERE tenant_id = $1 AND state = 'compiling' \
             ORDER BY created_at DESC, id LIMIT $2"
        );
        let rows = self
            .db
            .fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(i64::from(limit))], DEPLOY_TYS)
            .await?;
        rows.into_iter().map(deploy_from_row).collect()
    }

    async fn put_component(
        &self,
        digest: &str,
        bytes: &[u8],
        compiled_size: Option<u64>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let compiled = compiled_size.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        self.db
            .execute(
                "INSERT INTO components (digest, bytes, size, compiled_size, created_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (digest) DO UPDATE SET compiled_size = COALESCE(excluded.compiled_size, components.compiled_size)",
                vec![
                    Value::from(digest),
                    Value::from(bytes.to_vec()),
                    Value::from(i64::try_from(bytes.len()).unwrap_or(i64::MAX)),
                    Value::from(compiled),
                    Value::from(now.as_micros()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn component_in_use(&self, digest: &str) -> Result<bool, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT count(*) FROM (SELECT 1 FROM kind_versions WHERE digest = $1 LIMIT 1) AS used",
                vec![Value::from(digest)],
                &[Ty::Int],
            )
            .await?;
        Ok(rows.first().map_or(Ok(0), |r| r.int(0, "kind_versions (count)"))? > 0)
    }

    async fn component(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut rows = self
            .db
            .fetch("SELECT bytes FROM components WHERE digest = $1", vec![Value::from(digest)], &[Ty::Blob])
            .await?;
        Ok(rows.pop().map(|mut r| r.take_opt_blob(0, "components.bytes")).transpose()?.flatten())
    }

    async fn add_kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        digest: &str,
        spec: &str,
        deployment: &str,
        now: Timestamp,
    ) -> Result<KindVersion, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                "INSERT INTO kinds (tenant_id, name, current_version, latest_version, updated_at) VALUES ($1, $2, 1, 1, $3) \
                 ON CONFLICT (tenant_id, name) DO UPDATE SET current_version = kinds.latest_version + 1, \
                 latest_version = kinds.latest_version + 1, updated_at = excluded.updated_at RETURNING latest_version",
                vec![Value::from(tenant.0.as_str()), Value::from(kind), Value::from(now.as_micros())],
                &[Ty::Int],
            )
            .await?;
        let version =
            rows.first().ok_or_else(|| corrupt("kind upsert returned nothing"))?.int(0, "kinds.latest_version")?;
        tx.execute(
            "INSERT INTO kind_versions (tenant_id, kind, version, digest, spec, created_at, deployment) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            vec![
                Value::from(tenant.0.as_str()),
                Value::from(kind),
                Value::from(version),
                Value::from(digest),
                Value::from(spec),
                Value::from(now.as_micros()),
                Value::from(deployment),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(KindVersion {
            tenant: tenant.clone(),
            kind: kind.to_owned(),
            version,
            digest: digest.to_owned(),
            spec: spec.to_owned(),
            deployment: deployment.to_owned(),
            created_at: now,
            size: None,
        })
    }

    async fn current_kind(&self, tenant: &TenantId, kind: &str) -> Result<Option<KindVersion>, StoreError> {
        let rows = self
            .db
            .fetch(
                &format!(
                    "SELECT {KIND_VERSION_COLS} FROM kinds k JOIN kind_versions v ON v.tenant_id = k.tenant_id \
                     AND v.kind = k.name AND v.version = k.current_version LEFT JOIN components c ON c.digest = v.digest \
                     WHERE k.tenant_id = $1 AND k.name = $2"
                ),
                vec![Value::from(tenant.0.as_str()), Value::from(kind)],
                KIND_VERSION_TYS,
            )
            .await?;
        rows.into_iter().next().map(kind_version_from_row).transpose()
    }

    async fn kind_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
    ) -> Result<Option<KindVersion>, StoreError> {
        let sql = format!(
            "SELECT {KIND_VERSION_COLS} FROM {KIND_VERSION_FROM} WHERE v.tenant_id = $1 AND v.kind = $2 AND v.version = $3"
        );
        let rows = self
            .db
            .fetch(
                &sql,
                vec![Value::from(tenant.0.as_str()), Value::from(kind), Value::from(version)],
                KIND_VERSION_TYS,
            )
            .await?;
        rows.into_iter().next().map(kind_version_from_row).transpose()
    }

    async fn kinds(&self, tenant: &TenantId) -> Result<Vec<KindEntry>, StoreError> {
        static KIND: Columns = Columns {
            table: "kinds",
            names: &["name", "current_version", "latest_version", "updated_at"],
            tys: &[Ty::Text, Ty::Int, Ty::Int, Ty::Int],
        };
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM kinds WHERE tenant_id = $1 ORDER BY name", KIND.list()),
                vec![Value::from(tenant.0.as_str())],
                KIND.tys,
            )
            .await
            .map_err(|e| KIND.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = KIND.read(&mut row);
                Ok(KindEntry {
                    kind: r.text("name")?,
                    current_version: r.int("current_version")?,
                    latest_version: r.int("latest_version")?,
                    updated_at: r.ts("updated_at")?,
                })
            })
            .collect()
    }

    async fn kind_versions(&self, tenant: &TenantId, kind: &str) -> Result<Vec<KindVersion>, StoreError> {
        let sql = format!(
            "SELECT {KIND_VERSION_COLS} FROM {KIND_VERSION_FROM} WHERE v.tenant_id = $1 AND v.kind = $2 ORDER BY v.version"
        );
        let rows =
            self.db.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(kind)], KIND_VERSION_TYS).await?;
        rows.into_iter().map(kind_version_from_row).collect()
    }

    async fn set_current_version(
        &self,
        tenant: &TenantId,
        kind: &str,
        version: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let changed = self
            .db
            .execute(
                "UPDATE kinds SET current_version = $1, updated_at = $2 WHERE tenant_id = $3 AND name = $4 \
                 AND EXISTS (SELECT 1 FROM kind_versions v WHERE v.tenant_id = $3 AND v.kind = $4 AND v.version = $1)",
                vec![
                    Value::from(version),
                    Value::from(now.as_micros()),
                    Value::from(tenant.0.as_str()),
                    Value::from(kind),
                ],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("version {version} of kind {kind}")));
        }
        Ok(())
    }
}
