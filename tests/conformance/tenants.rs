//! Tenants and API tokens.

use spindle::store::{Backend, Role, StoreError, Tenant, TenantId};

use crate::fixture::{Db, acme, at};

on_both_backends!(tenants_are_unique_and_tokens_resolve_to_tenant_and_role);

async fn tenants_are_unique_and_tokens_resolve_to_tenant_and_role(backend: Backend) {
    let db = Db::new(backend).await;

    let created = db.create_tenant("acme", at(0)).await.unwrap();
    assert_eq!(created, Tenant { id: acme(), name: "acme".into(), created_at: at(0) });
    let globex = db.create_tenant("globex", at(1_000)).await.unwrap();

    let duplicate = db.create_tenant("acme", at(2_000)).await;
    assert!(matches!(duplicate, Err(StoreError::Duplicate(_))), "a second `acme` is refused: {duplicate:?}");
    assert_eq!(db.tenant(&acme()).await.unwrap(), Some(created.clone()), "the refused duplicate changed nothing");
    assert_eq!(db.tenant(&TenantId("initech".into())).await.unwrap(), None);
    assert_eq!(db.tenants().await.unwrap(), vec![created, globex.clone()]);

    db.add_token("sha256:tenant-token", Some(&acme()), Role::Tenant, "ci", at(3_000)).await.unwrap();
    db.add_token("sha256:operator-token", None, Role::Operator, "ops", at(3_000)).await.unwrap();
    db.add_token("sha256:globex-token", Some(&globex.id), Role::Tenant, "deploy", at(3_000)).await.unwrap();

    assert_eq!(db.token("sha256:tenant-token").await.unwrap(), Some((Some(acme()), Role::Tenant)));
    assert_eq!(db.token("sha256:operator-token").await.unwrap(), Some((None, Role::Operator)));
    assert_eq!(db.token("sha256:globex-token").await.unwrap(), Some((Some(globex.id), Role::Tenant)));
    assert_eq!(db.token("sha256:unknown").await.unwrap(), None);
}
