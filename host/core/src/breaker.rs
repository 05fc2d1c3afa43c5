//! The fault breaker (issue 15): per (tenant, kind, version), a kind whose steps keep faulting
//! (sandbox faults, time-outs) stops being claimed for a cool-down, then lets one probe
//! through, and closes only after consecutive successes — seed 000's rule for anything
//! threshold-driven: separate open and close conditions and a cool-down, so a kind
//! hovering around the threshold cannot make it flap.
//!
//! `closed` (claims flow; faults inside the window are counted) → `open` (no claims
//! until the cool-down passes, or the kind is redeployed) → `half_open` (one probe at a
//! time; `close_after` successes in a row close it, a fault opens it again). An operator
//! can reset it to `closed` from anywhere.
//!
//! Pure, like the job machine: the engine keeps one per (tenant, kind, version), feeds it
//! the outcomes of that version's steps and asks it before claiming.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::table::{Allowed, DiagramState, Forbidden, NotInTable, change};
use crate::time::Timestamp;

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Claims flow; faults within the window are counted.
    Closed,
    /// Nothing of the kind is claimed until the cool-down passes.
    Open,
    /// One probe at a time; consecutive successes close it.
    HalfOpen,
}

impl BreakerState {
    /// Lower-case name, as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

impl DiagramState for BreakerState {
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn is_final(self) -> bool {
        false
    }
    fn all() -> &'static [Self] {
        &[Self::Closed, Self::Open, Self::HalfOpen]
    }
}

/// Every allowed breaker transition.
pub const BREAKER_TRANSITIONS: &[Allowed<BreakerState>] = {
    use BreakerState::*;
    &[
        Allowed { from: None, to: Closed, trigger: "first step of the kind", seed: "issue 15 breaker" },
        Allowed {
            from: Some(Closed),
            to: Open,
            trigger: "faults reach the threshold in the window",
            seed: "issue 15 breaker",
        },
        Allowed {
            from: Some(Open),
            to: HalfOpen,
            trigger: "cool-down passed, or redeployed",
            seed: "issue 15 breaker",
        },
        Allowed { from: Some(HalfOpen), to: Closed, trigger: "consecutive probes succeeded", seed: "issue 15 breaker" },
        Allowed { from: Some(HalfOpen), to: Open, trigger: "a probe faulted", seed: "issue 15 breaker" },
        Allowed { from: Some(Open), to: Closed, trigger: "operator reset", seed: "issue 15 breaker" },
    ]
};

/// Breaker transitions that may never happen.
pub const BREAKER_FORBIDDEN: &[Forbidden<BreakerState>] = {
    use BreakerState::*;
    &[Forbidden {
        from: Closed,
        to: HalfOpen,
        why: "A closed breaker has nothing to probe: it opens first, and probes only after its cool-down.",
        seed: "issue 15 breaker",
    }]
};

/// When a breaker opens and closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerPolicy {
    /// Faults within `window` that open it.
    pub threshold: u32,
    /// How far back faults count.
    pub window: Duration,
    /// How long it stays open before a probe.
    pub cool_down: Duration,
    /// Consecutive successful probes that close it.
    pub close_after: u32,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self { threshold: 10, window: Duration::from_secs(60), cool_down: Duration::from_secs(30), close_after: 3 }
    }
}

/// What happened to a breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerEvent {
    /// A step of the kind ended well (completed, skipped, a guest's own error).
    Succeeded,
    /// A step of the kind faulted in the sandbox or ran out of time.
    Faulted,
    /// A new version of the kind was deployed: probe it without waiting out the cool-down.
    Redeployed,
    /// An operator reset it.
    Reset,
}

/// One (tenant, kind)'s breaker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    /// Where it stands.
    pub state: BreakerState,
    /// When the faults counted while closed happened (within the window).
    faults: VecDeque<Timestamp>,
    /// When it last opened.
    pub opened_at: Option<Timestamp>,
    /// Whether a probe is out (half-open admits one at a time), and since when: a probe
    /// that never reports (its claim did not land, its host went away) gives its turn up
    /// after a cool-down.
    probing: bool,
    #[serde(default)]
    probe_at: Option<Timestamp>,
    /// Consecutive successful probes.
    pub successes: u32,
    /// Its policy.
    pub policy: BreakerPolicy,
}

