//! Capacity decisions as tables: each row a case of fair tags, the rate limiter, the
//! queue quota or the running limits, with what the core must answer.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use spindle_core::capacity::{
    AdmissionFacts, Holding, LayerClock, MAX_WEIGHT, Quota, Quotas, RunningFacts, SlotShare, TAG_UNIT, Verdict, admit,
    admit_component, fair_tags, gate_claims, gcra, kind_gate, over_share, share, tenant_gate,
};

const SECOND: i64 = 1_000_000;

#[test]
fn fair_tags_follow_the_layer_clock_and_the_tenants_weight() {
    struct Row {
        why: &'static str,
        clock: LayerClock,
        last: Option<i64>,
        weight: u32,
        n: usize,
        want: Vec<i64>,
    }
    let u = TAG_UNIT;
    let rows = [
        Row {
            why: "a first job in an empty layer starts one step after zero",
            clock: LayerClock::default(),
            last: None,
            weight: 1,
            n: 2,
            want: vec![u, 2 * u],
        },
        Row {
            why: "a newcomer starts at the head of what is ready, not behind a backlog",
            clock: LayerClock { head: Some(50 * u), latest: Some(900 * u) },
            last: None,
            weight: 1,
            n: 1,
            want: vec![51 * u],
        },
        Row {
            why: "a tenant with a backlog goes on after its last tag",
            clock: LayerClock { head: Some(50 * u), latest: Some(900 * u) },
            last: Some(300 * u),
            weight: 1,
            n: 1,
            want: vec![301 * u],
        },
        Row {
            why: "a tenant that fell behind the clock catches up to it, no further",
            clock: LayerClock { head: Some(50 * u), latest: None },
            last: Some(10 * u),
            weight: 1,
            n: 1,
            want: vec![51 * u],
        },
        Row {
            why: "with nothing ready, the clock is the latest tag given",
            clock: LayerClock { head: None, latest: Some(7 * u) },
            last: None,
            weight: 1,
            n: 1,
            want: vec![8 * u],
        },
        Row {
            why: "weight 4 advances a quarter step a job",
            clock: LayerClock::default(),
            last: None,
            weight: 4,
            n: 3,
            want: vec![u / 4, u / 2, 3 * u / 4],
        },
        Row {
            why: "a weight past the largest counts as the largest; 0 as 1",
            clock: LayerClock::default(),
            last: None,
            weight: 5_000,
            n: 1,
            want: vec![u / i64::from(MAX_WEIGHT)],
        },
        Row { why: "weight 0 counts as 1", clock: LayerClock::default(), last: None, weight: 0, n: 1, want: vec![u] },
        Row { why: "no jobs, no tags", clock: LayerClock::default(), last: Some(5), weight: 1, n: 0, want: vec![] },
    ];
    for row in rows {
        assert_eq!(fair_tags(row.clock, row.last, row.weight, row.n), row.want, "{}", row.why);
    }
}

#[test]
fn the_rate_limiter_admits_a_burst_then_the_rate() {
    struct Row {
        why: &'static str,
        tat: i64,
        now: i64,
        n: u64,
        rate: u32,
        burst: u32,
        want: Result<i64, Duration>,
    }
    let rows = [
        Row { why: "an idle tenant's first job", tat: 0, now: 0, n: 1, rate: 10, burst: 10, want: Ok(SECOND / 10) },
        Row {
            why: "the tenth of a burst of ten",
            tat: 9 * SECOND / 10,
            now: 0,
            n: 1,
            rate: 10,
            burst: 10,
            want: Ok(SECOND),
        },
        Row {
            why: "the eleventh waits a tenth of a second",
            tat: SECOND,
            now: 0,
            n: 1,
            rate: 10,
            burst: 10,
            want: Err(Duration::from_millis(100)),
        },
        Row {
            why: "an interval later, one more passes",
            tat: SECOND,
            now: SECOND / 10,
            n: 1,
            rate: 10,
            burst: 10,
            want: Ok(SECOND + SECOND / 10),
        },
        Row {
            why: "a long-idle tenant's arrival time starts from now",
            tat: 0,
            now: 100 * SECOND,
            n: 5,
            rate: 10,
            burst: 10,
            want: Ok(100 * SECOND + SECOND / 2),
        },
        Row {
            why: "a batch larger than the burst never passes: it says a burst's worth",
            tat: 0,
            now: 0,
            n: 11,
            rate: 10,
            burst: 10,
            want: Err(Duration::from_secs(1)),
        },
    ];
    for row in rows {
        assert_eq!(gcra(row.tat, row.now, row.n, row.rate, row.burst), row.want, "{}", row.why);
    }
}

