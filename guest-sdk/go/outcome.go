package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// OutcomeKind is which of the WIT's step outcomes an [Outcome] is, in the WIT's order.
type OutcomeKind uint8

const (
	OutcomeComplete OutcomeKind = iota
	OutcomeSkip
	OutcomeRetryable
	OutcomeRefused
	OutcomeMore
	OutcomeSnooze
	OutcomeAwaitChildren
	OutcomeAwaitSignal
)

var outcomeNames = [...]string{"complete", "skip", "retryable", "refused", "more", "snooze", "await-children", "await-signal"}

func (k OutcomeKind) String() string {
	if int(k) < len(outcomeNames) {
		return outcomeNames[k]
	}
	return fmt.Sprintf("outcome(%d)", uint8(k))
}

// An Outcome is what one call of a step reports. Build one with [Complete], [Skip],
// [More], [Snooze], [AwaitChildren] or [AwaitSignal] (failures are errors, see
// [FailureOf]); the fields are for runners and tests to read. Only the field Kind names
// is meaningful.
type Outcome struct {
	Kind OutcomeKind
	// Output is a complete step's output (JSON by convention).
	Output []byte
	// Reason is why a step skipped; operator-safe.
	Reason string
	// Failure is a retryable or refused step's account.
	Failure Failure
	// Checkpoint is a `more` step's progress.
	Checkpoint Checkpoint
	// SnoozeSecs is how long a snoozing step waits.
	SnoozeSecs uint32
	// FanOut is an await-children step's children and join; each child's Input is
	// already encoded (a [json.RawMessage]).
	FanOut FanOut
	// Signal is an await-signal step's wait.
	Signal SignalWait
}

// SignalWait is a wait for the named signal, at most TimeoutSecs.
type SignalWait struct {
	Name        string
	TimeoutSecs uint32
	// Cursor is handed back on the next call; empty: none.
	Cursor string
}

// Complete finishes the step with v as its output: JSON-encoded, except []byte and
// [json.RawMessage], which go as they are. A value encoding/json cannot write (a
// channel, a cycle, NaN) is a bug in the kind, so it is refused `invalid-output` rather
// than retried.
func Complete(v any) Outcome {
	b, err := encode(v)
	if err != nil {
		return refusal("invalid-output", "the step's output is not serialisable as JSON")
	}
	return Outcome{Kind: OutcomeComplete, Output: b}
}

// CompleteBytes finishes the step with raw output bytes (not necessarily JSON).
func CompleteBytes(output []byte) Outcome { return Outcome{Kind: OutcomeComplete, Output: output} }

// Skip says the step does not apply to this job; the reason is shown to operators.
func Skip(reason string) Outcome { return Outcome{Kind: OutcomeSkip, Reason: reason} }

// More saves progress: the host calls the step again (same attempt) with cursor. done and
// total are units of work, for progress; total 0 means not known.
func More(cursor string, done, total uint64) Outcome {
	return Outcome{Kind: OutcomeMore, Checkpoint: Checkpoint{Cursor: cursor, Done: done, Total: total}}
}

// MoreJSON is [More] with the cursor encoded as JSON; read it back with
// [Call.CursorJSON]. A cursor that cannot be encoded is refused `invalid-cursor`.
func MoreJSON(cursor any, done, total uint64) Outcome {
	b, err := json.Marshal(cursor)
	if err != nil {
		return refusal("invalid-cursor", "the step's cursor is not serialisable as JSON")
	}
	return More(string(b), done, total)
}

// Snooze asks to be called again after d (whole seconds, rounded up); no attempt is
// consumed.
func Snooze(d time.Duration) Outcome { return Outcome{Kind: OutcomeSnooze, SnoozeSecs: seconds(d)} }

// AwaitChildren creates the fan-out's children and calls the step again (same attempt,
// with the fan-out's cursor) once its join is met; [Call.Children] then has their
// results. A child input that cannot be encoded, or a child without a kind, is refused
// `invalid-child`.
func AwaitChildren(f FanOut) Outcome {
	children := make([]Child, len(f.Children))
	for i, child := range f.Children {
		if child.Kind == "" {
			return refusal("invalid-child", fmt.Sprintf("child %d has no kind", i+1))
		}
		input, err := encode(child.Input)
		if err != nil {
			return refusal("invalid-child", fmt.Sprintf("the input of child %d is not serialisable as JSON", i+1))
		}
		child.Input = json.RawMessage(input)
		children[i] = child
	}
	f.Children = children
	return Outcome{Kind: OutcomeAwaitChildren, FanOut: f}
}

// AwaitSignal parks the step until the signal name is sent to the job or timeout passes
// (whole seconds, rounded up), then calls it again (same attempt): [Call.Signal] has the
// body, or [Call.SignalTimedOut] says it did not come.
func AwaitSignal(name string, timeout time.Duration) Outcome {
	return Outcome{Kind: OutcomeAwaitSignal, Signal: SignalWait{Name: name, TimeoutSecs: seconds(timeout)}}
}

// WithCursor sets the cursor the step is called again with, on an await outcome or a
// `more` (whose cursor it replaces); other outcomes are returned unchanged.
func (o Outcome) WithCursor(cursor string) Outcome {
	switch o.Kind {
	case OutcomeAwaitChildren:
		o.FanOut.Cursor = cursor
	case OutcomeAwaitSignal:
		o.Signal.Cursor = cursor
	case OutcomeMore:
		o.Checkpoint.Cursor = cursor
	}
	return o
}

// WithCursorJSON is [Outcome.WithCursor] with the cursor encoded as JSON.
func (o Outcome) WithCursorJSON(cursor any) Outcome {
	b, err := json.Marshal(cursor)
	if err != nil {
		return refusal("invalid-cursor", "the step's cursor is not serialisable as JSON")
	}
	return o.WithCursor(string(b))
}

func refusal(code, message string) Outcome {
	return Outcome{Kind: OutcomeRefused, Failure: Failure{Code: code, Message: message}}
}

// outcomeOf is the outcome a step function's value reports.
func outcomeOf(v any) Outcome {
	switch v := v.(type) {
	case Outcome:
		return v
	case *Outcome:
		if v != nil {
			return *v
		}
	}
	return Complete(v)
}

func encode(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.RawMessage:
		if v == nil {
			return []byte("null"), nil
		}
		return v, nil
	case []byte:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("no JSON")
	}
	return b, nil
}

func seconds(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	s := math.Ceil(d.Seconds())
	if s > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(s)
}
