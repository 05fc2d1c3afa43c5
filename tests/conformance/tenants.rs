//! Tenants and API tokens: tokens resolve to their tenant and role while they work (neither
//! revoked nor expired), list by tenant, and are revoked within a tenant only.

use spindle::store::{Backend, MintedBy, Role, StoreError, Tenant, TenantId, TokenInfo, token_id};
use spindle::tokens::hash;
use spindle_core::Timestamp;

use crate::fixture::{Db, acme, at, globex};

on_both_backends!(
    tenants_are_unique_and_tokens_resolve_to_tenant_and_role,
    tokens_expire_list_by_tenant_and_are_revoked_within_it,
    configured_operator_tokens_retire_each_other_and_nothing_else,
);

async fn tenants_are_unique_and_tokens_resolve_to_tenant_and_role(backend: Backend) {
    let db = Db::new(backend).await;

    let created = db.create_tenant("acme", at(0)).await.unwrap();
    assert_eq!(created, Tenant { id: acme(), name: "acme".into(), created_at: at(0), retention: None });
    let globex = db.create_tenant("globex", at(1_000)).await.unwrap();

    let duplicate = db.create_tenant("acme", at(2_000)).await;
    assert!(matches!(duplicate, Err(StoreError::Duplicate(_))), "a second `acme` is refused: {duplicate:?}");
    assert_eq!(db.tenant(&acme()).await.unwrap(), Some(created.clone()), "the refused duplicate changed nothing");
    assert_eq!(db.tenant(&TenantId("initech".into())).await.unwrap(), None);
    assert_eq!(db.tenants().await.unwrap(), vec![created, globex.clone()]);

    assert!(
        db.add_token("sha256:tenant-token", Some(&acme()), Role::Tenant, "ci", None, MintedBy::Tenant, at(3_000))
            .await
            .unwrap()
    );
    assert!(
        db.add_token("sha256:operator-token", None, Role::Operator, "ops", None, MintedBy::Tenant, at(3_000))
            .await
            .unwrap()
    );
    let deploy = db.add_token(
        "sha256:globex-token",
        Some(&globex.id),
        Role::Tenant,
        "deploy",
        None,
        MintedBy::Tenant,
        at(3_000),
    );
    assert!(deploy.await.unwrap());

    let now = at(4_000);
    assert_eq!(
        db.token("sha256:tenant-token", now).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(acme()), Role::Tenant))
    );
    assert_eq!(
        db.token("sha256:operator-token", now).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator))
    );
    assert_eq!(
        db.token("sha256:globex-token", now).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(globex.id), Role::Tenant))
    );
    assert_eq!(db.token("sha256:unknown", now).await.unwrap(), None);
}

/// The listing of a token stored with these, never revoked.
fn info(
    hash: &str,
    tenant: Option<TenantId>,
    role: Role,
    name: &str,
    created: i64,
    expires: Option<Timestamp>,
) -> TokenInfo {
    TokenInfo {
        id: token_id(hash),
        tenant,
        role,
        name: name.to_owned(),
        created_at: at(created),
        expires_at: expires,
        revoked_at: None,
        minted_by: MintedBy::Tenant,
    }
}

