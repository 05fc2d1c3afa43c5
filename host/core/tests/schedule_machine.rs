//! The schedule machine: every row of its table reached by an event, the forbidden ones
//! refused, every catch-up and overlap rule walked, and its times checked on a simulated
//! clock: exact cron times, whole seconds, none lost or doubled however the passes fall,
//! and daylight saving as `calendar.rs` documents it (Europe/Paris).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use spindle_core::schedule::{
    CATCH_UP_RULES, CatchUp, CronPlan, Fires, MAX_CATCH_UP, ON_TIME, OVERLAP_RULES, Overlap, SCHEDULE_FORBIDDEN,
    SCHEDULE_TRANSITIONS, Schedule, ScheduleEvent, ScheduleRefusal, ScheduleState, firing_key, transition,
};
use spindle_core::table::is_allowed;
use spindle_core::{JobId, Timestamp};
use uuid::Uuid;

const SECOND: i64 = 1_000_000;

fn secs(s: i64) -> Timestamp {
    Timestamp::from_micros(s * SECOND)
}

/// 2026-12-06T00:00:00Z.
const DAY: i64 = 1_796_515_200;
/// Europe/Paris springs forward at 2026-03-29T01:00:00Z (02:00 CET → 03:00 CEST).
const SPRING: i64 = 1_774_746_000;
/// Europe/Paris falls back at 2026-10-25T01:00:00Z (03:00 CEST → 02:00 CET).
const FALL: i64 = 1_792_890_000;

fn plan(cron: &str, zone: &str) -> CronPlan {
    CronPlan::parse(cron, zone).unwrap()
}

fn schedule(plan: &CronPlan, catch_up: CatchUp, overlap: Overlap, now: Timestamp) -> Schedule {
    Schedule::create(plan, catch_up, overlap, now).unwrap()
}

/// A pass at `now`, recording each firing as its engine would.
fn pass(s: &Schedule, plan: &CronPlan, last_open: bool, now: Timestamp) -> (Schedule, Vec<Timestamp>) {
    let t = transition(s, plan, ScheduleEvent::Pass { last_open }, now).unwrap();
    let mut next = t.schedule;
    for (i, at) in t.fire.iter().enumerate() {
        next.record_firing(*at, JobId(Uuid::from_u128(i as u128 + 1)));
    }
    (next, t.fire)
}

/// Every firing of `cron` in `zone` from `from` (exclusive) until `until`, by
/// `next_after` alone.
fn times(cron: &str, zone: &str, from: i64, until: i64) -> Vec<Timestamp> {
    let plan = plan(cron, zone);
    let mut out = Vec::new();
    let mut at = plan.next_after(secs(from));
    while let Some(t) = at.filter(|t| *t < secs(until)) {
        out.push(t);
        at = plan.next_after(t);
    }
    out
}

#[test]
fn every_row_of_the_table_is_reached_by_an_event() {
    let p = plan("0 * * * *", "UTC");
    let now = secs(DAY).plus(Duration::from_millis(1_234));
    // None → active.
    let active = schedule(&p, CatchUp::None, Overlap::Allow, now);
    assert_eq!(active.state, ScheduleState::Active);
    // Active → active: a pass fires.
    let (fired, times) = pass(&active, &p, false, secs(DAY + 3600));
    assert_eq!((fired.state, times), (ScheduleState::Active, vec![secs(DAY + 3600)]));
    // Active → paused, paused → active, active/paused → deleted.
    let paused = transition(&active, &p, ScheduleEvent::Pause, now).unwrap().schedule;
    assert_eq!(paused.state, ScheduleState::Paused);
    let resumed = transition(&paused, &p, ScheduleEvent::Resume, secs(DAY + 5 * 3600 + 1)).unwrap().schedule;
    assert_eq!((resumed.state, resumed.next_fire_at), (ScheduleState::Active, secs(DAY + 6 * 3600)));
    for from in [&active, &paused] {
        let deleted = transition(from, &p, ScheduleEvent::Delete, now).unwrap().schedule;
        assert_eq!(deleted.state, ScheduleState::Deleted);
    }
    let reached: BTreeSet<_> = [
        (None, ScheduleState::Active),
        (Some(ScheduleState::Active), ScheduleState::Active),
        (Some(ScheduleState::Active), ScheduleState::Paused),
        (Some(ScheduleState::Paused), ScheduleState::Active),
        (Some(ScheduleState::Active), ScheduleState::Deleted),
        (Some(ScheduleState::Paused), ScheduleState::Deleted),
    ]
    .into_iter()
    .map(|(f, t)| format!("{f:?}->{t:?}"))
    .collect();
    let rows: BTreeSet<_> = SCHEDULE_TRANSITIONS.iter().map(|r| format!("{:?}->{:?}", r.from, r.to)).collect();
    assert_eq!(reached, rows, "each row reached above, and no other");
}

