//! Priority layers and the deterministic order of dispatch candidates (seed 000).
//!
//! Priority is an explicit layer, never an accident of callback order. Among candidates
//! the order is total: layer, then submission sequence, then id, so two dispatchers
//! looking at the same rows pick the same next job.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use crate::ids::JobId;

/// A priority layer. Earlier layers are always dispatched before later ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// An operator forced it to the front.
    Forced,
    /// Urgent work.
    Critical,
    /// Work due at a scheduled time.
    Scheduled,
    /// The default.
    #[default]
    Normal,
    /// Work that may wait for everything else.
    Background,
}

impl Priority {
    /// Every layer, most urgent first.
    pub const ALL: [Self; 5] = [Self::Forced, Self::Critical, Self::Scheduled, Self::Normal, Self::Background];

    /// The layer's rank: 0 is the most urgent. Stored as an integer so an index orders it.
    pub fn rank(self) -> i16 {
        match self {
            Self::Forced => 0,
            Self::Critical => 1,
            Self::Scheduled => 2,
            Self::Normal => 3,
            Self::Background => 4,
        }
    }

    /// The layer of a stored rank.
    pub fn from_rank(rank: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.rank() == rank)
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forced => "forced",
            Self::Critical => "critical",
            Self::Scheduled => "scheduled",
            Self::Normal => "normal",
            Self::Background => "background",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s output.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// A job that could be dispatched, with what orders it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// Its layer.
    pub priority: Priority,
    /// Its submission sequence number (or run-at for delayed work): earlier first.
    pub sequence: i64,
    /// Its id, the final tie-break.
    pub id: JobId,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.priority, self.sequence, self.id).cmp(&(other.priority, other.sequence, other.id))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The `n` best candidates, best first: the small finalist set that the exact check
/// and the lease acquisition then work through. O(len · log n).
pub fn finalists(candidates: impl IntoIterator<Item = Candidate>, n: usize) -> Vec<Candidate> {
    if n == 0 {
        return Vec::new();
    }
    let mut heap = BinaryHeap::with_capacity(n + 1);
    for c in candidates {
        heap.push(c);
        if heap.len() > n {
            heap.pop();
        }
    }
    heap.into_sorted_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn c(priority: Priority, sequence: i64, id: u128) -> Candidate {
        Candidate { priority, sequence, id: JobId(Uuid::from_u128(id)) }
    }

    #[test]
    fn layers_dominate_then_sequence_then_id() {
        let picked = finalists(
            [
                c(Priority::Background, 1, 1),
                c(Priority::Normal, 9, 2),
                c(Priority::Normal, 3, 9),
                c(Priority::Normal, 3, 4),
                c(Priority::Forced, 100, 7),
                c(Priority::Critical, 50, 8),
            ],
            4,
        );
        let ids: Vec<u128> = picked.iter().map(|c| c.id.0.as_u128()).collect();
        assert_eq!(ids, vec![7, 8, 4, 9]);
    }

    #[test]
    fn order_is_the_same_whatever_the_input_order() {
        let mut all: Vec<Candidate> =
            (0..50).map(|i| c(Priority::ALL[(i * 7 % 5) as usize], i64::from(i % 6), u128::from(i as u32))).collect();
        let a = finalists(all.clone(), 10);
        all.reverse();
        let b = finalists(all, 10);
        assert_eq!(a, b);
    }

    #[test]
    fn ranks_round_trip() {
        for p in Priority::ALL {
            assert_eq!(Priority::from_rank(p.rank()), Some(p));
            assert_eq!(Priority::parse(p.as_str()), Some(p));
        }
    }
}
