package guest

import "fmt"

// StepInput is everything one call of a step receives, as a runner hands it to
// [Kind.RunStep].
type StepInput struct {
	JobID string
	Step  string
	// Attempt is 1 for the first attempt of the step, 2 for the first retry, ...
	Attempt uint32
	// IdempotencyKey is stable across the step's attempts (job id + step key).
	IdempotencyKey string
	// Payload is the job's input as submitted.
	Payload []byte
	// Prior holds the outputs of the steps completed so far, in declaration order; the
	// host may leave large ones out.
	Prior []PriorOutput
	// Cursor is the cursor of this attempt's last more or await outcome; nil: none.
	Cursor *string
	// Awaited is what the step waited for, when it is called again after an await.
	Awaited Awaited
}

// PriorOutput is the output of a step that completed earlier in the job.
type PriorOutput struct {
	Step   string
	Output []byte
}

// A Call is one call of one step of one job, as a [StepFunc] receives it: its input,
// the outputs before it, its cursor and what it awaited, and its line to the host.
type Call struct {
	in   StepInput
	host Host
	stop Heartbeat
}

func newCall(h Host, in StepInput) *Call { return &Call{in: in, host: h} }

// NewCall is a call of a step with input in against host h, for testing one step
// function directly (guesttest.NewCall builds both for you). It binds h as the host
// outbound HTTP goes through, and h stays bound (see [CurrentHost]).
func NewCall(h Host, in StepInput) *Call {
	bind(h)
	return newCall(h, in)
}

// JobID is the job's id (a UUID in text form).
func (c *Call) JobID() string { return c.in.JobID }

// Key is the key of the step being run.
func (c *Call) Key() string { return c.in.Step }

// Attempt is 1 for the step's first attempt, 2 for the first retry, ...
func (c *Call) Attempt() int { return int(c.in.Attempt) }

// IdempotencyKey is stable across the step's attempts: use it to make side effects
// idempotent, since a step can run more than once.
func (c *Call) IdempotencyKey() string { return c.in.IdempotencyKey }

// Payload is the job's input as submitted, raw.
func (c *Call) Payload() []byte { return c.in.Payload }

// Input decodes the job's input (JSON) into v, a pointer. Input that does not parse or
// does not fit v's type is an [*InvalidInput] (refused `invalid-input`), as is an error
// from v's Validate method, if it has one: return it as it is.
func (c *Call) Input(v any) error {
	return decode(c.in.Payload, v, "the job's input", "invalid-input")
}

// PriorBytes is the raw output of an earlier step of this job, if it completed: from
// this call's input, or else asked of the host, which has every output even when the
// input was capped.
func (c *Call) PriorBytes(step string) ([]byte, bool) {
	for _, p := range c.in.Prior {
		if p.Step == step {
			return p.Output, true
		}
	}
	return c.host.PriorOutput(step)
}

// Prior decodes an earlier step's JSON output into v. It is refused `missing-prior` if
// that step has not completed (skipped, or declared later), and is an [*InvalidInput]
// with code `invalid-prior` if the output does not fit.
func (c *Call) Prior(step string, v any) error {
	ok, err := c.PriorIfCompleted(step, v)
	if err == nil && !ok {
		return &Refused{Code: "missing-prior", Message: fmt.Sprintf("step `%s` has no output in this job", step)}
	}
	return err
}

// PriorIfCompleted is [Call.Prior] for a step that may have been skipped: false, and v
// untouched, if it has no output.
func (c *Call) PriorIfCompleted(step string, v any) (bool, error) {
	b, ok := c.PriorBytes(step)
	if !ok {
		return false, nil
	}
	return true, decode(b, v, fmt.Sprintf("the output of step `%s`", step), "invalid-prior")
}

// Cursor is the cursor of this attempt's last [More], [AwaitChildren] or [AwaitSignal]
// outcome, if any.
func (c *Call) Cursor() (string, bool) {
	if c.in.Cursor == nil {
		return "", false
	}
	return *c.in.Cursor, true
}

// CursorJSON decodes the cursor (see [MoreJSON]) into v; false on a call with no
// cursor. A cursor that does not parse is an [*InvalidInput] with code `invalid-cursor`.
func (c *Call) CursorJSON(v any) (bool, error) {
	cursor, ok := c.Cursor()
	if !ok {
		return false, nil
	}
	return true, decode([]byte(cursor), v, "the step's cursor", "invalid-cursor")
}

// Awaited is what the step waited for, when this call follows one of its await
// outcomes; its Kind is [AwaitedNothing] on any other call.
func (c *Call) Awaited() Awaited { return c.in.Awaited }

// Children are the results of the children the step fanned out, in the order it asked
// for them, when this call follows its [AwaitChildren].
func (c *Call) Children() ([]ChildResult, bool) {
	return c.in.Awaited.Children, c.in.Awaited.Kind == AwaitedChildren
}

// SignalBytes is the raw body of the signal the step waited for, when this call follows
// its [AwaitSignal] and the signal came.
func (c *Call) SignalBytes() ([]byte, bool) {
	return c.in.Awaited.Signal, c.in.Awaited.Kind == AwaitedSignal
}

// Signal decodes the awaited signal's body into v; false if this call follows no signal
// (a timeout, see [Call.SignalTimedOut], or no wait). A body that does not fit is an
// [*InvalidInput] with code `invalid-signal`.
func (c *Call) Signal(v any) (bool, error) {
	body, ok := c.SignalBytes()
	if !ok {
		return false, nil
	}
	return true, decode(body, v, "the signal's body", "invalid-signal")
}

// SignalTimedOut reports whether this call follows an [AwaitSignal] whose timeout passed
// before the signal came.
func (c *Call) SignalTimedOut() bool { return c.in.Awaited.Kind == AwaitedSignalTimeout }

// Heartbeat tells the host the step is alive (renewing its lease), with progress if
// not nil, and returns its answer. Long steps call it regularly and return once it
// says stop; see [Call.KeepAlive] for the error form.
func (c *Call) Heartbeat(progress *Checkpoint) Heartbeat {
	reply := c.host.Heartbeat(progress)
	if reply.ShouldStop() {
		c.stop = reply
	}
	return reply
}

// KeepAlive is a heartbeat that returns [ErrCancelled] or [ErrLeaseLost] when the host
// says stop, for loops that would rather return the error than check the reply.
func (c *Call) KeepAlive(progress *Checkpoint) error {
	switch c.Heartbeat(progress) {
	case StopCancelled:
		return ErrCancelled
	case StopLeaseLost:
		return ErrLeaseLost
	}
	return nil
}

// StopRequested is the stop answer any heartbeat of this call got, or [Proceed].
func (c *Call) StopRequested() Heartbeat { return c.stop }

// Log writes one line to the host's log, tagged with the job and step.
func (c *Call) Log(level Level, message string) { c.host.Log(level, message) }

// Logf writes one formatted line to the host's log.
func (c *Call) Logf(level Level, format string, args ...any) {
	c.host.Log(level, fmt.Sprintf(format, args...))
}

// Config is the deployment's settings and the tenant's secrets.
func (c *Call) Config() Config { return Config{c.host} }
