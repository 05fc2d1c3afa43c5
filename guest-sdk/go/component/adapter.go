//go:build wasip1

// Package export_spindle_job_kind is the one place the generated bindings meet the SDK:
// it implements the `kind` export over a [guest.Kind] and [guest.Host] over the
// `host` and `config` imports and `wasi:http/outgoing-handler` (outbound.go).
//
// build-kind.sh copies these files into the bindings' `export_spindle_job_kind` package
// (wit-bindgen's Go generator expects the export there) beside a generated `kind.go`
// that sets `exported` to the kind's value. It is built only for wasip1, so the SDK's
// packages and a kind's tests stay native.
package export_spindle_job_kind

import (
	"fmt"
	"os"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"spindle.dev/guest"
	"wit_component/spindle_job_config"
	"wit_component/spindle_job_host"
	wit "wit_component/spindle_job_types"
)

type hookResult = witTypes.Result[witTypes.Unit, wit.Failure]

// Describe is the `describe` export.
func Describe() wit.KindSpec {
	if err := exported.Validate(); err != nil {
		// The host refuses the spec at deploy; say why where the developer looks.
		fmt.Fprintf(os.Stderr, "kind %q is invalid: %v\n", exported.Name, err)
	}
	spec := exported.Spec()
	steps := make([]wit.StepSpec, len(spec.Steps))
	for i, s := range spec.Steps {
		steps[i] = wit.StepSpec{Key: s.Key, Weight: s.Weight, OutputSchema: optionalString(s.OutputSchema)}
	}
	return wit.KindSpec{
		Name:        spec.Name,
		Steps:       steps,
		Cancellable: spec.Cancellable,
		Retry: wit.RetryPolicy{
			MaxAttempts:      spec.Retry.MaxAttempts,
			InitialBackoffMs: guest.Millis(spec.Retry.InitialBackoff),
			MaxBackoffMs:     guest.Millis(spec.Retry.MaxBackoff),
		},
		HasFailureEffect:  spec.HasFailureEffect,
		NotifiesOnSuccess: spec.NotifiesOnSuccess,
		InputSchema:       optionalString(spec.InputSchema),
	}
}

// RunStep is the `run-step` export.
func RunStep(in wit.StepInput) wit.StepOutcome {
	input := guest.StepInput{
		JobID:          in.JobId,
		Step:           in.Step,
		Attempt:        in.Attempt,
		IdempotencyKey: in.IdempotencyKey,
		Payload:        in.Payload,
		Prior:          priorOutputs(in.Prior),
	}
	if in.Cursor.Tag() == witTypes.OptionSome {
		cursor := in.Cursor.Some()
		input.Cursor = &cursor
	}
	if in.Awaited.Tag() == witTypes.OptionSome {
		input.Awaited = awaited(in.Awaited.Some())
	}
	return stepOutcome(exported.RunStep(bindings{}, input))
}

// OnFailure is the `on-failure` export.
func OnFailure(job wit.JobSummary) hookResult {
	return hook(exported.RunOnFailure(bindings{}, summary(job)))
}

// OnSuccess is the `on-success` export.
func OnSuccess(job wit.JobSummary) hookResult {
	return hook(exported.RunOnSuccess(bindings{}, summary(job)))
}

func summary(job wit.JobSummary) guest.JobSummary {
	s := guest.JobSummary{JobID: job.JobId, Payload: job.Payload, Outputs: priorOutputs(job.Outputs)}
	if job.Failure.Tag() == witTypes.OptionSome {
		f := job.Failure.Some()
		s.Failure = &guest.Failure{Code: f.Code, Message: f.Message}
	}
	return s
}

func hook(failure *guest.Failure) hookResult {
	if failure == nil {
		return witTypes.Ok[witTypes.Unit, wit.Failure](witTypes.Unit{})
	}
	return witTypes.Err[witTypes.Unit](wit.Failure{Code: failure.Code, Message: failure.Message})
}

func priorOutputs(prior []wit.PriorOutput) []guest.PriorOutput {
	out := make([]guest.PriorOutput, len(prior))
	for i, p := range prior {
		out[i] = guest.PriorOutput{Step: p.Step, Output: p.Output}
	}
	return out
}

