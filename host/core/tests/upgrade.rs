//! The storage format gate as tables: which hosts may run on which database, when the
//! gate may move, and what a claim writes under each format.

#![allow(clippy::unwrap_used)]

mod common;

use spindle_core::job::JobEvent;
use spindle_core::step::StepState;
use spindle_core::transition;
use spindle_core::upgrade::{
    BEFORE_THE_GATE, ClaimRecord, Formats, GateRefusal, LiveHost, NEWEST, OLDEST, finalize, join, may_contract,
    restores_claimed_step, unrecorded, writes_lean,
};

use common::{TTL, pending, t0};

fn pinned(format: u32) -> Formats {
    Formats::pinned(format).unwrap()
}

fn live(id: &str, formats: Formats) -> LiveHost {
    LiveHost { id: id.into(), formats }
}

#[test]
fn this_build_reads_every_format_and_writes_the_newest() {
    assert_eq!((OLDEST, NEWEST), (1, 3));
    let build = Formats::this_build();
    assert_eq!(build.reads, 1..=3);
    assert_eq!(build.writes, 3);
    assert_eq!(pinned(1), Formats { reads: 1..=1, writes: 1 });
    assert_eq!(pinned(2), Formats { reads: 1..=2, writes: 2 });
    assert_eq!(pinned(3), build);
    assert_eq!(Formats::pinned(0), Err(GateRefusal::UnknownFormat { format: 0 }));
    assert_eq!(Formats::pinned(4), Err(GateRefusal::UnknownFormat { format: 4 }));
    assert!(restores_claimed_step(&build));
    assert!(restores_claimed_step(&pinned(2)));
    assert!(!restores_claimed_step(&pinned(1)), "a format-1 build knew nothing of restoring claims");
}

#[test]
fn a_database_with_jobs_and_no_recorded_format_is_at_the_format_before_the_gate() {
    assert_eq!(unrecorded(false), None, "a fresh database starts at the first host's newest");
    assert_eq!(unrecorded(true), Some(BEFORE_THE_GATE));
    assert_eq!(BEFORE_THE_GATE, 2, "builds from before the gate wrote format 2");
    assert_eq!(join(unrecorded(true), &Formats::this_build()), Ok(2), "this build joins at 2, not 3");
    assert!(join(unrecorded(true), &pinned(1)).is_err(), "a format-1 build cannot read their jobs");
}

#[test]
fn lean_kinds_are_written_lean_only_from_format_3() {
    assert!(!writes_lean(1), "a format-1 build reads no lean job");
    assert!(!writes_lean(2), "a format-2 build would read a lean job as one without steps");
    assert!(writes_lean(3));
}

#[test]
fn a_host_joins_a_database_it_can_read_and_write_and_is_refused_otherwise() {
    struct Row {
        why: &'static str,
        database: Option<u32>,
        host: Formats,
        want: Result<u32, ()>,
    }
    let rows = [
        Row { why: "a fresh database starts at the newest format", database: None, host: pinned(2), want: Ok(2) },
        Row { why: "a pinned host starts a fresh database at its own", database: None, host: pinned(1), want: Ok(1) },
        Row { why: "a new build writes the old format", database: Some(1), host: pinned(2), want: Ok(1) },
        Row { why: "an old build on an old database", database: Some(1), host: pinned(1), want: Ok(1) },
        Row { why: "a new build on a new database", database: Some(2), host: pinned(2), want: Ok(2) },
        Row { why: "an old build meets a newer format", database: Some(2), host: pinned(1), want: Err(()) },
        Row { why: "a format-2 build meets lean jobs", database: Some(3), host: pinned(2), want: Err(()) },
        Row { why: "this build on a format-2 database", database: Some(2), host: pinned(3), want: Ok(2) },
        Row { why: "a format no build knows yet", database: Some(4), host: pinned(3), want: Err(()) },
        Row {
            why: "a build that reads a format but cannot write it",
            database: Some(2),
            host: Formats { reads: 1..=2, writes: 1 },
            want: Err(()),
        },
    ];
    for row in rows {
        let got = join(row.database, &row.host);
        match (row.want, got) {
            (Ok(want), Ok(got)) => assert_eq!(got, want, "{}", row.why),
            (Err(()), Err(GateRefusal::CannotRead { database, build })) => {
                assert_eq!(Some(database), row.database, "{}", row.why);
                assert_eq!(build, row.host, "{}", row.why);
            }
            (want, got) => panic!("{}: wanted {want:?}, got {got:?}", row.why),
        }
    }
}

