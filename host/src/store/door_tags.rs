//! Telling the door's own notifications from anyone's. Any role that can connect may
//! `NOTIFY spindle_submissions`; `spindle.submit` (migration 0020) tags each of its
//! notifications `<submission id>.<micros>.<tag>`, the tag being SHA-256 of the door's
//! key (`spindle.door_key`, which only Spindle's role reads) and the rest. A host wakes
//! for a notification only if its tag is right, it is not older than a window behind
//! the newest one seen, and its submission has not woken this host before, so a forged
//! notification costs a hash and a replayed one a lookup, never an admission pass.
//!
//! The window is measured against the door's own clock (the newest tag's time), not
//! the host's: clock skew between host and database cannot shut the door.

use std::collections::{HashSet, VecDeque};

use sha2::{Digest, Sha256};

/// How far behind the newest tagged notification one may be and still wake a host.
const WINDOW_MICROS: i64 = 60_000_000;

/// Submissions remembered at most (a replay of one forgotten early is a pass, no more).
const REMEMBERED: usize = 100_000;

/// The door's key and the submissions whose notifications already woke this host.
#[derive(Debug)]
pub(super) struct DoorTags {
    key: String,
    newest: i64,
    seen: HashSet<String>,
    order: VecDeque<(i64, String)>,
}

impl DoorTags {
    pub(super) fn new(key: String) -> Self {
        Self { key, newest: i64::MIN, seen: HashSet::new(), order: VecDeque::new() }
    }

    /// The tag `spindle.submit` puts on `signed` (`<id>.<micros>`).
    fn tag(&self, signed: &str) -> String {
        hex::encode(Sha256::digest(format!("{}.{signed}", self.key).as_bytes()))
    }

    /// Whether `payload` is a fresh notification of the door's: its first one for its
    /// submission, within the window.
    pub(super) fn accepts(&mut self, payload: &str) -> bool {
        let Some((signed, tag)) = payload.rsplit_once('.') else { return false };
        let Some((id, micros)) = signed.split_once('.') else { return false };
        let (Ok(_), Ok(micros)) = (uuid::Uuid::parse_str(id), micros.parse::<i64>()) else { return false };
        let expected = self.tag(signed);
        // Compared in full whatever differs first: the time taken says nothing of the tag.
        let same =
            expected.len() == tag.len() && expected.bytes().zip(tag.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0;
        if !same || micros < self.newest.saturating_sub(WINDOW_MICROS) || self.seen.contains(id) {
            return false;
        }
        self.newest = self.newest.max(micros);
        let horizon = self.newest.saturating_sub(WINDOW_MICROS);
        while let Some((at, _)) = self.order.front() {
            if *at >= horizon && self.order.len() < REMEMBERED {
                break;
            }
            if let Some((_, old)) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(id.to_owned());
        self.order.push_back((micros, id.to_owned()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "db82b346-96ea-4011-bdef-3ff61de4cc27";

    fn door() -> DoorTags {
        DoorTags::new("k3y".into())
    }

    fn tagged(tags: &DoorTags, id: &str, micros: i64) -> String {
        let signed = format!("{id}.{micros}");
        format!("{signed}.{}", tags.tag(&signed))
    }

    #[test]
    fn only_a_fresh_notification_tagged_with_the_key_wakes_a_host() {
        let mut tags = door();
        for forged in
            ["", "x", &format!("{ID}.5"), &format!("{ID}.5.00"), "spindle", &format!("{ID}.5.{}", "0".repeat(64))]
        {
            assert!(!tags.accepts(forged), "{forged:?}");
        }
        let other_key = DoorTags::new("another".into());
        assert!(!tags.accepts(&tagged(&other_key, ID, 5)), "another key's tag");
        let genuine = tagged(&tags, ID, 5_000_000_000);
        assert!(tags.accepts(&genuine));
        assert!(!tags.accepts(&genuine), "a replay wakes nobody");
        // The same id at another time is the same submission: once.
        assert!(!tags.accepts(&tagged(&tags, ID, 5_000_000_001)));
        let later = "0b6e8f51-1111-4011-bdef-3ff61de4cc27";
        assert!(tags.accepts(&tagged(&tags, later, 5_000_000_000 + WINDOW_MICROS + 10)));
        // Older than the window behind the newest: refused without being remembered.
        let stale = "1c7f9062-2222-4011-bdef-3ff61de4cc27";
        assert!(!tags.accepts(&tagged(&tags, stale, 5_000_000_005)));
        assert!(tags.accepts(&tagged(&tags, stale, 5_000_000_000 + WINDOW_MICROS + 20)));
    }

    #[test]
    fn what_a_host_remembers_is_bounded_by_the_window() {
        let mut tags = door();
        for n in 0..1_000_i64 {
            let id = uuid::Uuid::from_u128(n as u128).to_string();
            assert!(tags.accepts(&tagged(&tags, &id, n * WINDOW_MICROS / 100)));
        }
        assert!(tags.seen.len() <= 101, "{} remembered", tags.seen.len());
        assert_eq!(tags.seen.len(), tags.order.len());
    }
}
