package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A Kind is a job kind: what it declares about itself, its step functions and hooks.
//
// The host instantiates the component afresh for every call, so a kind keeps no state
// between calls: what must survive goes in a step's output or cursor.
type Kind struct {
	// Name is the kind's name as deployed, e.g. `payment-saga`.
	Name string
	// Steps run one at a time in this order; every job runs them all.
	Steps []Step
	// Retry is how the host retries a step that ends retryable; the zero value means
	// [DefaultRetry].
	Retry RetryPolicy
	// Cancellable lets callers cancel the kind's jobs (default false, as in the other
	// SDKs: a kind says when stopping its jobs midway is safe); long steps should then
	// heartbeat and stop when told to.
	Cancellable bool
	// InputSchema is a JSON Schema (draft 2020-12, as text) a job's input must follow;
	// the host refuses a submission that does not before anything is queued. Empty: any
	// input is accepted.
	InputSchema string
	// OnFailure is the business failure effect (compensate, refund, release), called when
	// a job fails; setting it sets the spec's has-failure-effect. It runs at least once,
	// so it must be idempotent (the job id is stable).
	OnFailure func(job *Job) error
	// OnSuccess is called after a job succeeds; setting it sets notifies-on-success.
	OnSuccess func(job *Job) error
}

// A Step is one declared step of a kind and the function that runs it.
type Step struct {
	// Key names the step, unique within the kind, e.g. `authorise`.
	Key string
	// Weight is the step's share of the job's progress relative to the other steps';
	// 0 counts as 1.
	Weight uint32
	// OutputSchema is a JSON Schema (as text) the step's complete output follows, if set.
	OutputSchema string
	// Run runs one call of the step.
	Run StepFunc
}

// A StepFunc runs one call of a step. It returns an [Outcome], or any other value, which
// completes the step with that value as JSON ([]byte and [json.RawMessage] go as they
// are; nil is `null`). A non-nil error wins over the value: see [FailureOf].
type StepFunc func(c *Call) (any, error)

// A RetryPolicy says how the host retries a step that ends retryable: MaxAttempts in all
// (the first included, 1 to 100), the delay before the second attempt (at most an
// hour), doubling up to MaxBackoff (at most a day). Delays travel in whole milliseconds.
type RetryPolicy struct {
	MaxAttempts    uint32
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// DefaultRetry is three attempts, 1 s then 2 s apart: enough to ride out a blip without
// hiding a persistent fault for long (the Rust SDK's default). Kinds with side effects
// should choose deliberately.
var DefaultRetry = RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute}

// KindSpec is what the host reads from a kind once per deployed version.
type KindSpec struct {
	Name              string
	Steps             []StepSpec
	Cancellable       bool
	Retry             RetryPolicy
	HasFailureEffect  bool
	NotifiesOnSuccess bool
	// InputSchema is empty when the kind declares none.
	InputSchema string
}

// StepSpec is one declared step as the host sees it.
type StepSpec struct {
	Key    string
	Weight uint32
	// OutputSchema is empty when the step declares none.
	OutputSchema string
}

// The host's bounds on a spec; it refuses to deploy a kind outside them.
const (
	maxAttempts   = 100
	maxInitial    = time.Hour
	maxBackoff    = 24 * time.Hour
	maxSchemaSize = 64 << 10
)

// Spec is the kind's description as the host receives it.
func (k *Kind) Spec() KindSpec {
	steps := make([]StepSpec, len(k.Steps))
	for i, s := range k.Steps {
		steps[i] = StepSpec{Key: s.Key, Weight: s.Weight, OutputSchema: s.OutputSchema}
	}
	retry := k.Retry
	if retry == (RetryPolicy{}) {
		retry = DefaultRetry
	}
	return KindSpec{
		Name:              k.Name,
		Steps:             steps,
		Cancellable:       k.Cancellable,
		Retry:             retry,
		HasFailureEffect:  k.OnFailure != nil,
		NotifiesOnSuccess: k.OnSuccess != nil,
		InputSchema:       k.InputSchema,
	}
}

