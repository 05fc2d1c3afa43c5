//! Submissions applications made in their own PostgreSQL transactions (`spindle.submit`):
//! a tenant reads each one's fate; the operator maps database roles to tenants.

use axum::Json;
use axum::extract::{Path, State};

use super::views::{ErrorBody, SqlRoleGranted, SubmissionView};
use super::{ApiError, ApiState, OperatorAuth, TenantAuth};
use crate::engine::TenantId;

/// A SQL submission
///
/// A submission made with `spindle.submit` inside an application's own transaction:
/// `queued` until a host admits it, then `admitted` with its job, or `refused` with the code
/// (and violations) `POST /v1/jobs` would have answered. Nothing else is written for a
/// refused one.
#[utoipa::path(
    get,
    path = "/v1/submissions/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "The id `spindle.submit` answered")),
    responses(
        (status = 200, description = "The submission", body = SubmissionView),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 404, description = "`not-found`: no such submission for this tenant", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn get_submission(
    State(state): State<ApiState>,
    TenantAuth(tenant): TenantAuth,
    Path(id): Path<String>,
) -> Result<Json<SubmissionView>, ApiError> {
    let submission = state.host.engine.submission().sql_submission(&tenant, &id).await?;
    Ok(Json(SubmissionView::from(&submission)))
}

/// Let a database role submit as a tenant
///
/// Maps PostgreSQL role `role` (which must exist) to the tenant: it may then call
/// `spindle.submit(kind, input, options)` inside its own transactions, submitting as this
/// tenant, and nothing else of Spindle's schema. A role maps to one tenant; mapping it again
/// moves it. PostgreSQL only.
#[utoipa::path(
    put,
    path = "/v1/tenants/{name}/sql-roles/{role}",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant"), ("role" = String, Path, description = "The database role")),
    responses(
        (status = 200, description = "Mapped", body = SqlRoleGranted),
        (status = 400, description = "`invalid-request`: not PostgreSQL, or not a plain role name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: no such tenant or role", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn grant_sql_role(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path((name, role)): Path<(String, String)>,
) -> Result<Json<SqlRoleGranted>, ApiError> {
    let tenant = TenantId(name);
    state.host.engine.tenancy().grant_sql(&tenant, &role).await?;
    Ok(Json(SqlRoleGranted { tenant: tenant.0, role }))
}

/// Stop a database role submitting as a tenant
///
/// Unmaps PostgreSQL role `role` from the tenant and takes back its `EXECUTE` on
/// `spindle.submit` and its use of the `spindle` schema: its next call is refused. What it
/// already committed is still admitted. PostgreSQL only.
#[utoipa::path(
    delete,
    path = "/v1/tenants/{name}/sql-roles/{role}",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant"), ("role" = String, Path, description = "The database role")),
    responses(
        (status = 204, description = "Unmapped"),
        (status = 400, description = "`invalid-request`: not PostgreSQL, or not a plain role name", body = ErrorBody),
        (status = 401, description = "`unauthorised`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not an operator token", body = ErrorBody),
        (status = 404, description = "`not-found`: the role is not mapped to this tenant", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody)
    )
)]
pub(super) async fn revoke_sql_role(
    State(state): State<ApiState>,
    _: OperatorAuth,
    Path((name, role)): Path<(String, String)>,
) -> Result<axum::http::StatusCode, ApiError> {
    state.host.engine.tenancy().revoke_sql(&TenantId(name), &role).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