func awaited(a wit.Awaited) guest.Awaited {
	switch a.Tag() {
	case wit.AwaitedChildren:
		results := a.Children()
		children := make([]guest.ChildResult, len(results))
		for i, r := range results {
			child := guest.ChildResult{JobID: r.JobId, Kind: r.Kind}
			if r.State.Tag() == witTypes.OptionSome {
				child.State = guest.ChildState(r.State.Some() + 1) // the SDK's zero is "open"
			}
			if r.Output.Tag() == witTypes.OptionSome {
				child.Output = r.Output.Some()
			}
			if r.Failure.Tag() == witTypes.OptionSome {
				f := r.Failure.Some()
				child.Failure = &guest.Failure{Code: f.Code, Message: f.Message}
			}
			children[i] = child
		}
		return guest.Awaited{Kind: guest.AwaitedChildren, Children: children}
	case wit.AwaitedSignal:
		return guest.Awaited{Kind: guest.AwaitedSignal, Signal: a.Signal()}
	default:
		return guest.Awaited{Kind: guest.AwaitedSignalTimeout}
	}
}

func stepOutcome(o guest.Outcome) wit.StepOutcome {
	switch o.Kind {
	case guest.OutcomeComplete:
		return wit.MakeStepOutcomeComplete(o.Output)
	case guest.OutcomeSkip:
		return wit.MakeStepOutcomeSkip(o.Reason)
	case guest.OutcomeRetryable:
		return wit.MakeStepOutcomeRetryable(wit.Failure{Code: o.Failure.Code, Message: o.Failure.Message})
	case guest.OutcomeRefused:
		return wit.MakeStepOutcomeRefused(wit.Failure{Code: o.Failure.Code, Message: o.Failure.Message})
	case guest.OutcomeMore:
		return wit.MakeStepOutcomeMore(checkpoint(o.Checkpoint))
	case guest.OutcomeSnooze:
		return wit.MakeStepOutcomeSnooze(o.SnoozeSecs)
	case guest.OutcomeAwaitChildren:
		return wit.MakeStepOutcomeAwaitChildren(fanOut(o.FanOut))
	case guest.OutcomeAwaitSignal:
		return wit.MakeStepOutcomeAwaitSignal(wit.SignalWait{
			Name: o.Signal.Name, TimeoutSecs: o.Signal.TimeoutSecs, Cursor: optionalString(o.Signal.Cursor),
		})
	}
	return wit.MakeStepOutcomeRefused(wit.Failure{Code: "invalid-outcome", Message: fmt.Sprintf("unknown outcome %d", o.Kind)})
}

func fanOut(f guest.FanOut) wit.FanOut {
	children := make([]wit.ChildSpec, len(f.Children))
	for i, c := range f.Children {
		input, _ := c.InputBytes() // guest.AwaitChildren encoded it already
		priority := witTypes.None[wit.Priority]()
		if c.Priority != guest.PriorityDefault {
			priority = witTypes.Some[wit.Priority](wit.Priority(c.Priority - 1))
		}
		children[i] = wit.ChildSpec{
			Kind:           c.Kind,
			Input:          input,
			IdempotencyKey: optionalString(c.IdempotencyKey),
			Priority:       priority,
			LeaseKeys:      c.LeaseKeys,
		}
	}
	join := wit.MakeJoinAll()
	switch f.Join.Mode {
	case guest.JoinFirst:
		join = wit.MakeJoinAny()
	case guest.JoinByCount:
		join = wit.MakeJoinCount(f.Join.N)
	}
	return wit.FanOut{Children: children, Join: join, Leftover: wit.Leftover(f.Leftover), Cursor: optionalString(f.Cursor)}
}

func checkpoint(c guest.Checkpoint) wit.Checkpoint {
	total := witTypes.None[uint64]()
	if c.Total != 0 {
		total = witTypes.Some(c.Total)
	}
	return wit.Checkpoint{Cursor: c.Cursor, Done: c.Done, Total: total}
}

func optionalString(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

// bindings is the host as the component's imports reach it.
type bindings struct{}

func (bindings) Log(level guest.Level, message string) {
	spindle_job_host.Log(wit.LogLevel(level), message)
}

func (bindings) Heartbeat(progress *guest.Checkpoint) guest.Heartbeat {
	p := witTypes.None[wit.Checkpoint]()
	if progress != nil {
		p = witTypes.Some(checkpoint(*progress))
	}
	return guest.Heartbeat(spindle_job_host.Heartbeat(p))
}

func (bindings) PriorOutput(step string) ([]byte, bool) {
	return unwrap(spindle_job_host.PriorOutput(step))
}

func (bindings) Setting(name string) (string, bool) { return unwrap(spindle_job_config.Get(name)) }

func (bindings) Secret(name string) (string, bool) { return unwrap(spindle_job_config.Secret(name)) }

func (bindings) HMACSHA256(secret string, message []byte) ([]byte, bool) {
	return unwrap(spindle_job_config.HmacSha256(secret, message))
}

func (bindings) Stderr(text string) { os.Stderr.WriteString(text) }

func unwrap[T any](o witTypes.Option[T]) (T, bool) {
	if o.Tag() == witTypes.OptionSome {
		return o.Some(), true
	}
	var zero T
	return zero, false
}
