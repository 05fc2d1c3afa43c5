package guesttest

import (
	"spindle.dev/guest"
)

// Run is what happened to a job [RunJob] ran.
type Run struct {
	Kind string
	// Calls are every call of a step, in order.
	Calls []StepCall
	// Outputs are the outputs of the steps that completed, in order.
	Outputs []guest.PriorOutput
	// Failure is why the job failed, if it did.
	Failure *JobFailure
	// Hook is the failure or success hook, if the kind declares the one that applied.
	Hook        *HookRun
	FanOuts     []FanOutRun
	SignalWaits []SignalWaitRun
	// SignalsLeft are the queued signals no wait consumed.
	SignalsLeft []QueuedSignal
	// Logs are every line the kind logged.
	Logs []LogLine
	// Stderr is what the kind wrote to stderr: panic reports and uncaught errors.
	Stderr string
	// Progress is what its heartbeats reported.
	Progress []guest.Checkpoint

	host *Host
}

// StepCall is one call of a step and what it reported.
type StepCall struct {
	Step    string
	Attempt int
	// Cursor is the cursor the call received; nil: none.
	Cursor  *string
	Awaited guest.Awaited
	Outcome guest.Outcome
}

// JobFailure is why a job failed: the step, and its failure's code and message.
type JobFailure struct {
	Step    string
	Code    string
	Message string
}

// HookRun is a hook the kind declared and how it went: Failure is nil if it succeeded.
type HookRun struct {
	Hook    string
	Failure *guest.Failure
}

// FanOutRun is one await-children outcome and how its children were settled.
type FanOutRun struct {
	Step     string
	Attempt  int
	Join     guest.Join
	Leftover guest.Leftover
	Cursor   string
	Children []ChildRun
}

// ChildRun is one child of a fan-out: what the step asked for and what it was told.
type ChildRun struct {
	Child  guest.Child
	Input  []byte
	Result guest.ChildResult
}

// SignalWaitRun is one await-signal outcome and how it ended.
type SignalWaitRun struct {
	Step        string
	Attempt     int
	Name        string
	TimeoutSecs uint32
	// Body is the signal's, if Arrived; else the wait timed out.
	Body    []byte
	Arrived bool
}

// QueuedSignal is a signal with its body encoded.
type QueuedSignal struct {
	Name string
	Body []byte
}

// State is `succeeded` or `failed`, as the host would settle the job.
func (r *Run) State() string {
	if r.Failure != nil {
		return "failed"
	}
	return "succeeded"
}

// Succeeded reports whether the job succeeded.
func (r *Run) Succeeded() bool { return r.Failure == nil }

// OutputBytes is a completed step's output; false if it did not complete.
func (r *Run) OutputBytes(step string) ([]byte, bool) {
	for _, o := range r.Outputs {
		if o.Step == step {
			return o.Output, true
		}
	}
	return nil, false
}

// Output decodes a completed step's JSON output into v; false if it did not complete.
func (r *Run) Output(step string, v any) (bool, error) {
	job := guest.Job{JobSummary: guest.JobSummary{Outputs: r.Outputs}}
	return job.Output(step, v)
}

// CallsOf are the calls of one step, in order.
func (r *Run) CallsOf(step string) []StepCall {
	var calls []StepCall
	for _, c := range r.Calls {
		if c.Step == step {
			calls = append(calls, c)
		}
	}
	return calls
}

// ChildrenOf are the children one step fanned out, over all its fan-outs, in order.
func (r *Run) ChildrenOf(step string) []ChildRun {
	var children []ChildRun
	for _, f := range r.FanOuts {
		if f.Step == step {
			children = append(children, f.Children...)
		}
	}
	return children
}

// LogMessages are the logged messages, of the given steps (or hooks) only if any.
func (r *Run) LogMessages(steps ...string) []string {
	var messages []string
	for _, line := range r.Logs {
		if len(steps) == 0 || contains(steps, line.Step) {
			messages = append(messages, line.Message)
		}
	}
	return messages
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