#[test]
fn a_deleted_or_paused_schedule_refuses_what_it_cannot_do() {
    let p = plan("* * * * * *", "UTC");
    let active = schedule(&p, CatchUp::None, Overlap::Allow, secs(DAY));
    let deleted = transition(&active, &p, ScheduleEvent::Delete, secs(DAY)).unwrap().schedule;
    for f in SCHEDULE_FORBIDDEN {
        assert!(!is_allowed(SCHEDULE_TRANSITIONS, f.from, f.to), "{:?} → {:?} is both", f.from, f.to);
    }
    for event in
        [ScheduleEvent::Resume, ScheduleEvent::Pause, ScheduleEvent::Pass { last_open: false }, ScheduleEvent::Trigger]
    {
        assert_eq!(transition(&deleted, &p, event, secs(DAY + 10)), Err(ScheduleRefusal::Deleted), "{event:?}");
    }
    let paused = transition(&active, &p, ScheduleEvent::Pause, secs(DAY)).unwrap().schedule;
    let refused = transition(&paused, &p, ScheduleEvent::Pass { last_open: false }, secs(DAY + 10));
    assert_eq!(refused, Err(ScheduleRefusal::Paused), "a paused schedule never fires");
    // Nothing due yet: a pass refuses, naming the next time.
    let early = transition(&active, &p, ScheduleEvent::Pass { last_open: false }, secs(DAY));
    assert_eq!(early, Err(ScheduleRefusal::NotDue { next_fire_at: secs(DAY + 1) }));
    // Pausing a paused schedule, resuming an active one: nothing changes.
    assert_eq!(transition(&paused, &p, ScheduleEvent::Pause, secs(DAY + 9)).unwrap().schedule, paused);
    assert_eq!(transition(&active, &p, ScheduleEvent::Resume, secs(DAY + 9)).unwrap().schedule, active);
}

/// Each catch-up row and each overlap row, on an hourly schedule whose host was down
/// for three hours and comes back 10 s after a time: three missed times, one on time.
#[test]
fn every_catch_up_and_overlap_rule_selects_what_its_row_says() {
    let p = plan("0 * * * *", "UTC");
    let missed = [secs(DAY + 3600), secs(DAY + 2 * 3600), secs(DAY + 3 * 3600)];
    let on_time = secs(DAY + 4 * 3600);
    let now = on_time.plus(Duration::from_secs(10));
    for catch_up_rule in CATCH_UP_RULES {
        for overlap_rule in OVERLAP_RULES {
            let mut s = schedule(&p, catch_up_rule.catch_up, overlap_rule.overlap, secs(DAY + 1));
            assert_eq!(s.next_fire_at, missed[0]);
            s.last_job = Some(JobId(Uuid::from_u128(9)));
            let t = transition(&s, &p, ScheduleEvent::Pass { last_open: overlap_rule.last_open }, now).unwrap();
            let mut eligible = catch_up_rule.missed.select(&missed);
            eligible.push(on_time);
            let want = overlap_rule.fires.select(&eligible);
            assert_eq!(t.fire, want, "{catch_up_rule:?} {overlap_rule:?}");
            assert_eq!(t.skipped, 4 - want.len() as u64, "{catch_up_rule:?} {overlap_rule:?}");
            assert_eq!(t.schedule.next_fire_at, secs(DAY + 5 * 3600), "next follows the last due time");
        }
    }
    // The rows themselves say what the docs say.
    let row = |c| CATCH_UP_RULES.iter().find(|r| r.catch_up == c).unwrap().missed;
    assert_eq!(
        (row(CatchUp::None), row(CatchUp::One), row(CatchUp::All)),
        (Fires::Nothing, Fires::Latest, Fires::Every)
    );
}

