//! Progress, derived from settled step weights (seed 002).
//!
//! Completed and skipped steps earn their weight; the step in flight earns the share of
//! its weight its last checkpoint reported. Within a pass progress never goes back (a
//! retry keeps what was earned), and it is 100 exactly when the job succeeded.

use crate::step::Step;

/// Progress in percent for `steps`, never below `previous` (same pass), 100 only when
/// `succeeded`.
pub fn derive(steps: &[Step], previous: u8, succeeded: bool) -> u8 {
    if succeeded {
        return 100;
    }
    let total: u64 = steps.iter().map(Step::effective_weight).sum();
    if total == 0 {
        return previous.min(99);
    }
    // Parts per million of the total weight, in integers so the result is exact.
    let mut earned: u128 = 0;
    for step in steps {
        let weight = u128::from(step.effective_weight());
        if step.state.is_settled_ok() {
            earned += weight * 1_000_000;
        } else if step.state.is_in_flight()
            && let Some(partial) = step.partial
            && let Some(all) = partial.total.filter(|t| *t > 0)
        {
            let share = u128::from(partial.done.min(all)) * 1_000_000 / u128::from(all);
            earned += weight * share;
        }
    }
    let percent = earned * 100 / (u128::from(total) * 1_000_000);
    let percent = u8::try_from(percent.min(99)).unwrap_or(99);
    percent.max(previous.min(99))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::{Partial, StepState};

    fn steps(states: &[(StepState, u32)]) -> Vec<Step> {
        states
            .iter()
            .enumerate()
            .map(|(i, (state, weight))| {
                let mut s = Step::new(format!("s{i}"), *weight);
                s.state = *state;
                s
            })
            .collect()
    }

    #[test]
    fn settled_weights_earn_progress_and_only_success_is_100() {
        use StepState::*;
        assert_eq!(derive(&steps(&[(Completed, 1), (Queued, 3)]), 0, false), 25);
        assert_eq!(derive(&steps(&[(Completed, 1), (Skipped, 3)]), 0, false), 99);
        assert_eq!(derive(&steps(&[(Completed, 1), (Skipped, 3)]), 0, true), 100);
        assert_eq!(derive(&steps(&[(Queued, 0), (Completed, 0)]), 0, false), 50);
    }

    #[test]
    fn partial_progress_counts_and_never_goes_back() {
        use StepState::*;
        let mut s = steps(&[(Completed, 1), (Running, 2), (Queued, 1)]);
        s[1].partial = Some(Partial { done: 50, total: Some(100) });
        assert_eq!(derive(&s, 0, false), 50);
        s[1].state = Retrying;
        s[1].partial = None;
        assert_eq!(derive(&s, 50, false), 50);
    }
}
