// Package guesttest runs a kind's jobs natively, without a host or a component, for the
// kind's own `go test`.
//
// [RunJob] drives the steps the way the host's contract describes: declared order, a
// `more` calls again with its cursor, a retryable failure retries up to the kind's
// MaxAttempts (attempt numbers rise), a refusal fails the job, and the hooks run when
// the kind declares them. It does not wait: backoff and snoozes are skipped, leases and
// cancellation do not exist, and heartbeats proceed unless scripted. It checks the
// kind's logic, not the host.
//
// Workflows run at once too. An await-children step is called again straight away with
// its children settled by [Options.Children] (without one, each succeeds with its input
// as its output), as far as the join needs: all settles every child, any the first, a
// count that many, and the rest are reported open. An await-signal step is called again
// with the first queued signal of that name, which it consumes, or else with a timeout.
//
//	run := guesttest.RunJob(greet.Kind, map[string]any{"name": "Ada"}, nil)
//	if !run.Succeeded() { t.Fatalf("failed: %+v\n%s", run.Failure, run.Stderr) }
package guesttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"spindle.dev/guest"
)

// LocalJobID is the job id [RunJob] hands to every step.
const LocalJobID = "00000000-0000-7000-8000-000000000000"

// MaxCallsPerStep is how many calls of one step ([guest.More] continuations and snoozes
// included) [RunJob] makes before giving up on it, so that a kind that never settles
// fails its test instead of hanging it.
const MaxCallsPerStep = 100_000

// LocalChildID is the id [RunJob] gives the nth child job it creates in a run, from 1.
func LocalChildID(n int) string { return fmt.Sprintf("00000000-0000-7000-8001-%012x", n) }

// Options are what a job's host offers in a test. The zero value (or nil) offers
// nothing: no settings, no secrets, children echo their input, no signals, no HTTP.
type Options struct {
	// Config and Secrets are what [guest.Config] answers from.
	Config  map[string]string
	Secrets map[string]string
	// Children settles child jobs: each child's kind and input in, how it ended out.
	Children func(kind string, input []byte) ChildOutcome
	// Signals are queued for the job's waits, consumed in order by name.
	Signals []Signal
	// Heartbeats script the host's first answers to heartbeats.
	Heartbeats []guest.Heartbeat
	// Echo, if set, also receives log lines and stderr.
	Echo io.Writer
	// HTTP answers the job's outbound requests, with secrets in place in their headers
	// as the upstream would see them: [Serve] a handler, or a [RoundTripFunc] that can
	// also fail a request as the host would (`&wasihttp.Error{Code:
	// "HTTP-request-denied"}`). Nil: every request fails with `configuration-error`.
	// Steps are bound to the run's host while they run, so runs whose steps send HTTP
	// must not be parallel tests (see [guest.CurrentHost]).
	HTTP http.RoundTripper
}

// Signal is a signal sent to the job: its name and body (JSON-encoded, except []byte
// and json.RawMessage).
type Signal struct {
	Name string
	Body any
}

// ChildOutcome is how a child job ended, as [Options.Children] says.
type ChildOutcome struct {
	State guest.ChildState
	// Output is the child's last output when it succeeded.
	Output  []byte
	Failure *guest.Failure
}

// Succeeded is a child that succeeded with output (JSON-encoded, except []byte and
// json.RawMessage).
func Succeeded(output any) ChildOutcome {
	return ChildOutcome{State: guest.ChildSucceeded, Output: mustEncode(output)}
}

// Failed is a child that failed with code and message.
func Failed(code, message string) ChildOutcome {
	return ChildOutcome{State: guest.ChildFailed, Failure: &guest.Failure{Code: code, Message: message}}
}

// Cancelled is a child that was cancelled.
func Cancelled() ChildOutcome { return ChildOutcome{State: guest.ChildCancelled} }