#[test]
fn admission_refuses_a_batch_over_a_quota_whole() {
    struct Row {
        why: &'static str,
        quotas: Quotas,
        facts: AdmissionFacts,
        n: u64,
        want: Result<Option<i64>, Quota>,
    }
    let queued = |max| Quotas { max_queued: Some(max), ..Quotas::default() };
    let rated = |rate, burst| Quotas { rate_per_sec: Some(rate), rate_burst: burst, ..Quotas::default() };
    let rows = [
        Row {
            why: "no quotas: admitted, nothing to store",
            quotas: Quotas::default(),
            facts: AdmissionFacts::default(),
            n: 1_000,
            want: Ok(None),
        },
        Row {
            why: "up to the queue quota",
            quotas: queued(10),
            facts: AdmissionFacts { queued: 7, tat: 0 },
            n: 3,
            want: Ok(None),
        },
        Row {
            why: "one past the queue quota",
            quotas: queued(10),
            facts: AdmissionFacts { queued: 7, tat: 0 },
            n: 4,
            want: Err(Quota::MaxQueued),
        },
        Row {
            why: "a rate quota stores the new arrival time",
            quotas: rated(10, None),
            facts: AdmissionFacts::default(),
            n: 2,
            want: Ok(Some(SECOND / 5)),
        },
        Row {
            why: "the burst defaults to a second's worth",
            quotas: rated(10, None),
            facts: AdmissionFacts::default(),
            n: 11,
            want: Err(Quota::Rate),
        },
        Row {
            why: "a larger burst admits a larger batch",
            quotas: rated(10, Some(20)),
            facts: AdmissionFacts::default(),
            n: 11,
            want: Ok(Some(11 * SECOND / 10)),
        },
        Row {
            why: "the queue quota is checked first",
            quotas: Quotas { max_queued: Some(1), rate_per_sec: Some(1), rate_burst: None },
            facts: AdmissionFacts { queued: 1, tat: 50 * SECOND },
            n: 1,
            want: Err(Quota::MaxQueued),
        },
    ];
    for row in rows {
        let got = admit("acme", row.quotas, row.facts, row.n, 0).map_err(|refusal| refusal.quota);
        assert_eq!(got, row.want, "{}", row.why);
    }
    // Deployed bytes: up to the limit, not a byte past it; no limit, anything.
    assert_eq!(admit_component("acme", 90, 10, Some(100)), Ok(()));
    let refusal = admit_component("acme", 90, 11, Some(100)).unwrap_err();
    assert_eq!((refusal.quota, refusal.retry_after), (Quota::MaxDeployedBytes, Duration::ZERO));
    assert_eq!(admit_component("acme", u64::MAX, 1, None), Ok(()));
    let refusal = admit("acme", queued(10), AdmissionFacts { queued: 10, tat: 0 }, 1, 0).unwrap_err();
    assert_eq!(refusal.quota.as_str(), "max-queued");
    assert!(refusal.message.contains("acme") && refusal.message.contains("10"), "{}", refusal.message);
}

#[test]
fn running_limits_admit_candidates_in_order_until_full() {
    let pair = |t: &str, k: &str| (t.to_owned(), k.to_owned());
    let facts = |tenant_limits: &[(&str, i64)], kind_limits: &[(&str, &str, i64)], running: &[(&str, &str, i64)]| {
        RunningFacts {
            tenant_limits: tenant_limits.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect(),
            kind_limits: kind_limits.iter().map(|(t, k, n)| (pair(t, k), *n)).collect(),
            running: running.iter().map(|(t, k, n)| (pair(t, k), *n)).collect(),
            ..RunningFacts::default()
        }
    };
    let claim = |limited| Verdict::Claim { limited };
    struct Row {
        why: &'static str,
        facts: RunningFacts,
        candidates: Vec<(&'static str, &'static str)>,
        want: Vec<Verdict>,
    }
    let rows = [
        Row {
            why: "no limits: every candidate, none counted",
            facts: RunningFacts::default(),
            candidates: vec![("acme", "a"), ("acme", "a")],
            want: vec![claim(false), claim(false)],
        },
        Row {
            why: "a tenant limit of 2 with 1 running admits one more, then the gate",
            facts: facts(&[("acme", 2)], &[], &[("acme", "a", 1)]),
            candidates: vec![("acme", "a"), ("acme", "b"), ("other", "a")],
            want: vec![claim(true), Verdict::Wait(tenant_gate("acme")), claim(false)],
        },
        Row {
            why: "a kind limit holds one kind back and lets the tenant's others run",
            facts: facts(&[], &[("acme", "slow", 1)], &[("acme", "slow", 1)]),
            candidates: vec![("acme", "slow"), ("acme", "fast")],
            want: vec![Verdict::Wait(kind_gate("acme", "slow")), claim(false)],
        },
        Row {
            why: "the tenant's gate is named before the kind's when both are full",
            facts: facts(&[("acme", 1)], &[("acme", "slow", 1)], &[("acme", "slow", 1)]),
            candidates: vec![("acme", "slow")],
            want: vec![Verdict::Wait(tenant_gate("acme"))],
        },
        Row {
            why: "the transaction's earlier claims count against the limit",
            facts: RunningFacts {
                admitted: vec![pair("acme", "a")],
                ..facts(&[("acme", 2)], &[], &[("acme", "a", 1)])
            },
            candidates: vec![("acme", "a")],
            want: vec![Verdict::Wait(tenant_gate("acme"))],
        },
        Row {
            why: "slots the transaction's writes free count as free",
            facts: RunningFacts {
                freeing: [(pair("acme", "a"), 1)].into_iter().collect(),
                ..facts(&[("acme", 1)], &[], &[("acme", "a", 1)])
            },
            candidates: vec![("acme", "a"), ("acme", "a")],
            want: vec![claim(true), Verdict::Wait(tenant_gate("acme"))],
        },
    ];
    for row in rows {
        assert_eq!(gate_claims(&row.candidates, &row.facts), row.want, "{}", row.why);
    }
}