/// An every-second schedule over 10,000 simulated seconds, its passes at random moments
/// (0.2 to 2.9 s apart, with microsecond fractions): it fires exactly 10,000 times, once
/// for each whole second, and its keys are those seconds.
#[test]
fn an_every_second_schedule_fires_each_of_ten_thousand_seconds_exactly_once() {
    let seed: u64 = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("SPINDLE_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let p = plan("* * * * * *", "UTC");
    let start = secs(DAY).plus(Duration::from_micros(117_389));
    let mut s = schedule(&p, CatchUp::None, Overlap::Allow, start);
    let end = secs(DAY + 10_000);
    let mut now = start;
    let mut fired = Vec::new();
    while now < end {
        now = now.plus(Duration::from_micros(rng.random_range(200_000..2_900_000))).min(end);
        match transition(&s, &p, ScheduleEvent::Pass { last_open: false }, now) {
            Ok(t) => {
                assert!(t.schedule.next_fire_at > now, "seed {seed}: next {} not after {now}", t.schedule.next_fire_at);
                assert_eq!(t.skipped, 0, "seed {seed}");
                fired.extend(t.fire);
                s = t.schedule;
            }
            Err(ScheduleRefusal::NotDue { .. }) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    let want: Vec<Timestamp> = (1..=10_000).map(|i| secs(DAY + i)).collect();
    assert_eq!(fired.len(), 10_000, "seed {seed}");
    assert_eq!(fired, want, "seed {seed}: each whole second once, in order");
    assert_eq!(firing_key("tick", fired[0]), format!("schedule:tick:{}", (DAY + 1) * SECOND));
}

#[test]
fn a_five_field_schedule_fires_on_whole_minutes_from_any_reading() {
    let p = plan("* * * * *", "UTC");
    let s = schedule(&p, CatchUp::None, Overlap::Allow, secs(DAY + 42 * 60 - 1).plus(Duration::from_micros(117_389)));
    assert_eq!(s.next_fire_at, secs(DAY + 42 * 60), "next_fire_at is a whole minute");
    let late = s.next_fire_at.plus(Duration::from_micros(1_883_001));
    let (s, fired) = pass(&s, &p, false, late);
    assert_eq!(fired, vec![secs(DAY + 42 * 60)]);
    assert_eq!(s.next_fire_at, secs(DAY + 43 * 60));
    assert_eq!(s.next_fire_at.as_micros() % (60 * SECOND), 0);
    // A time stored with a fraction by an older build stands for its whole second.
    let legacy = Schedule { next_fire_at: secs(DAY + 44 * 60).plus(Duration::from_micros(117_389)), ..s };
    let t = transition(&legacy, &p, ScheduleEvent::Pass { last_open: false }, secs(DAY + 44 * 60 + 2)).unwrap();
    assert_eq!((t.fire, t.schedule.next_fire_at), (vec![secs(DAY + 44 * 60)], secs(DAY + 45 * 60)));
}

#[test]
fn a_year_of_missed_seconds_is_jumped_over_not_walked() {
    let p = plan("* * * * * *", "UTC");
    let year = 365 * 24 * 3600;
    for (catch_up, want_missed) in [(CatchUp::None, 0), (CatchUp::One, 1)] {
        let s = schedule(&p, catch_up, Overlap::Allow, secs(DAY - year));
        let now = secs(DAY).plus(Duration::from_millis(500));
        let t = transition(&s, &p, ScheduleEvent::Pass { last_open: false }, now).unwrap();
        // At most a minute late at DAY + 0.5 s: DAY - 59 onwards.
        let on_time: Vec<_> = (DAY - 59..=DAY).map(secs).collect();
        let (missed, fired_on_time) = t.fire.split_at(want_missed);
        assert_eq!(fired_on_time, on_time.as_slice(), "{catch_up}: the last minute fires");
        if want_missed == 1 {
            assert_eq!(missed, &[secs(DAY - 60)], "`one` fires the latest missed second");
        }
        assert_eq!(t.schedule.next_fire_at, secs(DAY + 1));
        assert!(t.skipped >= MAX_CATCH_UP as u64);
    }
    // `all` fires the oldest 1,000 and leaves the rest for the next passes.
    let s = schedule(&p, CatchUp::All, Overlap::Allow, secs(DAY - year));
    let t = transition(&s, &p, ScheduleEvent::Pass { last_open: false }, secs(DAY)).unwrap();
    assert_eq!(t.fire.len(), MAX_CATCH_UP);
    assert_eq!((t.fire[0], t.schedule.next_fire_at), (secs(DAY - year + 1), secs(DAY - year + 1 + 1_000)));
    assert!(ON_TIME < Duration::from_secs(MAX_CATCH_UP as u64), "on-time times always fit in one pass");
}

/// Paris springs forward: a fixed-time 02:30 fires at the first instant after the gap
/// (03:00 CEST); an interval schedule has no firing in the gap.
#[test]
fn paris_spring_forward_follows_the_documented_rule() {
    let fixed = times("30 2 * * *", "Europe/Paris", SPRING - 86_400, SPRING + 86_400);
    // 02:30 CET (01:30Z) the day before, 03:00 CEST (01:00Z) on the day, 02:30 CEST
    // (00:30Z) the day after.
    assert_eq!(fixed, vec![secs(SPRING - 86_400 + 1800), secs(SPRING), secs(SPRING + 86_400 - 1800)]);
    let interval = times("*/30 * * * *", "Europe/Paris", SPRING - 3600, SPRING + 3600);
    // 01:30 CET (00:30Z), then 03:00 CEST (01:00Z), 03:30 CEST (01:30Z).
    assert_eq!(interval, vec![secs(SPRING - 1800), secs(SPRING), secs(SPRING + 1800)]);
}

/// Paris falls back: a fixed-time 02:30 fires once, at its first occurrence; an
/// interval schedule fires in both occurrences of the repeated hour.
#[test]
fn paris_fall_back_follows_the_documented_rule() {
    let fixed = times("30 2 * * *", "Europe/Paris", FALL - 86_400, FALL + 2 * 86_400);
    // On the day once, at 02:30 CEST (00:30Z); the day after at 02:30 CET (01:30Z).
    assert_eq!(fixed, vec![secs(FALL - 1800), secs(FALL + 86_400 + 1800)]);
    let interval = times("*/30 * * * *", "Europe/Paris", FALL - 3 * 1800, FALL + 3 * 1800);
    // 02:00, 02:30 CEST (00:00Z, 00:30Z), 02:00, 02:30 CET (01:00Z, 01:30Z), 03:00 CET.
    let want: Vec<Timestamp> = (-2..=2).map(|i| secs(FALL + i * 1800)).collect();
    assert_eq!(interval, want);
}

/// An every-second schedule fires at every real second across both of Paris's changes:
/// none in the gap's readings, every one of the repeated hour's, none twice.
#[test]
fn an_every_second_schedule_fires_every_real_second_across_daylight_saving() {
    for change in [SPRING, FALL] {
        let fired = times("* * * * * *", "Europe/Paris", change - 2 * 3600, change + 2 * 3600);
        let want: Vec<Timestamp> = (change - 2 * 3600 + 1..change + 2 * 3600).map(secs).collect();
        assert_eq!(fired, want, "around {change}");
    }
}

#[test]
fn bad_expressions_and_zones_are_refused_by_name() {
    assert!(CronPlan::parse("61 * * * *", "UTC").is_err());
    assert!(CronPlan::parse("* * * * *", "Mars/Olympus").unwrap_err().to_string().contains("Mars/Olympus"));
    assert!(CronPlan::parse("0 0 30 2 *", "UTC").is_err(), "30 February never comes");
    let paris = plan("0 9 * * *", "Europe/Paris");
    assert!(paris.is_fixed_time());
    assert!(!plan("0 9,17 * * *", "UTC").is_fixed_time());
    // 2026-12-06 09:00 in Paris (UTC+1) is 08:00Z.
    assert_eq!(paris.next_after(secs(DAY)), Some(secs(DAY + 8 * 3600)));
}

/// Fired by hand: once, at the whole second of now, active or paused, whatever the
/// overlap rule says of an open job; the cron's next time and the state stay.
#[test]
fn a_trigger_fires_now_once_and_moves_nothing_else() {
    let p = plan("0 0 1 1 *", "UTC");
    let now = secs(DAY).plus(Duration::from_millis(1_234));
    let active = schedule(&p, CatchUp::None, Overlap::Skip, secs(DAY));
    let fired = transition(&active, &p, ScheduleEvent::Trigger, now).unwrap();
    assert_eq!(fired.fire, vec![secs(DAY + 1)], "its whole second");
    assert_eq!((fired.schedule.clone(), fired.skipped), (active.clone(), 0), "nothing else moves");
    let paused = transition(&active, &p, ScheduleEvent::Pause, now).unwrap().schedule;
    let by_hand = transition(&paused, &p, ScheduleEvent::Trigger, now).unwrap();
    assert_eq!(
        (by_hand.schedule.state, by_hand.fire.len()),
        (ScheduleState::Paused, 1),
        "paused, it fires and stays paused"
    );
    // Its key is the time's, as a pass's: a trigger in the second a pass fires makes one job.
    assert_eq!(firing_key("nightly", fired.fire[0]), firing_key("nightly", secs(DAY + 1)));
}
