//! The job machine's one transition function, and the draft it works on.

use std::time::Duration;

use super::effect::{Effect, EffectOrder, Transition};
use super::event::{JobEvent, RetryOnto, StepReport};
use super::refusal::Refusal;
use super::state::{JobState, change_state};
use super::{CancelRequest, Claim, Job, LastReport, Request, Requests};
use crate::failure::{SafeFailure, host_codes};
use crate::history::HistoryEvent;
use crate::ids::{Actor, Fence, JobId};
use crate::policy::budget;
use crate::progress;
use crate::queue::{BLOCKED_RECHECK, QUEUE_TRANSITIONS, QueueState};
use crate::reconcile::{Evidence, ReconcilePolicy};
use crate::step::{Partial, Step, StepEvent, StepState};
use crate::table::change;
use crate::time::Timestamp;
use crate::upgrade::ClaimRecord;
use crate::workflow::{self, Join, Leftover, MAX_DEPTH, MAX_FAN_OUT, MAX_SIGNAL_TIMEOUT, Met, Wait, WaitFor};

/// Applies `event` to `job` at `now`: the job machine's one transition function.
pub fn transition(job: &Job, event: &JobEvent, now: Timestamp) -> Result<Transition, Refusal> {
    let mut t = Draft::new(job);
    match event {
        JobEvent::Claim { owner, ttl, record } => t.claim(owner, *ttl, *record, now)?,
        JobEvent::Heartbeat { fence, ttl, progress } => t.heartbeat(*fence, *ttl, *progress, now)?,
        JobEvent::Report { fence, report } => t.report(*fence, report, now)?,
        JobEvent::Rescue { backoff } => t.rescue(*backoff, now)?,
        JobEvent::Pause { actor } => t.pause(actor, now)?,
        JobEvent::Resume { actor } => t.resume(actor, now)?,
        JobEvent::Cancel { actor, reason } => t.cancel(actor, reason, now)?,
        JobEvent::RequestRestart { actor } => t.request_restart(actor, now)?,
        JobEvent::Reconcile { evidence, policy } => t.reconcile(*evidence, policy, now)?,
        JobEvent::Retry { successor, onto } => t.retry(*successor, onto.clone())?,
        JobEvent::Due => t.due(now)?,
        JobEvent::KeyBusy { key, held_until } => t.key_busy(key, *held_until, now)?,
        JobEvent::AtCapacity { gate, recheck_at } => t.at_capacity(gate, *recheck_at, now)?,
        JobEvent::KeyReleased { key } => t.key_released(key, now)?,
        JobEvent::Signal { name, body, key } => t.signal(name, body, key.as_deref(), now)?,
        JobEvent::ChildrenSettled { slot, settled } => t.children_settled(slot, *settled, now)?,
    }
    t.finish(job, now)
}

/// A transition being worked out: a copy of the job plus what to write and do.
struct Draft {
    job: Job,
    steps_changed: Vec<usize>,
    previous_pass: Option<Vec<Step>>,
    history: Vec<HistoryEvent>,
    effects: Vec<Effect>,
    /// The job was (re)dispatched: it waits in the queue from this time.
    dispatched: Option<Timestamp>,
    /// Its claim found this lease key held: it waits for the key.
    blocked_on: Option<String>,
    /// A reconciliation probe: it observes where the job waits and must not repair it.
    observing: bool,
}

impl Draft {
    fn new(job: &Job) -> Self {
        Self {
            job: job.clone(),
            steps_changed: Vec::new(),
            previous_pass: None,
            history: Vec::new(),
            effects: Vec::new(),
            dispatched: None,
            blocked_on: None,
            observing: false,
        }
    }

    /// Completes the draft: the job's net state change and its queue state, each
    /// checked against its table.
    fn finish(mut self, before: &Job, now: Timestamp) -> Result<Transition, Refusal> {
        change_state(before.state, self.job.state)?;
        if self.job.state.is_final() && !before.state.is_final() {
            if let Some(parent) = &self.job.parent {
                self.effects.push(Effect::NotifyParent { parent: parent.job });
            }
            // No step will consume what is still pending: the job's view stops listing
            // it, and its history says what was left.
            if !self.job.signals.is_empty() {
                let signals = std::mem::take(&mut self.job.signals);
                self.history.push(HistoryEvent::SignalsDiscarded { signals });
            }
        }
        let queue = self.queue_after(before, now);
        self.job.queue = change("queue", QUEUE_TRANSITIONS, before.queue, queue)?;
        self.job.blocked_on =
            if queue == QueueState::Blocked { self.blocked_on.or(before.blocked_on.clone()) } else { None };
        if let Some(held) = &before.claim
            && self.job.claim.as_ref().is_none_or(|claim| claim.fence != held.fence)
            && held.step < self.job.steps.len()
        {
            // The claim ends here: until now it alone recorded its attempt's start
            // (`Job::restore_claimed_step`), so its step's row is written as it stands.
            self.steps_changed.push(held.step);
        }
        self.steps_changed.sort_unstable();
        self.steps_changed.dedup();
        Ok(Transition {
            job: self.job,
            steps_changed: self.steps_changed,
            previous_pass: self.previous_pass,
            history: self.history,
            effects: self.effects,
        })
    }