// FromRun is how a job [RunJob] ran ended, for a Children handler that runs the child's
// kind too.
func FromRun(run *Run) ChildOutcome {
	if run.Failure != nil {
		return Failed(run.Failure.Code, run.Failure.Message)
	}
	var output []byte
	if n := len(run.Calls); n > 0 && run.Calls[n-1].Outcome.Kind == guest.OutcomeComplete {
		output = run.Calls[n-1].Outcome.Output
	}
	return ChildOutcome{State: guest.ChildSucceeded, Output: output}
}

// RunJob runs one job of kind with input (JSON-encoded, except []byte and
// json.RawMessage, which go as they are, to test a payload that is not JSON) to its end.
// It panics if the kind is invalid (see [guest.Kind.Validate]): the host would not
// deploy it.
func RunJob(kind *guest.Kind, input any, opts *Options) *Run {
	if err := kind.Validate(); err != nil {
		panic(fmt.Sprintf("guesttest: kind %q is invalid: %v", kind.Name, err))
	}
	if opts == nil {
		opts = &Options{}
	}
	spec := kind.Spec()
	payload := mustEncode(input)
	run := &Run{Kind: spec.Name, host: &Host{
		Settings:   opts.Config,
		Secrets:    opts.Secrets,
		Heartbeats: append([]guest.Heartbeat(nil), opts.Heartbeats...),
		Outputs:    map[string][]byte{},
		Echo:       opts.Echo,
		HTTP:       opts.HTTP,
	}}
	for _, s := range opts.Signals {
		run.SignalsLeft = append(run.SignalsLeft, QueuedSignal{Name: s.Name, Body: mustEncode(s.Body)})
	}
	jobs := &childJobs{handler: opts.Children, byKey: map[string]keyedChild{}}
	for _, step := range spec.Steps {
		if !run.runStep(kind, step.Key, payload, spec.Retry.MaxAttempts, jobs) {
			break
		}
	}
	summary := guest.JobSummary{JobID: LocalJobID, Payload: payload, Outputs: append([]guest.PriorOutput(nil), run.Outputs...)}
	switch {
	case run.Failure != nil && spec.HasFailureEffect:
		summary.Failure = &guest.Failure{Code: run.Failure.Code, Message: run.Failure.Message}
		run.Hook = &HookRun{Hook: "on-failure", Failure: kind.RunOnFailure(run.host.For("on-failure"), summary)}
	case run.Failure == nil && spec.NotifiesOnSuccess:
		run.Hook = &HookRun{Hook: "on-success", Failure: kind.RunOnSuccess(run.host.For("on-success"), summary)}
	}
	run.Logs, run.Stderr, run.Progress = run.host.Logs, run.host.Stderr.String(), run.host.Progress
	return run
}