// Validate reports what the host would refuse at deploy (`component.invalid-spec`) or
// what could not run: no name, no steps, a missing or repeated key, a step without a
// function, a retry policy out of bounds, a schema that is not a JSON object.
func (k *Kind) Validate() error {
	var errs []error
	if k.Name == "" {
		errs = append(errs, errors.New("the kind has no name"))
	}
	if len(k.Steps) == 0 {
		errs = append(errs, fmt.Errorf("kind %q declares no step", k.Name))
	}
	seen := map[string]bool{}
	for i, s := range k.Steps {
		switch {
		case s.Key == "":
			errs = append(errs, fmt.Errorf("step %d has no key", i+1))
		case seen[s.Key]:
			errs = append(errs, fmt.Errorf("step %q is declared twice", s.Key))
		}
		seen[s.Key] = true
		if s.Run == nil {
			errs = append(errs, fmt.Errorf("step %q has no Run function", s.Key))
		}
		if err := checkSchema(s.OutputSchema); err != nil {
			errs = append(errs, fmt.Errorf("the output schema of step %q: %w", s.Key, err))
		}
	}
	r := k.Spec().Retry
	if r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts {
		errs = append(errs, fmt.Errorf("retry: MaxAttempts %d is not within 1 to %d", r.MaxAttempts, maxAttempts))
	}
	if r.InitialBackoff < 0 || r.InitialBackoff > maxInitial {
		errs = append(errs, fmt.Errorf("retry: InitialBackoff %s is not within 0 to %s", r.InitialBackoff, maxInitial))
	}
	if r.MaxBackoff < 0 || r.MaxBackoff > maxBackoff {
		errs = append(errs, fmt.Errorf("retry: MaxBackoff %s is not within 0 to %s", r.MaxBackoff, maxBackoff))
	}
	if err := checkSchema(k.InputSchema); err != nil {
		errs = append(errs, fmt.Errorf("the input schema: %w", err))
	}
	return errors.Join(errs...)
}

func checkSchema(schema string) error {
	if schema == "" {
		return nil
	}
	if len(schema) > maxSchemaSize {
		return fmt.Errorf("%d bytes, more than %d", len(schema), maxSchemaSize)
	}
	var object map[string]json.RawMessage
	if err := json.Unmarshal([]byte(schema), &object); err != nil || object == nil {
		return errors.New("not a JSON object")
	}
	return nil
}

// Millis is d in whole milliseconds as the wire carries them, clamped to a u32.
func Millis(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 0:
		return 0
	case ms > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(ms)
}

func (k *Kind) step(key string) *Step {
	for i := range k.Steps {
		if k.Steps[i].Key == key {
			return &k.Steps[i]
		}
	}
	return nil
}

// RunStep runs one call of the step `in.Step` names against host h and reports its
// outcome. It never panics: a step's error or panic becomes a failure (see
// [FailureOf]). Runners call it (the component's adapter, guesttest); kinds do not.
func (k *Kind) RunStep(h Host, in StepInput) Outcome {
	c := newCall(h, in)
	context := fmt.Sprintf("step `%s`", in.Step)
	s := k.step(in.Step)
	if s == nil || s.Run == nil {
		err := &Refused{Code: "unknown-step", Message: "the kind does not implement this step",
			Err: fmt.Errorf("step key %q", in.Step)}
		return failed(h, context, err)
	}
	value, err := runGuarded(h, context, func() (any, error) { return s.Run(c) })
	if err != nil {
		return failed(h, context, err)
	}
	return outcomeOf(value)
}

// RunOnFailure runs the kind's OnFailure hook for job and reports its failure, or nil
// if it succeeded or the kind has none. Like [Kind.RunStep], it never panics.
func (k *Kind) RunOnFailure(h Host, job JobSummary) *Failure {
	return runHook(h, "on-failure", k.OnFailure, job)
}

// RunOnSuccess runs the kind's OnSuccess hook for job, as [Kind.RunOnFailure] does.
func (k *Kind) RunOnSuccess(h Host, job JobSummary) *Failure {
	return runHook(h, "on-success", k.OnSuccess, job)
}

func runHook(h Host, name string, hook func(*Job) error, job JobSummary) *Failure {
	if hook == nil {
		return nil
	}
	_, err := runGuarded(h, name, func() (any, error) { return nil, hook(&Job{JobSummary: job, host: h}) })
	if err == nil {
		return nil
	}
	o := failed(h, name, err)
	return &o.Failure
}
