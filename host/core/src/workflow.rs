//! Workflows: a step that parks its job until child jobs settle or a named signal
//! arrives (issue 14), as data the job machine carries.
//!
//! One call still answers one outcome; nothing is replayed. An `await-children` outcome
//! creates the children with the outcome (keyed by parent, slot and index, so no report
//! creates one twice) and parks the job `waiting`; the job is woken — `running` again,
//! dispatched — once the join is met, and the step is called again in the same attempt
//! with the children's results. An `await-signal` outcome parks it until a signal of
//! that name is pending or its timeout passes. The wait stays recorded until a report
//! of the woken step is accepted, so an attempt rescued after the wake is given the
//! same results again instead of fanning out twice.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::JobId;
use crate::job::KindRules;
use crate::policy::priority::Priority;
use crate::time::Timestamp;

/// Deepest a chain of children may nest (a top-level job is depth 0).
pub const MAX_DEPTH: u32 = 8;
/// Most children one `await-children` outcome may create.
pub const MAX_FAN_OUT: usize = 10_000;
/// Longest a signal wait may last.
pub const MAX_SIGNAL_TIMEOUT: Duration = Duration::from_secs(366 * 24 * 3600);
/// Longest signal name, in bytes.
pub const MAX_SIGNAL_NAME: usize = 128;

/// Whether `name` may name a signal: 1 to [`MAX_SIGNAL_NAME`] letters, digits, `-`, `_`,
/// `.` or `:`. One rule for the sender and the waiter, so a job never waits for a name
/// no sender could use.
pub fn is_valid_signal_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SIGNAL_NAME
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// When a step awaiting children is called again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "join", content = "n", rename_all = "snake_case")]
pub enum Join {
    /// Once every child is final.
    All,
    /// Once the first child is final.
    Any,
    /// Once this many children are final.
    Count(u32),
}

impl Join {
    /// How many settled children meet the join among `total`.
    pub fn target(self, total: u32) -> u32 {
        match self {
            Self::All => total,
            Self::Any => total.min(1),
            Self::Count(n) => n.min(total),
        }
    }
}

/// What happens to children still open once the join is met early, or when the parent
/// fails or is cancelled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Leftover {
    /// They are cancelled (the default).
    #[default]
    Cancel,
    /// They run on (abandoned by the parent).
    Keep,
}

/// A child job an `await-children` outcome creates: everything the store needs to
/// write it, resolved by the engine before the outcome is committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildOrder {
    /// Its id.
    pub id: JobId,
    /// Its kind, in the parent's tenant.
    pub kind: String,
    /// The kind version it is pinned to.
    pub kind_version: i64,
    /// The version's rules.
    pub rules: KindRules,
    /// The version's steps: key and weight.
    pub steps: Vec<(String, u32)>,
    /// Its input.
    pub payload: Vec<u8>,
    /// Its idempotency key among the tenant's jobs.
    pub idempotency_key: Option<String>,
    /// Its priority layer.
    pub priority: Priority,
    /// Exclusive lease keys its claims take.
    pub lease_keys: Vec<String>,
}

/// Where a child belongs: its parent, the fan-out that created it and its index there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent job.
    pub job: JobId,
    /// The fan-out: `pass/step/batch` of the parent ([`slot`]).
    pub slot: String,
    /// Its position among that fan-out's children, from 0.
    pub index: u32,
}

/// The name of a fan-out: unique within its parent, the same on every host.
pub fn slot(pass: u32, step: usize, batch: u32) -> String {
    format!("{pass}/{step}/{batch}")
}

/// What a parked step waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "for", rename_all = "snake_case")]
pub enum WaitFor {
    /// Children of one fan-out.
    Children {
        /// The fan-out's slot.
        slot: String,
        /// Children created.
        total: u32,
        /// When to call the step again.
        join: Join,
        /// What to do with the open children once the join is met.
        leftover: Leftover,
        /// Children final so far (as last counted; counts only grow).
        settled: u32,
    },
    /// A named signal.
    Signal {
        /// The signal's name.
        name: String,
        /// When the wait times out.
        deadline: Timestamp,
    },
}