// runStep runs one step to its end and reports whether the job goes on.
func (run *Run) runStep(kind *guest.Kind, key string, payload []byte, maxAttempts uint32, jobs *childJobs) bool {
	attempt := uint32(1)
	var (
		cursor  *string
		awaited guest.Awaited
	)
	for range MaxCallsPerStep {
		in := guest.StepInput{
			JobID:          LocalJobID,
			Step:           key,
			Attempt:        attempt,
			IdempotencyKey: LocalJobID + "/" + key,
			Payload:        payload,
			Prior:          append([]guest.PriorOutput(nil), run.Outputs...),
			Cursor:         cursor,
			Awaited:        awaited,
		}
		outcome := kind.RunStep(run.host.For(key), in)
		run.Calls = append(run.Calls, StepCall{Step: key, Attempt: int(attempt), Cursor: cursor, Awaited: awaited, Outcome: outcome})
		awaited = guest.Awaited{}
		switch outcome.Kind {
		case guest.OutcomeComplete:
			run.Outputs = append(run.Outputs, guest.PriorOutput{Step: key, Output: outcome.Output})
			run.host.Outputs[key] = outcome.Output
			return true
		case guest.OutcomeSkip:
			return true
		case guest.OutcomeMore:
			cursor = some(outcome.Checkpoint.Cursor)
		case guest.OutcomeSnooze:
		case guest.OutcomeRetryable, guest.OutcomeRefused:
			if outcome.Kind == guest.OutcomeRefused || attempt >= maxAttempts {
				run.Failure = &JobFailure{Step: key, Code: outcome.Failure.Code, Message: outcome.Failure.Message}
				return false
			}
			attempt++
			cursor = nil
		case guest.OutcomeAwaitChildren:
			f := outcome.FanOut
			settled := jobs.fanOut(f)
			results := make([]guest.ChildResult, len(settled))
			for i, child := range settled {
				results[i] = child.Result
			}
			awaited = guest.Awaited{Kind: guest.AwaitedChildren, Children: results}
			cursor = optional(f.Cursor)
			run.FanOuts = append(run.FanOuts, FanOutRun{Step: key, Attempt: int(attempt), Join: f.Join,
				Leftover: f.Leftover, Cursor: f.Cursor, Children: settled})
		case guest.OutcomeAwaitSignal:
			wait := outcome.Signal
			body, ok := run.takeSignal(wait.Name)
			awaited = guest.Awaited{Kind: guest.AwaitedSignalTimeout}
			if ok {
				awaited = guest.Awaited{Kind: guest.AwaitedSignal, Signal: body}
			}
			cursor = optional(wait.Cursor)
			run.SignalWaits = append(run.SignalWaits, SignalWaitRun{Step: key, Attempt: int(attempt), Name: wait.Name,
				TimeoutSecs: wait.TimeoutSecs, Body: body, Arrived: ok})
		}
	}
	run.Failure = &JobFailure{Step: key, Code: "call-limit",
		Message: fmt.Sprintf("step `%s` did not settle in %d calls", key, MaxCallsPerStep)}
	return false
}

func (run *Run) takeSignal(name string) ([]byte, bool) {
	for i, s := range run.SignalsLeft {
		if s.Name == name {
			run.SignalsLeft = append(run.SignalsLeft[:i:i], run.SignalsLeft[i+1:]...)
			return s.Body, true
		}
	}
	return nil, false
}

// keyedChild is what a child with an idempotency key became, so that the key names one
// job however often it is asked for.
type keyedChild struct {
	id    string
	ended *ChildOutcome
}

type childJobs struct {
	handler func(kind string, input []byte) ChildOutcome
	created int
	byKey   map[string]keyedChild
}

func (jobs *childJobs) fanOut(f guest.FanOut) []ChildRun {
	settle := len(f.Children)
	switch f.Join.Mode {
	case guest.JoinFirst:
		settle = 1
	case guest.JoinByCount:
		settle = int(f.Join.N)
	}
	runs := make([]ChildRun, len(f.Children))
	for i, child := range f.Children {
		input, _ := child.InputBytes() // AwaitChildren encoded it already
		known, isKnown := jobs.byKey[child.IdempotencyKey]
		if child.IdempotencyKey == "" || !isKnown {
			jobs.created++
			known = keyedChild{id: LocalChildID(jobs.created)}
		}
		ended := known.ended
		if ended == nil && i < settle {
			outcome := jobs.settle(child.Kind, input)
			ended = &outcome
		}
		// What the job is once the join is met: open ones run on, or are cancelled.
		after := ended
		if ended == nil && f.Leftover == guest.LeftoverCancel {
			cancelled := Cancelled()
			after = &cancelled
		}
		if child.IdempotencyKey != "" {
			jobs.byKey[child.IdempotencyKey] = keyedChild{id: known.id, ended: after}
		}
		result := guest.ChildResult{JobID: known.id, Kind: child.Kind}
		if ended != nil {
			result.State, result.Output, result.Failure = ended.State, ended.Output, ended.Failure
		}
		runs[i] = ChildRun{Child: child, Input: input, Result: result}
	}
	return runs
}

func (jobs *childJobs) settle(kind string, input []byte) ChildOutcome {
	if jobs.handler != nil {
		return jobs.handler(kind, input)
	}
	return ChildOutcome{State: guest.ChildSucceeded, Output: input}
}

func mustEncode(v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("guesttest: %T is not JSON-able: %v", v, err))
	}
	return b
}

func some(s string) *string { return &s }

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