#[test]
fn a_tenant_holding_its_share_of_the_slots_is_passed_over_while_others_share_the_host() {
    struct Row {
        why: &'static str,
        pool: usize,
        holdings: Vec<(&'static str, usize, u32)>,
        want: Vec<&'static str>,
    }
    let rows = [
        Row { why: "an idle host passes over nobody", pool: 192, holdings: vec![], want: vec![] },
        Row {
            why: "a tenant alone may use every slot: under the pool, it is under its share",
            pool: 192,
            holdings: vec![("a", 191, 1)],
            want: vec![],
        },
        Row {
            why: "a tenant alone holding every slot is at its share (reserve slots are not for it)",
            pool: 192,
            holdings: vec![("a", 192, 1)],
            want: vec!["a"],
        },
        Row {
            why: "beside another tenant, equal weights halve the pool",
            pool: 192,
            holdings: vec![("a", 187, 1), ("b", 5, 1)],
            want: vec!["a"],
        },
        Row {
            why: "exactly at its share is passed over; one under is not",
            pool: 192,
            holdings: vec![("a", 96, 1), ("b", 95, 1)],
            want: vec!["a"],
        },
        Row {
            why: "weights divide the pool: 3:1 gives 144 and 48",
            pool: 192,
            holdings: vec![("a", 143, 3), ("b", 48, 1)],
            want: vec!["b"],
        },
        Row {
            why: "a tenant with nothing running takes no part in the division",
            pool: 192,
            holdings: vec![("a", 150, 1), ("b", 0, 1)],
            want: vec![],
        },
        Row {
            why: "three tenants: a third each",
            pool: 192,
            holdings: vec![("a", 64, 1), ("b", 63, 1), ("c", 64, 1)],
            want: vec!["a", "c"],
        },
        Row {
            why: "a share is never below one slot, even for a tiny weight on a small pool",
            pool: 4,
            holdings: vec![("a", 1, 1), ("b", 2, 1000)],
            want: vec!["a"],
        },
    ];
    for row in rows {
        let holdings: Vec<Holding<&str>> =
            row.holdings.iter().map(|&(tenant, running, weight)| Holding { tenant, running, weight }).collect();
        assert_eq!(over_share(row.pool, &holdings), row.want, "{}", row.why);
    }
}

#[test]
fn a_share_is_the_weighted_part_of_the_pool_at_least_one_slot() {
    let rows: [(usize, u32, u64, usize, &str); 6] = [
        (192, 1, 1, 192, "alone: the whole pool"),
        (192, 1, 2, 96, "one of two equal tenants"),
        (192, 3, 4, 144, "three quarters by weight"),
        (192, 1, 1_000, 1, "never below one slot"),
        (192, 5, 1, 192, "a total below the tenant's own weight is its own weight"),
        (0, 1, 1, 1, "a pool of none still lets one run"),
    ];
    for (pool, weight, total, want, why) in rows {
        assert_eq!(share(pool, weight, total), want, "{why}");
    }
    assert_eq!(SlotShare::default_reserve(192), 12);
    assert_eq!(SlotShare::default_reserve(4), 1, "at least one reserve slot");
}
