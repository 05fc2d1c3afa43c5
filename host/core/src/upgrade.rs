//! Hosts of two builds on one database: the storage format gate.
//!
//! Every build says which storage formats it reads and which it can write. The database
//! records the one format all hosts write. A build that introduces a format reads the
//! old one too and keeps writing it while any live host could not read the new one; the
//! gate moves (an operator's `spindle upgrade finalize`) only when every live host reads
//! and writes the new format. A host whose build cannot read the database's format
//! refuses to claim or write rather than misread.
//!
//! The formats so far:
//!
//! | format | what a claim writes |
//! |---|---|
//! | 1 | the job row and the claimed step's row (the attempt's start) |
//! | 2 | the job row alone: the claim records the attempt's start, and a reader restores it on the step (`Job::restore_claimed_step`), one row rewrite fewer per step |
//! | 3 | as 2, and a lean kind's job is one row: its steps ride in its machine column, and it has no step or history rows |
//!
//! A format-1 reader reads a format-2 claim's step as still queued, and a format-2
//! reader reads a lean job as one with no steps: those are the misreads the gate exists
//! to prevent. Below format 3 a lean record is refused at deploy, and a lean kind's jobs
//! would be written full ([`writes_lean`]).
//!
//! Pure, like the machines: the store reads the facts (the recorded format, the live
//! hosts) under its lock, and writes what this module answers.

use std::fmt;
use std::ops::RangeInclusive;

/// A storage format's number.
pub type Format = u32;

/// The newest format this build reads and writes.
pub const NEWEST: Format = 3;

/// The oldest format this build still reads and writes.
pub const OLDEST: Format = 1;

/// What one host's build can do with the storage formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formats {
    /// The formats it reads.
    pub reads: RangeInclusive<Format>,
    /// The newest format it writes (it writes every format it reads up to this one).
    pub writes: Format,
}

impl Formats {
    /// This build's formats.
    pub fn this_build() -> Self {
        Self { reads: OLDEST..=NEWEST, writes: NEWEST }
    }

    /// This build held to `format` and older, as the build that introduced `format`
    /// would be (tests and rehearsals of an upgrade; see `spindle serve --storage-format`).
    pub fn pinned(format: Format) -> Result<Self, GateRefusal> {
        if !(OLDEST..=NEWEST).contains(&format) {
            return Err(GateRefusal::UnknownFormat { format });
        }
        Ok(Self { reads: OLDEST..=format, writes: format })
    }

    /// Whether a host of these formats can run on a database recorded at `format`: it
    /// must read it and be able to write it.
    pub fn runs_on(&self, format: Format) -> bool {
        self.reads.contains(&format) && format <= self.writes
    }
}

impl fmt::Display for Formats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reads {}–{}, writes up to {}", self.reads.start(), self.reads.end(), self.writes)
    }
}

/// Why the gate refused a host or a move.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateRefusal {
    /// The database is at a format this build cannot read or write.
    #[error(
        "the database's storage format is {database}; this build {build}: it refuses to claim or write (run a build that reads format {database})"
    )]
    CannotRead {
        /// The database's format.
        database: Format,
        /// What this build can do.
        build: Formats,
    },
    /// No format above the database's is read and written by every live host.
    #[error("the gate stays at format {database}: no newer format is read and written by every live host (held by {})", .holding.join(", "))]
    NothingToFinalize {
        /// The database's format.
        database: Format,
        /// Live hosts that cannot read or write a newer one.
        holding: Vec<String>,
    },
    /// The gate has not reached this build's newest format: hosts of an older build
    /// may still run, and the contract steps would break them.
    #[error(
        "the storage format gate is at {database}, not {NEWEST}: finalize the upgrade first (spindle upgrade finalize), once every host runs this build"
    )]
    NotFinalized {
        /// The database's format.
        database: Format,
    },
    /// A format no build knows.
    #[error("there is no storage format {format} (known: {OLDEST}–{NEWEST})")]
    UnknownFormat {
        /// The format asked for.
        format: Format,
    },
}

/// The format builds from before the gate wrote (they never announce themselves, and
/// record no format).
pub const BEFORE_THE_GATE: Format = 2;

/// The format a database that records none stands at: a fresh one (no job yet) at none,
/// so that it starts at the newest format of the first host to join; one that builds
/// from before the gate wrote jobs to at theirs ([`BEFORE_THE_GATE`]), which such a host
/// may still be running on: starting it at a newer format would let this build write
/// what they misread.
pub fn unrecorded(has_jobs: bool) -> Option<Format> {
    has_jobs.then_some(BEFORE_THE_GATE)
}

/// What a host that announces itself is told: the format to write, or why it may not
/// run. `database` is the recorded format (or [`unrecorded`]'s answer), `None` on a
/// fresh database no host has joined yet, which then starts at the newest format the
/// joining host writes.
pub fn join(database: Option<Format>, host: &Formats) -> Result<Format, GateRefusal> {
    let Some(format) = database else { return Ok(host.writes) };
    if host.runs_on(format) {
        Ok(format)
    } else {
        Err(GateRefusal::CannotRead { database: format, build: host.clone() })
    }
}

/// A live host as the gate sees it: its name and its build's formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveHost {
    /// Its id.
    pub id: String,
    /// Its build's formats.
    pub formats: Formats,
}

/// The format the gate moves to when an operator finalizes: the newest format every
/// live host reads and writes, if it is above the database's. `live` always includes
/// the host asking.
pub fn finalize(database: Format, live: &[LiveHost]) -> Result<Format, GateRefusal> {
    let newest = live.iter().map(|h| (*h.formats.reads.end()).min(h.formats.writes)).min().unwrap_or(database);
    if newest > database {
        return Ok(newest);
    }
    let holding = live
        .iter()
        .filter(|h| (*h.formats.reads.end()).min(h.formats.writes) <= database)
        .map(|h| format!("{} ({})", h.id, h.formats))
        .collect();
    Err(GateRefusal::NothingToFinalize { database, holding })
}

/// Whether the schema's contract steps (drops, swaps) may run on a database whose gate
/// is at `database` (`None`: no host joined yet): only once the gate reached the newest
/// format this build writes, when no host of an older build may still be running.
pub fn may_contract(database: Option<Format>) -> Result<(), GateRefusal> {
    match database {
        Some(format) if format < NEWEST => Err(GateRefusal::NotFinalized { database: format }),
        _ => Ok(()),
    }
}

/// What a claim writes under `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimRecord {
    /// The job row and the claimed step's row (format 1).
    JobAndStep,
    /// The job row alone (format 2 and later).
    JobAlone,
}

impl ClaimRecord {
    /// The claim record of `format`.
    pub fn of(format: Format) -> Self {
        if format >= 2 { Self::JobAlone } else { Self::JobAndStep }
    }
}

/// Whether jobs of a lean kind are written lean under `format` (3 and later); below it
/// they are written full, which every build reads.
pub fn writes_lean(format: Format) -> bool {
    format >= 3
}

/// Whether a reader of `formats` restores a claim's attempt on its step (a format-2
/// reader does; a format-1 build knew nothing of it).
pub fn restores_claimed_step(formats: &Formats) -> bool {
    *formats.reads.end() >= 2
}