    /// Where the job waits after this transition: nowhere while a step is in flight,
    /// while paused or once final; otherwise where the transition put it (dispatched,
    /// blocked on a key), or where it already waited.
    fn queue_after(&self, before: &Job, now: Timestamp) -> QueueState {
        let job = &self.job;
        let by_time = |at: Timestamp| if at <= now { QueueState::Ready } else { QueueState::Delayed };
        if job.state.is_final() || job.state == JobState::Paused || job.claim.is_some() {
            QueueState::Idle
        } else if let Some(at) = self.dispatched {
            by_time(at)
        } else if self.blocked_on.is_some() {
            QueueState::Blocked
        } else if job.state == JobState::Waiting {
            // Parked: out of the queue, or delayed until a signal wait's timeout (which
            // `due` turns into a wake).
            if job.wait.as_ref().and_then(Wait::deadline).is_some() { QueueState::Delayed } else { QueueState::Idle }
        } else if before.queue == QueueState::Idle && !self.observing {
            // Open, unclaimed and not paused, yet out of the queue (only a defect or a
            // damaged row leaves it so): any change but a probe's puts it back.
            by_time(job.run_at)
        } else {
            before.queue
        }
    }

    /// The one place the draft changes the job's state, row-checked as it goes.
    fn enter(&mut self, to: JobState) -> Result<(), Refusal> {
        self.job.state = change_state(self.job.state, to)?;
        Ok(())
    }

    fn refuse_if_final(&self) -> Result<(), Refusal> {
        if self.job.state.is_final() { Err(Refusal::Finished { state: self.job.state }) } else { Ok(()) }
    }

    fn step_event(&mut self, index: usize, event: StepEvent, now: Timestamp) -> Result<(), Refusal> {
        let step = &mut self.job.steps[index];
        step.apply(event, now)?;
        self.steps_changed.push(index);
        Ok(())
    }

    fn touch(&mut self, now: Timestamp) {
        self.job.last_activity_at = now;
        self.job.probe_misses = 0;
    }

    fn refresh_progress(&mut self) {
        let succeeded = self.job.state == JobState::Succeeded;
        self.job.progress = progress::derive(&self.job.steps, self.job.progress, succeeded);
    }

    // --- claim and heartbeat -------------------------------------------------------