impl Breaker {
    /// A closed breaker with `policy`.
    pub fn new(policy: BreakerPolicy) -> Self {
        Self {
            state: BreakerState::Closed,
            faults: VecDeque::new(),
            opened_at: None,
            probing: false,
            probe_at: None,
            successes: 0,
            policy,
        }
    }

    /// Faults counted in the window ending at `now`.
    pub fn recent_faults(&self, now: Timestamp) -> usize {
        self.faults.iter().filter(|at| now.since(**at) < self.policy.window).count()
    }

    /// Whether a step of the kind may be claimed at `now`; in half-open, the answer
    /// `true` takes the one probe slot until its outcome is reported.
    pub fn admit(&mut self, now: Timestamp) -> Result<bool, NotInTable> {
        self.tick(now)?;
        Ok(match self.state {
            BreakerState::Closed => true,
            BreakerState::Open => false,
            BreakerState::HalfOpen
                if self.probing && self.probe_at.is_some_and(|at| now.since(at) < self.policy.cool_down) =>
            {
                false
            }
            BreakerState::HalfOpen => {
                self.probing = true;
                self.probe_at = Some(now);
                true
            }
        })
    }

    /// Applies `event` at `now`; answers the state change, if any.
    pub fn apply(&mut self, event: BreakerEvent, now: Timestamp) -> Result<Option<BreakerState>, NotInTable> {
        let from = self.state;
        self.tick(now)?;
        match (self.state, event) {
            (_, BreakerEvent::Reset) if self.state != BreakerState::Closed => {
                // Half-open resets go through their own row (probes succeeded) in spirit:
                // the operator vouches for the kind.
                self.enter(BreakerState::Closed, now)?;
            }
            (_, BreakerEvent::Reset) => self.faults.clear(),
            (BreakerState::Closed, BreakerEvent::Faulted) => {
                self.faults.push_back(now);
                let window = self.policy.window;
                self.faults.retain(|at| now.since(*at) < window);
                if self.faults.len() >= self.policy.threshold.max(1) as usize {
                    self.enter(BreakerState::Open, now)?;
                }
            }
            (BreakerState::Closed, BreakerEvent::Succeeded | BreakerEvent::Redeployed) => {}
            (BreakerState::Open, BreakerEvent::Redeployed) => self.enter(BreakerState::HalfOpen, now)?,
            // Outcomes of steps claimed before it opened change nothing while it is open.
            (BreakerState::Open, BreakerEvent::Succeeded | BreakerEvent::Faulted) => {}
            (BreakerState::HalfOpen, BreakerEvent::Succeeded) => {
                self.probing = false;
                self.successes = self.successes.saturating_add(1);
                if self.successes >= self.policy.close_after.max(1) {
                    self.enter(BreakerState::Closed, now)?;
                }
            }
            (BreakerState::HalfOpen, BreakerEvent::Faulted) => self.enter(BreakerState::Open, now)?,
            (BreakerState::HalfOpen, BreakerEvent::Redeployed) => {
                self.successes = 0;
                self.probing = false;
            }
        }
        Ok((self.state != from).then_some(self.state))
    }

    /// Time alone moves an open breaker to half-open once its cool-down has passed.
    fn tick(&mut self, now: Timestamp) -> Result<(), NotInTable> {
        if self.state == BreakerState::Open && self.opened_at.is_none_or(|at| now.since(at) >= self.policy.cool_down) {
            self.enter(BreakerState::HalfOpen, now)?;
        }
        Ok(())
    }