/// Why a parked step is called again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Met {
    /// The join of its children is met.
    Children,
    /// A signal of its name is pending: the oldest is delivered.
    Signal,
    /// The signal's timeout passed first.
    Timeout,
}

impl Met {
    /// Lower-case name, as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Children => "children",
            Self::Signal => "signal",
            Self::Timeout => "timeout",
        }
    }
}

/// A step's wait, kept on the job from the await outcome until a report of the woken
/// step is accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    /// The parked step's index.
    pub step: usize,
    /// What it waits for.
    #[serde(flatten)]
    pub what: WaitFor,
    /// Set when the wait is over: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met: Option<Met>,
}

impl Wait {
    /// The deadline a signal wait times out at (children waits have none).
    pub fn deadline(&self) -> Option<Timestamp> {
        match &self.what {
            WaitFor::Signal { deadline, .. } => Some(*deadline),
            WaitFor::Children { .. } => None,
        }
    }
}

/// Whether `settled` final children meet the join `wait` waits for (a children wait not
/// yet over).
pub fn join_met(wait: &Wait, settled: u32) -> bool {
    match &wait.what {
        WaitFor::Children { total, join, .. } => wait.met.is_none() && settled >= join.target(*total),
        WaitFor::Signal { .. } => false,
    }
}

/// Whether a new count of a fan-out's final children is worth writing to its parent:
/// when it meets the join (the parent wakes), or when it grew by a tenth of the children
/// since the count last written. The relay counts after every batch of settlements;
/// writing each count would rewrite the parent once a pass while its children run, and
/// hold up the pass that follows the last child, which is the one that wakes it.
pub fn count_worth_writing(wait: &WaitFor, settled: u32) -> bool {
    let WaitFor::Children { total, join, settled: counted, .. } = wait else { return false };
    if settled <= *counted {
        return false;
    }
    settled >= join.target(*total) || settled - counted >= (total / 10).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_are_met_by_their_counts_and_never_ask_for_more_than_exist() {
        assert_eq!(Join::All.target(5), 5);
        assert_eq!(Join::Any.target(5), 1);
        assert_eq!(Join::Any.target(0), 0);
        assert_eq!(Join::Count(3).target(5), 3);
        assert_eq!(Join::Count(9).target(5), 5);
    }

    #[test]
    fn a_count_is_written_when_it_wakes_or_moved_a_tenth() {
        let wait = |join, settled| WaitFor::Children {
            slot: slot(1, 0, 1),
            total: 1_000,
            join,
            leftover: Leftover::Cancel,
            settled,
        };
        assert!(count_worth_writing(&wait(Join::All, 0), 1_000), "the join is met");
        assert!(count_worth_writing(&wait(Join::Any, 0), 1), "any: the first wakes");
        assert!(count_worth_writing(&wait(Join::Count(5), 0), 5));
        assert!(!count_worth_writing(&wait(Join::All, 0), 99), "under a tenth, not met");
        assert!(count_worth_writing(&wait(Join::All, 0), 100), "a tenth");
        assert!(!count_worth_writing(&wait(Join::All, 500), 500), "no growth");
        assert!(!count_worth_writing(&wait(Join::All, 500), 400), "counts only grow");
        let few =
            WaitFor::Children { slot: slot(1, 0, 1), total: 3, join: Join::All, leftover: Leftover::Keep, settled: 0 };
        assert!(count_worth_writing(&few, 1), "small fan-outs: every count");
        let signal = WaitFor::Signal { name: "go".into(), deadline: crate::time::Timestamp::EPOCH };
        assert!(!count_worth_writing(&signal, 1));
    }

    #[test]
    fn a_wait_reads_back_as_written() {
        let wait = Wait {
            step: 1,
            what: WaitFor::Children {
                slot: slot(1, 1, 2),
                total: 3,
                join: Join::Count(2),
                leftover: Leftover::Keep,
                settled: 1,
            },
            met: None,
        };
        let json = serde_json::to_string(&wait).expect("writes");
        assert_eq!(serde_json::from_str::<Wait>(&json).expect("reads"), wait);
        assert_eq!(slot(1, 1, 2), "1/1/2");
    }
}