    fn claim(&mut self, owner: &str, ttl: Duration, record: ClaimRecord, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.state == JobState::Paused {
            return Err(Refusal::Paused);
        }
        if let Some(claim) = &self.job.claim {
            return Err(Refusal::Claimed { fence: claim.fence });
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::Cancelling);
        }
        if self.job.state == JobState::Waiting {
            return Err(Refusal::Waiting);
        }
        if self.job.run_at > now {
            return Err(Refusal::NotDue { run_at: self.job.run_at });
        }
        if self.job.requests.restart.is_some() {
            self.fresh_pass(now)?;
        }
        let index = self.job.next_step().ok_or(Refusal::NothingToRun)?;
        let fence = self.job.fence.next();
        if self.job.state == JobState::Pending {
            self.enter(JobState::Running)?;
            self.job.started_at.get_or_insert(now);
        }
        if self.job.steps[index].state == StepState::Waiting {
            // A wait that is over: the parked attempt goes on.
            self.step_event(index, StepEvent::Continue, now)?;
        } else if self.job.steps[index].state == StepState::Running {
            // The attempt goes on after `more`, `snooze` or a release: no new attempt, and
            // nothing of the step changes, so its row is not written again.
            self.job.steps[index].apply(StepEvent::Continue, now)?;
        } else {
            // Under format 2 not marked changed: the claim records the attempt's start,
            // and the step's row follows when it next changes or the claim ends (see
            // `finish`). Under format 1 the step's row is written now, for readers
            // that do not restore it from the claim.
            self.job.steps[index].apply(StepEvent::Start { fence }, now)?;
            if record == ClaimRecord::JobAndStep {
                self.steps_changed.push(index);
            }
            let step = &self.job.steps[index];
            self.history.push(HistoryEvent::StepStarted { step: step.key.clone(), attempt: step.attempts_made() });
        }
        self.job.fence = fence;
        let expires_at = now.plus(ttl);
        self.job.claim =
            Some(Claim { fence, owner: owner.to_owned(), step: index, claimed_at: now, expires_at, limited: false });
        self.effects.push(Effect::AcquireLeaseKeys { fence, expires_at });
        self.touch(now);
        Ok(())
    }

    fn held_claim(&self, fence: Fence) -> Result<&Claim, Refusal> {
        match &self.job.claim {
            Some(claim) if claim.fence == fence => Ok(claim),
            _ => Err(Refusal::StaleFence { presented: fence, current: self.job.fence }),
        }
    }

    fn heartbeat(
        &mut self,
        fence: Fence,
        ttl: Duration,
        partial: Option<Partial>,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        let index = self.held_claim(fence)?.step;
        let expires_at = now.plus(ttl);
        if let Some(claim) = self.job.claim.as_mut() {
            claim.expires_at = expires_at;
        }
        self.effects.push(Effect::RenewLeaseKeys { fence, expires_at });
        if let Some(partial) = partial {
            self.job.steps[index].partial = Some(partial);
            self.steps_changed.push(index);
            self.refresh_progress();
        }
        self.touch(now);
        Ok(())
    }

    // --- the end of a step attempt ---------------------------------------------------

    fn report(&mut self, fence: Fence, report: &StepReport, now: Timestamp) -> Result<(), Refusal> {
        if self.job.state == JobState::Failed && matches!(report, StepReport::Complete { .. }) {
            return Err(Refusal::LateSuccessAfterFailure);
        }
        let held = self.job.claim.as_ref().is_some_and(|c| c.fence == fence);
        if let Some(last) = self.job.last_report.filter(|last| last.fence == fence && !held) {
            // The same claim reported before: an identical repeat adds nothing.
            return if last.fingerprint == report.fingerprint() {
                Ok(())
            } else {
                Err(Refusal::ConflictingReport { fence })
            };
        }
        self.refuse_if_final()?;
        let index = self.held_claim(fence)?.step;
        self.job.claim = None;
        self.job.last_report = Some(LastReport { fence, fingerprint: report.fingerprint() });
        self.effects.push(Effect::ReleaseLeaseKeys { fence, verify: true });
        self.touch(now);
        let key = self.job.steps[index].key.clone();
        if !matches!(report, StepReport::Retryable { .. } | StepReport::Snooze { .. } | StepReport::Release) {
            // The woken step answered: its wait is done with (a transient failure keeps
            // it, so the next attempt is given the same results).
            self.end_wait();
        }
        let then = match report {
            StepReport::Complete { output } => {
                self.step_event(index, StepEvent::Complete { output: output.clone() }, now)?;
                self.history.push(HistoryEvent::StepCompleted { step: key });
                now
            }
            StepReport::Skip { reason } => {
                self.step_event(index, StepEvent::Skip { reason: reason.clone() }, now)?;
                self.history.push(HistoryEvent::StepSkipped { step: key, reason: reason.clone() });
                now
            }
            StepReport::More { cursor, partial } => {
                let step = &self.job.steps[index];
                let started = step.attempts.last().map_or(now, |a| a.started_at);
                match budget::check_slices(step.slices.saturating_add(1), started.as_micros(), now.as_micros()) {
                    Ok(()) => {
                        let checkpoint = StepEvent::Checkpoint { cursor: cursor.clone(), partial: *partial };
                        self.step_event(index, checkpoint, now)?;
                        now
                    }
                    Err((code, message)) => {
                        // The slice's cursor is not committed: the next attempt resumes
                        // from the last one that was.
                        let failure = SafeFailure::host(code, message);
                        self.attempt_failed(index, failure, budget::OVER_BUDGET_BACKOFF, now)?
                    }
                }
            }
            StepReport::Snooze { delay } => {
                let until = now.plus((*delay).max(budget::SNOOZE_FLOOR));
                let step = &mut self.job.steps[index];
                if step.snoozes == 0 {
                    self.history.push(HistoryEvent::Snoozed { step: key, until });
                }
                step.snoozes = step.snoozes.saturating_add(1);
                self.steps_changed.push(index);
                until
            }
            StepReport::Release => {
                self.history.push(HistoryEvent::Released { step: key });
                now
            }
            StepReport::Retryable { failure, backoff } => self.attempt_failed(index, failure.clone(), *backoff, now)?,
            StepReport::AwaitChildren { children, join, leftover, cursor } => {
                self.await_children(index, children, *join, *leftover, cursor, now)?;
                now
            }
            StepReport::AwaitSignal { name, timeout, cursor } => {
                self.await_signal(index, name, *timeout, cursor, now)?;
                now
            }
            StepReport::Refused { failure } => {
                self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now)?;
                self.history.push(HistoryEvent::StepFailed { step: key, failure: failure.clone() });
                now
            }
        };
        self.after_step(then, now)?;
        self.refresh_progress();
        Ok(())
    }

    /// A transient failure of the attempt at `index`: retry while the budget lasts.
    fn attempt_failed(
        &mut self,
        index: usize,
        failure: SafeFailure,
        backoff: Duration,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal> {
        let step = &self.job.steps[index];
        let key = step.key.clone();
        if step.attempts_made() >= self.job.rules.max_attempts.max(1) {
            self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now)?;
            self.history.push(HistoryEvent::StepFailed { step: key, failure });
            Ok(now)
        } else {
            let attempt = step.attempts_made();
            let retry_at = now.plus(backoff);
            self.step_event(index, StepEvent::Retry { failure: failure.clone() }, now)?;
            self.history.push(HistoryEvent::StepRetrying { step: key, attempt, failure, retry_at });
            Ok(retry_at)
        }
    }

    /// Seed 003's precedence table: what the job does when a step attempt ends.
    /// `then` is when to dispatch again if nothing overrides.
    fn after_step(&mut self, then: Timestamp, now: Timestamp) -> Result<(), Refusal> {
        if self.job.requests.cancel.is_some() {
            // A cancel wins over everything, even a completed run.
            self.settle_cancelled(now)?;
        } else if let Some(failure) =
            self.job.steps.iter().find(|s| s.state == StepState::Failed).and_then(|s| s.failure.clone())
        {
            self.settle_failed(failure, EffectOrder::BeforeSettlement, now)?;
        } else if self.job.next_step().is_none() {
            if self.job.requests.restart.is_some() && self.job.requests.pause.is_none() {
                self.fresh_pass(now)?;
                self.dispatch(now);
            } else {
                self.settle_succeeded(now)?;
            }
        } else if self.job.requests.pause.take().is_some() {
            self.enter(JobState::Paused)?;
            self.history.push(HistoryEvent::Paused);
        } else if self.job.requests.restart.is_some() {
            self.fresh_pass(now)?;
            self.dispatch(now);
        } else if self.job.state != JobState::Waiting && self.dispatched.is_none() {
            // A parked step is dispatched by its wake, not here.
            self.dispatch(then);
        }
        Ok(())
    }

    /// Puts the job in the dispatch queue from `at` (ready or delayed, as `finish`
    /// decides against `now`).
    fn dispatch(&mut self, at: Timestamp) {
        self.job.run_at = at;
        self.dispatched = Some(at);
        self.effects.push(Effect::Dispatch { at });
    }

    fn rescue(&mut self, backoff: Duration, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        let claim = self.job.claim.clone().ok_or(Refusal::NotClaimed)?;
        if claim.expires_at > now {
            return Err(Refusal::ClaimLive { expires_at: claim.expires_at });
        }
        self.job.claim = None;
        self.effects.push(Effect::ReleaseLeaseKeys { fence: claim.fence, verify: false });
        self.history.push(HistoryEvent::Rescued { fence: claim.fence, owner: claim.owner.clone() });
        self.touch(now);
        let (code, message) = host_codes::LEASE_EXPIRED;
        let failure =
            SafeFailure { code: code.to_owned(), message: message.to_owned(), correlation: None, guest_stderr: None };
        let then = self.attempt_failed(claim.step, failure, backoff, now)?;
        self.after_step(then, now)?;
        self.refresh_progress();
        Ok(())
    }

    // --- settlements -----------------------------------------------------------------

    fn settle_succeeded(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.enter(JobState::Succeeded)?;
        self.job.settled_at = Some(now);
        self.job.requests = Requests::default();
        self.job.progress = 100;
        self.history.push(HistoryEvent::Succeeded);
        if self.job.rules.notify_on_success {
            self.effects.push(Effect::NotifySuccess);
        }
        Ok(())
    }

    fn settle_failed(&mut self, failure: SafeFailure, order: EffectOrder, now: Timestamp) -> Result<(), Refusal> {
        self.enter(JobState::Failed)?;
        if self.job.rules.failure_effect && order == EffectOrder::BeforeSettlement {
            self.effects.push(Effect::FailureEffect { order });
        }
        self.job.settled_at = Some(now);
        self.job.requests = Requests::default();
        self.job.claim = None;
        self.close_children("failed");
        self.history.push(HistoryEvent::Failed { failure: failure.clone() });
        self.job.failure = Some(failure);
        if self.job.rules.failure_effect && order == EffectOrder::AfterSettlement {
            self.effects.push(Effect::FailureEffect { order });
        }
        Ok(())
    }

    /// Fails every step in flight with `explanation` (seed 001: "fail running and
    /// retrying steps"; queued steps stay queued, seed 002).
    fn fail_in_flight(&mut self, explanation: (&'static str, &'static str), now: Timestamp) -> Option<SafeFailure> {
        let failure = SafeFailure::host(explanation.0, explanation.1);
        let mut any = None;
        for index in 0..self.job.steps.len() {
            if self.job.steps[index].state.is_in_flight() {
                // Running and retrying steps accept `Fail`; the error cannot occur.
                if self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now).is_ok() {
                    let key = self.job.steps[index].key.clone();
                    self.history.push(HistoryEvent::StepFailed { step: key, failure: failure.clone() });
                    any = Some(failure.clone());
                }
            }
        }
        any
    }

    fn settle_cancelled(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.enter(JobState::Cancelled)?;
        let stopped = self.fail_in_flight(host_codes::STOPPED, now);
        self.release_claim();
        self.job.settled_at = Some(now);
        self.job.failure = stopped;
        self.job.requests.pause = None;
        self.job.requests.restart = None;
        self.close_children("cancelled");
        self.history.push(HistoryEvent::Cancelled);
        Ok(())
    }

    /// A failed or cancelled parent's open children are cancelled, unless its latest
    /// fan-out said they run on.
    fn close_children(&mut self, became: &str) {
        if self.job.fan_outs > 0 && self.job.children_on_close != Some(Leftover::Keep) {
            let reason = format!("parent {} {became}", self.job.id);
            self.effects.push(Effect::CancelChildren { slot: None, reason });
        }
    }

    /// Begins a fresh pass (seed 003: "pass restarts (queued, counters reset)"). The old
    /// pass's steps keep their outcomes; those in flight end as superseded.
    fn fresh_pass(&mut self, now: Timestamp) -> Result<(), Refusal> {
        if self.job.state == JobState::Waiting {
            self.enter(JobState::Running)?;
        }
        if self.job.wait.take().is_some() && self.job.children_on_close != Some(Leftover::Keep) {
            let reason = format!("parent {} restarted", self.job.id);
            self.effects.push(Effect::CancelChildren { slot: None, reason });
        }
        self.fail_in_flight(host_codes::SUPERSEDED, now);
        let next: Vec<Step> = self
            .job
            .steps
            .iter()
            .map(|s| if s.carried { s.clone() } else { Step::new(s.key.clone(), s.weight) })
            .collect();
        let old = std::mem::replace(&mut self.job.steps, next);
        self.previous_pass = Some(old);
        self.steps_changed = (0..self.job.steps.len()).collect();
        self.job.pass = self.job.pass.saturating_add(1);
        self.job.requests.restart = None;
        self.job.progress = progress::derive(&self.job.steps, 0, false);
        self.history.push(HistoryEvent::PassStarted { pass: self.job.pass });
        Ok(())
    }

    // --- run control -----------------------------------------------------------------

    fn pause(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.state == JobState::Paused {
            return Err(Refusal::AlreadyPaused);
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::Cancelling);
        }
        if self.job.requests.pause.is_some() {
            return Err(Refusal::AlreadyPausing);
        }
        self.history.push(HistoryEvent::PauseRequested { actor: actor.clone() });
        if self.job.claim.is_some() {
            self.job.requests.pause = Some(Request { actor: actor.clone(), at: now });
        } else {
            self.enter(JobState::Paused)?;
            self.history.push(HistoryEvent::Paused);
        }
        self.touch(now);
        Ok(())
    }

    fn resume(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.requests.pause.take().is_some() {
            // Still pausing: withdraw the request; the step in flight carries on.
            self.history.push(HistoryEvent::Resumed { actor: actor.clone() });
        } else if self.job.state == JobState::Paused && self.job.wait.as_ref().is_some_and(|w| w.met.is_none()) {
            // Parked when paused: the wait may have ended meanwhile.
            self.history.push(HistoryEvent::Resumed { actor: actor.clone() });
            self.enter(JobState::Waiting)?;
            if let Some(met) = self.wait_over(now) {
                self.wake(met, now)?;
            }
        } else if self.job.state == JobState::Paused {
            self.enter(if self.job.has_execution() { JobState::Running } else { JobState::Pending })?;
            self.history.push(HistoryEvent::Resumed { actor: actor.clone() });
            let at = self.job.run_at.max(now);
            self.dispatch(at);
        } else {
            return Err(Refusal::NotPaused);
        }
        self.touch(now);
        Ok(())
    }

    fn cancel(&mut self, actor: &Actor, reason: &str, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if !self.job.rules.cancellable {
            return Err(Refusal::NotCancellable);
        }
        if reason.trim().is_empty() {
            return Err(Refusal::BlankReason);
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::AlreadyCancelling);
        }
        self.job.requests.cancel = Some(CancelRequest { actor: actor.clone(), reason: reason.to_owned(), at: now });
        self.history.push(HistoryEvent::CancelRequested { actor: actor.clone(), reason: reason.to_owned() });
        if self.job.claim.is_none() {
            // No attempt in flight: the request and the outcome are recorded together.
            self.settle_cancelled(now)?;
        }
        self.touch(now);
        Ok(())
    }

    fn request_restart(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if !self.job.has_execution() {
            return Err(Refusal::NotStarted);
        }
        if self.job.requests.restart.is_some() {
            return Ok(());
        }
        self.history.push(HistoryEvent::RestartRequested { actor: actor.clone() });
        let waits = self.job.claim.is_some()
            || self.job.state == JobState::Paused
            || self.job.requests.pause.is_some()
            || self.job.requests.cancel.is_some();
        self.job.requests.restart = Some(Request { actor: actor.clone(), at: now });
        if !waits {
            self.fresh_pass(now)?;
            self.dispatch(now);
        }
        self.touch(now);
        Ok(())
    }

    // --- reconciliation and retry ------------------------------------------------------

    fn reconcile(&mut self, evidence: Evidence, policy: &ReconcilePolicy, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        self.observing = true;
        if self.job.state == JobState::Paused {
            return Err(Refusal::Paused);
        }
        if self.job.state == JobState::Waiting {
            return Err(Refusal::Waiting);
        }
        let silent_for = now.since(self.job.last_activity_at);
        if silent_for < policy.silence {
            return Err(Refusal::NotSilent { silent_for });
        }
        let never_started = !self.job.has_execution();
        match evidence {
            Evidence::Alive => {
                self.job.probe_misses = 0;
            }
            Evidence::Missing => {
                self.job.probe_misses = self.job.probe_misses.saturating_add(1);
                let misses = self.job.probe_misses;
                if misses < policy.required_misses.max(1) {
                    self.history.push(HistoryEvent::ProbeMissed { misses });
                } else if never_started {
                    // Unstarted steps stay queued (seed 001 pending→failed).
                    self.history.push(HistoryEvent::Reconciled { evidence });
                    let (code, message) = host_codes::NEVER_STARTED;
                    self.settle_failed(SafeFailure::host(code, message), EffectOrder::BeforeSettlement, now)?;
                } else {
                    self.settle_from_lost_execution(evidence, host_codes::EXECUTION_LOST, now)?;
                }
            }
            Evidence::Failed => {
                if never_started {
                    self.history.push(HistoryEvent::Reconciled { evidence });
                    let (code, message) = host_codes::NEVER_STARTED;
                    self.settle_failed(SafeFailure::host(code, message), EffectOrder::BeforeSettlement, now)?;
                } else {
                    self.settle_from_lost_execution(evidence, host_codes::EXECUTION_FAILED, now)?;
                }
            }
            Evidence::Succeeded => {
                if never_started {
                    // Success without any execution is no evidence at all: count a miss.
                    self.job.probe_misses = self.job.probe_misses.saturating_add(1);
                    self.history.push(HistoryEvent::ProbeMissed { misses: self.job.probe_misses });
                    return Ok(());
                }
                self.history.push(HistoryEvent::Reconciled { evidence });
                if self.job.requests.cancel.is_some() {
                    self.settle_cancelled(now)?;
                } else if self.job.steps.iter().any(|s| s.state.is_in_flight()) {
                    // Success with steps in flight is corrected to failure; the effect
                    // runs after the corrected settlement (seed 001).
                    let failure = self.fail_in_flight(host_codes::SUCCESS_CORRECTED, now);
                    self.release_claim();
                    let (code, message) = host_codes::SUCCESS_CORRECTED;
                    let failure = failure.unwrap_or_else(|| SafeFailure::host(code, message));
                    self.settle_failed(failure, EffectOrder::AfterSettlement, now)?;
                } else {
                    self.release_claim();
                    self.settle_succeeded(now)?;
                }
            }
        }
        Ok(())
    }

    /// Ends the claim in flight, if any, on someone else's behalf (no key check).
    fn release_claim(&mut self) {
        if let Some(claim) = self.job.claim.take() {
            self.effects.push(Effect::ReleaseLeaseKeys { fence: claim.fence, verify: false });
        }
    }

    fn settle_from_lost_execution(
        &mut self,
        evidence: Evidence,
        explanation: (&'static str, &'static str),
        now: Timestamp,
    ) -> Result<(), Refusal> {
        self.history.push(HistoryEvent::Reconciled { evidence });
        if self.job.requests.cancel.is_some() {
            // The execution is gone and a cancel was recorded: it is confirmed.
            return self.settle_cancelled(now);
        }
        self.fail_in_flight(explanation, now);
        self.release_claim();
        self.settle_failed(SafeFailure::host(explanation.0, explanation.1), EffectOrder::BeforeSettlement, now)
    }

    fn retry(&mut self, successor: JobId, onto: Option<RetryOnto>) -> Result<(), Refusal> {
        match self.job.state {
            JobState::Failed | JobState::Cancelled => {}
            state => return Err(Refusal::NotRetryable { state }),
        }
        if let Some(existing) = self.job.successor {
            return Err(Refusal::AlreadyRetried { successor: existing });
        }
        self.job.successor = Some(successor);
        self.history.push(HistoryEvent::RetriedAs { successor });
        self.effects.push(Effect::SpawnRetry { successor, onto });
        Ok(())
    }

    // --- the queue -----------------------------------------------------------------

    /// Seed 000's waiting room: a delayed job whose time has come, or a blocked job at
    /// its recheck time, becomes ready.
    fn due(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        match self.job.queue {
            QueueState::Delayed if self.job.state == JobState::Waiting && self.job.run_at <= now => {
                // A signal wait's timeout.
                let met = self.wait_over(now).ok_or(Refusal::Waiting)?;
                self.wake(met, now)
            }
            QueueState::Delayed | QueueState::Blocked if self.job.run_at <= now => {
                self.dispatch(self.job.run_at);
                Ok(())
            }
            QueueState::Delayed | QueueState::Blocked => Err(Refusal::NotDue { run_at: self.job.run_at }),
            queue => Err(Refusal::NotWaiting { queue }),
        }
    }

    /// The job's claim found `key` held until `held_until`: it waits for the key, and is
    /// tried again at the holder's expiry or after [`BLOCKED_RECHECK`], whichever is
    /// first.
    fn key_busy(&mut self, key: &str, held_until: Timestamp, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.queue != QueueState::Ready {
            return Err(Refusal::NotWaiting { queue: self.job.queue });
        }
        self.job.run_at = held_until.min(now.plus(BLOCKED_RECHECK)).max(now);
        self.blocked_on = Some(key.to_owned());
        Ok(())
    }

    /// The job's claim found a running limit full: it waits for a slot of `gate` (woken
    /// when one of the gate's steps ends), or until `recheck_at`.
    fn at_capacity(&mut self, gate: &str, recheck_at: Timestamp, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.queue != QueueState::Ready {
            return Err(Refusal::NotWaiting { queue: self.job.queue });
        }
        self.job.run_at = recheck_at.max(now);
        self.blocked_on = Some(gate.to_owned());
        Ok(())
    }

    /// The key a blocked job waits for is free: it is ready now.
    fn key_released(&mut self, key: &str, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.queue != QueueState::Blocked || self.job.blocked_on.as_deref() != Some(key) {
            return Err(Refusal::NotWaiting { queue: self.job.queue });
        }
        self.dispatch(now.min(self.job.run_at));
        Ok(())
    }

    // --- workflows -------------------------------------------------------------------

    /// Fails the step at `index` for a workflow outcome the host refuses (over a limit,
    /// malformed): a permanent, typed refusal.
    fn refuse_outcome(
        &mut self,
        index: usize,
        code: &'static str,
        message: String,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let failure = SafeFailure { code: code.to_owned(), message, correlation: None, guest_stderr: None };
        let key = self.job.steps[index].key.clone();
        self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now)?;
        self.history.push(HistoryEvent::StepFailed { step: key, failure });
        Ok(())
    }

    fn await_children(
        &mut self,
        index: usize,
        children: &[workflow::ChildOrder],
        join: Join,
        leftover: Leftover,
        cursor: &Option<String>,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        let total = children.len();
        if total > MAX_FAN_OUT {
            let message = format!("a fan-out of {total} children is over the limit of {MAX_FAN_OUT}");
            return self.refuse_outcome(index, host_codes::FAN_OUT_TOO_LARGE, message, now);
        }
        if total > 0 && self.job.depth.saturating_add(1) > MAX_DEPTH {
            let message = format!("children would nest deeper than {MAX_DEPTH} levels");
            return self.refuse_outcome(index, host_codes::TOO_DEEP, message, now);
        }
        if let Join::Count(n) = join
            && n as usize > total
        {
            let message = format!("the join waits for {n} children of {total}");
            return self.refuse_outcome(index, host_codes::INVALID_JOIN, message, now);
        }
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        self.job.fan_outs = self.job.fan_outs.saturating_add(1);
        let slot = workflow::slot(self.job.pass, index, self.job.fan_outs);
        self.step_event(index, StepEvent::Park { cursor: cursor.clone() }, now)?;
        self.job.children_on_close = Some(leftover);
        self.effects.push(Effect::SpawnChildren { slot: slot.clone(), children: children.to_vec() });
        let step = self.job.steps[index].key.clone();
        self.history.push(HistoryEvent::AwaitingChildren { step, slot: slot.clone(), children: total });
        self.job.wait =
            Some(Wait { step: index, what: WaitFor::Children { slot, total, join, leftover, settled: 0 }, met: None });
        self.park(now)
    }

    fn await_signal(
        &mut self,
        index: usize,
        name: &str,
        timeout: Duration,
        cursor: &Option<String>,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        if name.trim().is_empty() {
            return self.refuse_outcome(index, host_codes::INVALID_SIGNAL, "a signal wait needs a name".into(), now);
        }
        let deadline = now.plus(timeout.min(MAX_SIGNAL_TIMEOUT));
        self.step_event(index, StepEvent::Park { cursor: cursor.clone() }, now)?;
        let step = self.job.steps[index].key.clone();
        self.history.push(HistoryEvent::AwaitingSignal { step, name: name.to_owned(), until: deadline });
        self.job.wait =
            Some(Wait { step: index, what: WaitFor::Signal { name: name.to_owned(), deadline }, met: None });
        self.job.run_at = deadline;
        self.park(now)
    }

    /// The step just parked: the job waits, unless what it awaits is already in (no
    /// children, a signal sent before it waited), in which case it is woken at once.
    fn park(&mut self, now: Timestamp) -> Result<(), Refusal> {
        self.enter(JobState::Waiting)?;
        if let Some(met) = self.wait_over(now) {
            self.wake(met, now)?;
        }
        Ok(())
    }

    /// Whether the parked step's wait is over, and why.
    fn wait_over(&self, now: Timestamp) -> Option<Met> {
        let wait = self.job.wait.as_ref().filter(|w| w.met.is_none())?;
        match &wait.what {
            WaitFor::Children { total, join, settled, .. } => {
                (*settled >= join.target(*total)).then_some(Met::Children)
            }
            WaitFor::Signal { name, deadline } => {
                if self.job.signals.get(name).copied().unwrap_or(0) > 0 {
                    Some(Met::Signal)
                } else if *deadline <= now {
                    Some(Met::Timeout)
                } else {
                    None
                }
            }
        }
    }

    /// Ends the wait for `met`: a waiting job runs again and is dispatched (a paused
    /// one keeps the news for its resume); an early join cancels the leftovers when
    /// the fan-out said so.
    fn wake(&mut self, met: Met, now: Timestamp) -> Result<(), Refusal> {
        let Some(wait) = self.job.wait.as_mut() else { return Err(Refusal::NotWaiting { queue: self.job.queue }) };
        wait.met = Some(met);
        let step = self.job.steps.get(wait.step).map(|s| s.key.clone()).unwrap_or_default();
        if let WaitFor::Children { slot, total, join, leftover: Leftover::Cancel, .. } = &wait.what
            && join.target(*total) < *total
        {
            let reason = format!("parent {}'s join was met", self.job.id);
            self.effects.push(Effect::CancelChildren { slot: Some(slot.clone()), reason });
        }
        self.history.push(HistoryEvent::WaitOver { step, by: met });
        if self.job.state == JobState::Waiting {
            self.enter(JobState::Running)?;
            self.dispatch(now);
        }
        self.touch(now);
        Ok(())
    }

    /// A report of the woken step was accepted: the wait is done with, and a delivered
    /// signal is consumed with the report.
    fn end_wait(&mut self) {
        let Some(wait) = self.job.wait.take() else { return };
        if let (Some(Met::Signal), WaitFor::Signal { name, .. }) = (wait.met, wait.what) {
            if let Some(pending) = self.job.signals.get_mut(&name) {
                *pending = pending.saturating_sub(1);
                if *pending == 0 {
                    self.job.signals.remove(&name);
                }
            }
            self.effects.push(Effect::ConsumeSignal { name });
        }
    }

    /// A signal was sent: it is stored with the write and pending until a wait for its
    /// name consumes it.
    fn signal(&mut self, name: &str, body: &[u8], key: Option<&str>, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        self.effects.push(Effect::StoreSignal {
            name: name.to_owned(),
            body: body.to_vec(),
            key: key.map(str::to_owned),
        });
        let pending = self.job.signals.entry(name.to_owned()).or_insert(0);
        *pending = pending.saturating_add(1);
        self.history.push(HistoryEvent::SignalReceived { name: name.to_owned() });
        let waits_for_it = matches!(
            self.job.wait.as_ref(),
            Some(Wait { what: WaitFor::Signal { name: awaited, .. }, met: None, .. }) if awaited == name
        );
        if waits_for_it {
            self.wake(Met::Signal, now)?;
        }
        self.touch(now);
        Ok(())
    }

    /// Children of `slot` were counted final: wake the step when the join is met.
    fn children_settled(&mut self, slot: &str, settled: u32, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        let queue = self.job.queue;
        let Some(Wait { what: WaitFor::Children { slot: awaited, settled: counted, .. }, met: None, .. }) =
            self.job.wait.as_mut()
        else {
            return Err(Refusal::NotWaiting { queue });
        };
        if awaited != slot || settled <= *counted {
            return Err(Refusal::NotWaiting { queue });
        }
        *counted = settled;
        if let Some(met) = self.wait_over(now) {
            self.wake(met, now)?;
        }
        Ok(())
    }
}