    fn enter(&mut self, to: BreakerState, now: Timestamp) -> Result<(), NotInTable> {
        let from = self.state;
        // A reset from half-open is the operator closing it: the table's half_open →
        // closed row.
        self.state = change("breaker", BREAKER_TRANSITIONS, from, to)?;
        self.probing = false;
        self.successes = 0;
        match to {
            BreakerState::Open => self.opened_at = Some(now),
            BreakerState::Closed => {
                self.faults.clear();
                self.opened_at = None;
            }
            BreakerState::HalfOpen => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_micros(1_700_000_000_000_000).plus(Duration::from_secs(secs))
    }

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            threshold: 3,
            window: Duration::from_secs(60),
            cool_down: Duration::from_secs(30),
            close_after: 2,
        }
    }

    #[test]
    fn faults_past_the_threshold_open_it_and_a_cool_down_lets_one_probe_through() {
        let mut b = Breaker::new(policy());
        assert_eq!(b.apply(BreakerEvent::Faulted, at(0)), Ok(None));
        assert_eq!(b.apply(BreakerEvent::Faulted, at(1)), Ok(None));
        assert_eq!(b.apply(BreakerEvent::Faulted, at(2)), Ok(Some(BreakerState::Open)));
        assert_eq!(b.admit(at(10)), Ok(false), "open: nothing is claimed");
        assert_eq!(b.admit(at(32)), Ok(true), "cool-down passed: one probe");
        assert_eq!(b.state, BreakerState::HalfOpen);
        assert_eq!(b.admit(at(33)), Ok(false), "one probe at a time");
        assert_eq!(b.apply(BreakerEvent::Succeeded, at(34)), Ok(None));
        assert_eq!(b.admit(at(35)), Ok(true));
        assert_eq!(b.apply(BreakerEvent::Succeeded, at(36)), Ok(Some(BreakerState::Closed)));
        assert_eq!(b.admit(at(37)), Ok(true));
    }

    #[test]
    fn a_faulting_probe_opens_it_again_and_a_redeploy_probes_at_once() {
        let mut b = Breaker::new(policy());
        for s in 0..3 {
            b.apply(BreakerEvent::Faulted, at(s)).unwrap_or_default();
        }
        assert_eq!(b.admit(at(40)), Ok(true));
        assert_eq!(b.apply(BreakerEvent::Faulted, at(41)), Ok(Some(BreakerState::Open)));
        assert_eq!(b.admit(at(50)), Ok(false), "the cool-down starts again");
        assert_eq!(b.apply(BreakerEvent::Redeployed, at(51)), Ok(Some(BreakerState::HalfOpen)));
        assert_eq!(b.admit(at(51)), Ok(true));
        assert_eq!(b.apply(BreakerEvent::Reset, at(52)), Ok(Some(BreakerState::Closed)));
    }

    #[test]
    fn a_probe_that_never_reports_gives_its_turn_up_after_a_cool_down() {
        let mut b = Breaker::new(policy());
        for s in 0..3 {
            b.apply(BreakerEvent::Faulted, at(s)).unwrap_or_default();
        }
        assert_eq!(b.admit(at(40)), Ok(true), "the probe");
        assert_eq!(b.admit(at(69)), Ok(false), "its outcome may still come");
        assert_eq!(b.admit(at(70)), Ok(true), "a cool-down later, another probe");
        assert_eq!(b.state, BreakerState::HalfOpen);
    }

    #[test]
    fn faults_outside_the_window_do_not_count() {
        let mut b = Breaker::new(policy());
        for s in [0, 61, 122, 183] {
            assert_eq!(b.apply(BreakerEvent::Faulted, at(s)), Ok(None), "one fault a minute stays closed");
        }
        assert_eq!(b.recent_faults(at(183)), 1);
    }

    /// No flapping: a kind faulting three steps in seven, around the threshold, changes
    /// the breaker's state at most once per cool-down after it opens, and every change is
    /// a row of the table (`apply` and `admit` go through it).
    #[test]
    fn a_kind_hovering_at_the_threshold_does_not_make_it_flap() {
        let mut b = Breaker::new(policy());
        let mut changes: Vec<(Timestamp, BreakerState)> = Vec::new();
        let mut now = at(0);
        for i in 0..2_000u64 {
            now = now.plus(Duration::from_millis(700));
            let before = b.state;
            if b.admit(now).expect("a row") {
                let event = if i % 7 < 3 { BreakerEvent::Faulted } else { BreakerEvent::Succeeded };
                b.apply(event, now).expect("a row");
            }
            if b.state != before {
                changes.push((now, b.state));
            }
        }
        assert!(changes.iter().any(|c| c.1 == BreakerState::Open), "the faults opened it: {changes:?}");
        for pair in changes.windows(2) {
            if pair[0].1 == BreakerState::Open {
                assert!(pair[1].0.since(pair[0].0) >= policy().cool_down, "left open early: {changes:?}");
            }
        }
    }
}
