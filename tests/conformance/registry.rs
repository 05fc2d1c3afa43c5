//! Registry rows: component bytes by digest, kind versions per tenant.

use spindle::store::{Backend, KindEntry, StoreError, TenantId};

use crate::fixture::{Db, acme, at, globex};

on_both_backends!(components_are_stored_once_by_digest, kind_versions_number_per_tenant_and_roll_back_and_forward);

async fn components_are_stored_once_by_digest(backend: Backend) {
    let db = Db::new(backend).await;
    // Every byte value, so that neither backend mangles binary data.
    let bytes: Vec<u8> = (0..=255u8).chain([0, 0, 255]).collect();

    db.put_component("sha256:aaaa", &bytes, None, at(0)).await.unwrap();
    db.put_component("sha256:aaaa", &bytes, Some(7), at(1_000)).await.expect("storing the same digest again is fine");
    db.put_component("sha256:bbbb", b"\0asm", None, at(2_000)).await.unwrap();

    assert_eq!(db.component("sha256:aaaa").await.unwrap(), Some(bytes));
    assert_eq!(db.component("sha256:bbbb").await.unwrap(), Some(b"\0asm".to_vec()));
    assert_eq!(db.component("sha256:cccc").await.unwrap(), None);
}

async fn kind_versions_number_per_tenant_and_roll_back_and_forward(backend: Backend) {
    let db = Db::new(backend).await;
    let spec = |n: u32| format!("{{\"steps\":{n}}}");

    for (n, ms) in [(1, 0), (2, 1_000), (3, 2_000)] {
        let v = db.add_kind_version(&acme(), "resize", &format!("sha256:{n}"), &spec(n), "{}", at(ms)).await.unwrap();
        assert_eq!((v.tenant.clone(), v.kind.as_str(), v.version), (acme(), "resize", i64::from(n)));
        assert_eq!(
            (v.digest.as_str(), v.spec.as_str(), v.created_at),
            (format!("sha256:{n}").as_str(), spec(n).as_str(), at(ms))
        );
        assert_eq!(db.current_kind(&acme(), "resize").await.unwrap(), Some(v), "a new version becomes current");
    }

    // The same kind name under another tenant, and another kind of the same tenant, count on their own.
    let theirs = db.add_kind_version(&globex(), "resize", "sha256:g1", &spec(9), "{}", at(3_000)).await.unwrap();
    assert_eq!(theirs.version, 1);
    let other = db.add_kind_version(&acme(), "email", "sha256:e1", &spec(1), "{}", at(3_500)).await.unwrap();
    assert_eq!(other.version, 1);
    assert_eq!(db.current_kind(&acme(), "resize").await.unwrap().unwrap().version, 3);
    assert_eq!(db.current_kind(&globex(), "resize").await.unwrap().unwrap().digest, "sha256:g1");
    assert_eq!(db.current_kind(&globex(), "email").await.unwrap(), None);

    // Roll back to 1, forward to 3.
    db.set_current_version(&acme(), "resize", 1, at(4_000)).await.unwrap();
    assert_eq!(db.current_kind(&acme(), "resize").await.unwrap().unwrap().digest, "sha256:1");
    let resize = |current: i64, latest: i64, updated_ms: i64| KindEntry {
        kind: "resize".into(),
        current_version: current,
        latest_version: latest,
        updated_at: at(updated_ms),
    };
    let email = KindEntry { kind: "email".into(), current_version: 1, latest_version: 1, updated_at: at(3_500) };
    assert_eq!(db.kinds(&acme()).await.unwrap(), vec![email.clone(), resize(1, 3, 4_000)]);
    db.set_current_version(&acme(), "resize", 3, at(5_000)).await.unwrap();
    assert_eq!(db.current_kind(&acme(), "resize").await.unwrap().unwrap().version, 3);

    // An unknown version (or kind) is refused and changes nothing.
    for (kind, version) in [("resize", 4), ("resize", 0), ("missing", 1)] {
        let refused = db.set_current_version(&acme(), kind, version, at(6_000)).await;
        assert!(matches!(refused, Err(StoreError::NotFound(_))), "{kind} v{version}: {refused:?}");
    }
    // globex has no version 2 of `resize`, whatever acme has.
    let refused = db.set_current_version(&globex(), "resize", 2, at(6_000)).await;
    assert!(matches!(refused, Err(StoreError::NotFound(_))), "{refused:?}");
    assert_eq!(db.kinds(&acme()).await.unwrap(), vec![email, resize(3, 3, 5_000)]);
    assert_eq!(db.current_kind(&globex(), "resize").await.unwrap().unwrap().version, 1);

    // After a rollback the next version still counts from the latest.
    db.set_current_version(&acme(), "resize", 2, at(7_000)).await.unwrap();
    let v4 = db.add_kind_version(&acme(), "resize", "sha256:4", &spec(4), "{}", at(8_000)).await.unwrap();
    assert_eq!(v4.version, 4);
    assert_eq!(db.current_kind(&acme(), "resize").await.unwrap(), Some(v4.clone()));

    let versions = db.kind_versions(&acme(), "resize").await.unwrap();
    assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    assert_eq!(
        versions.iter().map(|v| v.digest.as_str()).collect::<Vec<_>>(),
        vec!["sha256:1", "sha256:2", "sha256:3", "sha256:4"]
    );
    assert_eq!(versions[3], v4);
    assert_eq!(db.kind_version(&acme(), "resize", 2).await.unwrap(), Some(versions[1].clone()));
    assert_eq!(db.kind_version(&acme(), "resize", 5).await.unwrap(), None);
    assert_eq!(db.kind_versions(&globex(), "resize").await.unwrap(), vec![theirs]);
    assert_eq!(db.kind_versions(&globex(), "email").await.unwrap(), vec![]);
    assert_eq!(db.kinds(&TenantId("initech".into())).await.unwrap(), vec![]);
}