async fn tokens_expire_list_by_tenant_and_are_revoked_within_it(backend: Backend) {
    let db = Db::new(backend).await;
    db.create_tenant("acme", at(0)).await.unwrap();
    db.create_tenant("globex", at(0)).await.unwrap();
    let (ci, deploy, ops, rival) = (hash("spt_ci"), hash("spt_deploy"), hash("spt_ops"), hash("spt_rival"));
    assert!(db.add_token(&ci, Some(&acme()), Role::Tenant, "ci", None, MintedBy::Tenant, at(1_000)).await.unwrap());
    assert!(
        db.add_token(&deploy, Some(&acme()), Role::Tenant, "deploy", Some(at(61_000)), MintedBy::Tenant, at(2_000))
            .await
            .unwrap()
    );
    assert!(db.add_token(&ops, None, Role::Operator, "ops", None, MintedBy::Tenant, at(3_000)).await.unwrap());
    assert!(
        db.add_token(&rival, Some(&globex()), Role::Tenant, "rival", None, MintedBy::Tenant, at(4_000)).await.unwrap()
    );
    let again =
        db.add_token(&ci, Some(&globex()), Role::Operator, "again", None, MintedBy::Tenant, at(5_000)).await.unwrap();
    assert!(!again, "a hash already stored is not stored again");
    assert_eq!(
        db.token(&ci, at(5_000)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(acme()), Role::Tenant)),
        "and stays as it was"
    );

    // A token works until its expiry, not at it.
    assert_eq!(
        db.token(&deploy, at(60_999)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(acme()), Role::Tenant))
    );
    assert_eq!(db.token(&deploy, at(61_000)).await.unwrap(), None, "expired at its expiry");

    // A tenant's listing holds its own tokens only; the whole listing every token, oldest first.
    let acmes = vec![
        info(&ci, Some(acme()), Role::Tenant, "ci", 1_000, None),
        info(&deploy, Some(acme()), Role::Tenant, "deploy", 2_000, Some(at(61_000))),
    ];
    assert_eq!(db.tokens(Some(&acme())).await.unwrap(), acmes);
    let all = db.tokens(None).await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        [&ci, &deploy, &ops, &rival].map(|h| token_id(h.as_str()))
    );
    assert_eq!(all[2], info(&ops, None, Role::Operator, "ops", 3_000, None), "an operator token has no tenant");
    assert!(db.tokens(Some(&TenantId("initech".into()))).await.unwrap().is_empty());

    // A tenant revokes only its own tenant's tokens: another's, or an operator token, is no
    // token to it.
    assert!(!db.revoke_token(&token_id(&ci), Some(&globex()), at(6_000)).await.unwrap(), "acme's token");
    assert!(!db.revoke_token(&token_id(&ops), Some(&acme()), at(6_000)).await.unwrap(), "an operator token");
    assert_eq!(
        db.token(&ci, at(6_000)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(acme()), Role::Tenant)),
        "still works"
    );
    assert_eq!(
        db.token(&ops, at(6_000)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator)),
        "still works"
    );

    assert!(db.revoke_token(&token_id(&ci), Some(&acme()), at(7_000)).await.unwrap());
    assert_eq!(db.token(&ci, at(7_000)).await.unwrap(), None, "a revoked token works no more, at once");
    assert!(db.revoke_token(&token_id(&ci), None, at(8_000)).await.unwrap(), "revoking it again finds it");
    let revoked = db.token_info(&ci).await.unwrap().expect("still listed");
    assert_eq!(revoked.revoked_at, Some(at(7_000)), "revoked when it was first revoked");
    assert!(!revoked.is_active(at(7_000)));
    assert!(db.revoke_token(&token_id(&rival), None, at(8_000)).await.unwrap(), "no tenant given: any token");
    assert_eq!(db.token(&rival, at(8_000)).await.unwrap(), None);
    assert!(!db.revoke_token("0000000000000000", None, at(8_000)).await.unwrap(), "no such token");
    assert_eq!(db.token_info(&hash("spt_unknown")).await.unwrap(), None);
}

async fn configured_operator_tokens_retire_each_other_and_nothing_else(backend: Backend) {
    let db = Db::new(backend).await;
    db.create_tenant("acme", at(0)).await.unwrap();
    let (old, new, made, tenants) = (hash("spt_old"), hash("spt_new"), hash("spt_made"), hash("spt_tenants"));
    let configured = "configured";
    assert!(db.add_token(&old, None, Role::Operator, configured, None, MintedBy::Tenant, at(1_000)).await.unwrap());
    assert!(
        db.add_token(&made, None, Role::Operator, "made by hand", None, MintedBy::Tenant, at(1_000)).await.unwrap()
    );
    assert!(
        db.add_token(&tenants, Some(&acme()), Role::Tenant, configured, None, MintedBy::Tenant, at(1_000))
            .await
            .unwrap()
    );
    assert!(db.add_token(&new, None, Role::Operator, configured, None, MintedBy::Tenant, at(2_000)).await.unwrap());

    assert_eq!(db.revoke_operator_tokens_named(configured, &new, at(3_000)).await.unwrap(), 1, "the old one");
    assert_eq!(db.token(&old, at(3_000)).await.unwrap(), None);
    assert_eq!(db.token(&new, at(3_000)).await.unwrap().map(|p| (p.tenant, p.role)), Some((None, Role::Operator)));
    assert_eq!(
        db.token(&made, at(3_000)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((None, Role::Operator)),
        "another name"
    );
    assert_eq!(
        db.token(&tenants, at(3_000)).await.unwrap().map(|p| (p.tenant, p.role)),
        Some((Some(acme()), Role::Tenant)),
        "a tenant's"
    );
    assert_eq!(db.revoke_operator_tokens_named(configured, &new, at(4_000)).await.unwrap(), 0, "idempotent");
    assert_eq!(db.token_info(&old).await.unwrap().and_then(|t| t.revoked_at), Some(at(3_000)));
}