#[test]
fn the_gate_moves_only_to_a_format_every_live_host_reads_and_writes() {
    struct Row {
        why: &'static str,
        database: u32,
        live: Vec<LiveHost>,
        want: Result<u32, Vec<&'static str>>,
    }
    let rows = [
        Row {
            why: "every host runs the new build",
            database: 1,
            live: vec![live("a", pinned(2)), live("b", pinned(2))],
            want: Ok(2),
        },
        Row {
            why: "an old host is still live",
            database: 1,
            live: vec![live("a", pinned(2)), live("old", pinned(1))],
            want: Err(vec!["old"]),
        },
        Row { why: "already at the newest", database: 3, live: vec![live("a", pinned(3))], want: Err(vec!["a"]) },
        Row {
            why: "a format-2 host holds the gate at 2",
            database: 1,
            live: vec![live("a", pinned(3)), live("b", pinned(2))],
            want: Ok(2),
        },
        Row {
            why: "from 2 to 3 once every host runs this build",
            database: 2,
            live: vec![live("a", pinned(3)), live("b", pinned(3))],
            want: Ok(3),
        },
        Row {
            why: "a host that reads the new format but cannot write it holds the gate",
            database: 1,
            live: vec![live("a", pinned(2)), live("reader", Formats { reads: 1..=2, writes: 1 })],
            want: Err(vec!["reader"]),
        },
    ];
    for row in rows {
        match (row.want, finalize(row.database, &row.live)) {
            (Ok(want), Ok(got)) => assert_eq!(got, want, "{}", row.why),
            (Err(holding), Err(GateRefusal::NothingToFinalize { database, holding: got })) => {
                assert_eq!(database, row.database, "{}", row.why);
                assert_eq!(got.len(), holding.len(), "{}: {got:?}", row.why);
                for (id, said) in holding.iter().zip(&got) {
                    assert!(said.starts_with(id), "{}: {said}", row.why);
                }
            }
            (want, got) => panic!("{}: wanted {want:?}, got {got:?}", row.why),
        }
    }
}

#[test]
fn a_refusal_says_what_the_database_is_at_and_what_the_build_can_do() {
    let refusal = join(Some(2), &pinned(1)).unwrap_err();
    let said = refusal.to_string();
    assert!(said.contains("storage format is 2"), "{said}");
    assert!(said.contains("reads 1–1"), "{said}");
    assert!(said.contains("refuses to claim or write"), "{said}");
}

#[test]
fn a_format_1_claim_writes_the_step_and_a_format_2_claim_the_job_row_alone() {
    for (format, step_written) in [(1, true), (2, false)] {
        let record = ClaimRecord::of(format);
        let claim = JobEvent::Claim { owner: "host-1".into(), ttl: TTL, record };
        let t = transition(&pending(), &claim, t0()).unwrap();
        assert_eq!(t.job.steps[0].state, StepState::Running, "format {format}: the attempt started");
        assert_eq!(t.steps_changed.contains(&0), step_written, "format {format}: the step's row written");
        // Either way, a format-2 reader of the step row as stored reads the attempt.
        let mut read = t.job.clone();
        if !step_written {
            read.steps[0] = pending().steps[0].clone();
        }
        read.restore_claimed_step();
        assert_eq!(read.steps[0].state, StepState::Running, "format {format}: read back");
        assert_eq!(read.steps[0].attempts_made(), 1, "format {format}");
    }
}

#[test]
fn the_contract_steps_wait_for_the_gate() {
    assert_eq!(may_contract(None), Ok(()), "a database no host joined has no older host");
    assert_eq!(may_contract(Some(3)), Ok(()), "the gate moved");
    assert_eq!(may_contract(Some(2)), Err(GateRefusal::NotFinalized { database: 2 }), "format-2 hosts may run");
    assert_eq!(may_contract(Some(1)), Err(GateRefusal::NotFinalized { database: 1 }), "older hosts may run");
    assert!(may_contract(Some(1)).unwrap_err().to_string().contains("spindle upgrade finalize"));
}
