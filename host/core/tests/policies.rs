//! Policies: capped, jittered, reproducible backoff; hysteresis that does not flap.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use spindle_core::Timestamp;
use spindle_core::policy::backoff::Backoff;
use spindle_core::policy::hysteresis::Hysteresis;

fn seed() -> u64 {
    let seed = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("SPINDLE_TEST_SEED={seed}");
    seed
}

#[test]
fn backoff_is_capped_jittered_within_bounds_and_reproducible() {
    let policy = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(10) };
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut distinct = std::collections::HashSet::new();
    for attempt in 1..=40 {
        let ceiling = policy.ceiling(attempt);
        assert!(ceiling <= policy.max, "ceiling above the cap at attempt {attempt}");
        let expected_uncapped = Duration::from_millis(100).saturating_mul(1u32 << (attempt - 1).min(20));
        assert_eq!(ceiling, expected_uncapped.min(policy.max));
        for _ in 0..50 {
            let d = policy.delay(attempt, &mut rng);
            assert!(d >= ceiling / 2 && d <= ceiling, "delay {d:?} outside [{:?}, {ceiling:?}]", ceiling / 2);
            distinct.insert(d);
        }
    }
    assert!(distinct.len() > 100, "jitter produced too few distinct delays");
    let draw = |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        (1..=10).map(|a| policy.delay(a, &mut rng)).collect::<Vec<_>>()
    };
    assert_eq!(draw(seed), draw(seed), "same seed, same delays");
}

/// seed 000: "feed a signal oscillating around the threshold and assert the state
/// changes at most once per cooldown."
#[test]
fn hysteresis_does_not_flap() {
    let cooldown = Duration::from_secs(30);
    let mut switch = Hysteresis::new(0.8, 0.5, cooldown);
    let start = Timestamp::from_millis(0);
    let mut changes = Vec::new();
    // A signal oscillating hard around both thresholds every 100 ms for ten minutes.
    for tick in 0..6_000u64 {
        let now = start.plus(Duration::from_millis(tick * 100));
        let signal = if tick % 2 == 0 { 0.95 } else { 0.2 };
        if switch.observe(signal, now).is_some() {
            changes.push(now);
        }
    }
    assert!(!changes.is_empty(), "the switch never engaged");
    for pair in changes.windows(2) {
        assert!(pair[1].since(pair[0]) >= cooldown, "changed twice within the cooldown");
    }
    assert!(changes.len() <= 600 / 30 + 1);

    // Hovering just around the engage threshold without reaching the release one: one change.
    let mut switch = Hysteresis::new(0.8, 0.5, cooldown);
    let mut flips = 0;
    for tick in 0..6_000u64 {
        let signal = if tick % 2 == 0 { 0.81 } else { 0.79 };
        if switch.observe(signal, start.plus(Duration::from_millis(tick * 100))).is_some() {
            flips += 1;
        }
    }
    assert_eq!(flips, 1);
}
