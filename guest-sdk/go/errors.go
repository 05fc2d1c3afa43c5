package guest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"unicode/utf8"
)

// Failure is an operator-safe account of a failure: both fields are shown to tenants and
// operators, so they never carry secrets or transient detail (put those in an error's
// Err, which goes to the log only).
type Failure struct {
	// Code is stable and machine-readable, e.g. `card-declined`.
	Code string
	// Message is a short human explanation, safe to display.
	Message string
}

// Refused is a permanent failure: the step and the job fail without retry. Err, if set,
// is the cause; it is logged, never shown to the tenant.
type Refused struct {
	Code    string
	Message string
	Err     error
}

func (e *Refused) Error() string { return describe("refused", e.Code, e.Message, e.Err) }
func (e *Refused) Unwrap() error { return e.Err }

// Retryable is a transient failure: the host retries the step while the kind's budget
// lasts. Err, if set, is the cause; it is logged, never shown to the tenant.
type Retryable struct {
	Code    string
	Message string
	Err     error
}

func (e *Retryable) Error() string { return describe("retryable", e.Code, e.Message, e.Err) }
func (e *Retryable) Unwrap() error { return e.Err }

// InvalidInput says data a step was handed does not parse or does not fit. Retrying the
// same bytes cannot help, so it is refused, with Code `invalid-input` unless set (the
// SDK's helpers use `invalid-prior`, `invalid-cursor`, `invalid-signal`,
// `invalid-child-output` for the other sources). Message names the place and the
// mismatch, never the value (it may be a card number); Err keeps the parser's text for
// the log.
type InvalidInput struct {
	Code    string
	Message string
	Err     error
}

func (e *InvalidInput) Error() string { return describe("refused", e.code(), e.Message, e.Err) }
func (e *InvalidInput) Unwrap() error { return e.Err }

func (e *InvalidInput) code() string {
	if e.Code == "" {
		return "invalid-input"
	}
	return e.Code
}

// ErrCancelled and ErrLeaseLost are what [Call.KeepAlive] returns when the host says
// stop. Returned from a step they report retryable `stopped`, which the host ignores: it
// settles the job as it decided.
var (
	ErrCancelled = errors.New("the job is being cancelled")
	ErrLeaseLost = errors.New("this host no longer holds the job's lease")
)

// UncaughtCode is the code of the retryable failure that any other error or a panic
// becomes: retryable because an unforeseen error may well be transient, while the retry
// budget bounds a deterministic one.
const UncaughtCode = "uncaught-exception"

// maxUncaughtMessage bounds an uncaught failure's message: it is a short explanation.
const maxUncaughtMessage = 500

func describe(disposition, code, message string, cause error) string {
	text := fmt.Sprintf("%s %s: %s", disposition, code, message)
	if cause != nil {
		text += " (" + cause.Error() + ")"
	}
	return text
}

// FailureOf is the failure an error escaping a step or hook reports, and whether the
// host may retry it: [*Refused] and [*InvalidInput] are refused, [*Retryable] retried
// (found anywhere in the error's chain, so wrapping with %w keeps them); an
// [*HTTPError] (net/http's *url.Error wraps it) is refused `http-request-denied` or
// `http-request-invalid` when the request was denied or malformed, else retryable
// `upstream-unavailable`; [ErrCancelled] and [ErrLeaseLost] are retryable `stopped`;
// anything else is retryable [UncaughtCode] with the message `<type>: <message>`, the
// type being that of the first error in the chain that fmt.Errorf did not merely wrap
// (`*fs.PathError: reading config: open x: no such file or directory`).
func FailureOf(err error) (f Failure, retryable bool) {
	var (
		invalid  *InvalidInput
		refused  *Refused
		retryErr *Retryable
		httpErr  *HTTPError
	)
	switch {
	case errors.As(err, &invalid):
		return Failure{Code: invalid.code(), Message: invalid.Message}, false
	case errors.As(err, &refused):
		return Failure{Code: refused.Code, Message: refused.Message}, false
	case errors.As(err, &retryErr):
		return Failure{Code: retryErr.Code, Message: retryErr.Message}, true
	case errors.As(err, &httpErr):
		return httpErr.stepFailure()
	case errors.Is(err, ErrCancelled), errors.Is(err, ErrLeaseLost):
		return Failure{Code: "stopped", Message: "the step stopped as the host asked"}, true
	}
	return Failure{Code: UncaughtCode, Message: clip(typeName(cause(err)) + ": " + err.Error())}, true
}

// cause is the first error in err's chain that is not fmt.Errorf's wrapping of another:
// the error that says what went wrong (`*fs.PathError`, not `*fmt.wrapError`).
func cause(err error) error {
	for {
		switch typeName(err) {
		case "*fmt.wrapError", "*fmt.wrapErrors":
			if next := errors.Unwrap(err); next != nil {
				err = next
				continue
			}
			if multi, ok := err.(interface{ Unwrap() []error }); ok && len(multi.Unwrap()) > 0 {
				err = multi.Unwrap()[0]
				continue
			}
		}
		return err
	}
}

// A panicked step's recovered value, as an error whose text is Go's own.
type panicked struct {
	value any
	stack []byte
}

func (p *panicked) Error() string { return fmt.Sprint(p.value) }

// Message is `<type>: <text>` for an error value (`runtime.boundsError: index out of
// range [3] with length 0`), `panic: <text>` for any other.
func (p *panicked) message() string {
	if err, ok := p.value.(error); ok {
		return typeName(err) + ": " + err.Error()
	}
	return "panic: " + fmt.Sprint(p.value)
}

// runGuarded runs f with h as the host outbound requests go through, turning a panic
// into an error after writing Go's panic report (the value and the goroutine's stack)
// to the host's stderr.
func runGuarded(h Host, context string, f func() (any, error)) (value any, err error) {
	defer bind(bind(h))
	defer func() {
		if v := recover(); v != nil {
			p := &panicked{value: v, stack: panicStack(debug.Stack())}
			h.Stderr(fmt.Sprintf("panic in %s: %v [recovered]\n\n%s", context, v, p.stack))
			value, err = nil, p
		}
	}()
	return f()
}

// panicStack is a goroutine's stack from the panic on, as Go's own panic report shows
// it: without the frames of the recovery that took it.
func panicStack(stack []byte) []byte {
	header, rest, ok := bytes.Cut(stack, []byte("\n"))
	if at := bytes.Index(rest, []byte("\npanic(")); ok && at >= 0 {
		return append(append(header, '\n'), rest[at+1:]...)
	}
	return stack
}

// failed reports err as the outcome it means, logging the detail the tenant must not see.
func failed(h Host, context string, err error) Outcome {
	var p *panicked
	if errors.As(err, &p) {
		f := Failure{Code: UncaughtCode, Message: clip(p.message())}
		h.Log(LevelWarn, fmt.Sprintf("%s retryable %s: %s", context, f.Code, f.Message))
		return Outcome{Kind: OutcomeRetryable, Failure: f}
	}
	f, retryable := FailureOf(err)
	disposition, kind := "refused", OutcomeRefused
	if retryable {
		disposition, kind = "retryable", OutcomeRetryable
	}
	detail := f.Message
	if f.Code == UncaughtCode {
		h.Stderr(fmt.Sprintf("error in %s: %s\n", context, f.Message))
	} else if cause := causeOf(err); cause != nil {
		detail += " (" + cause.Error() + ")"
	}
	h.Log(LevelWarn, fmt.Sprintf("%s %s %s: %s", context, disposition, f.Code, detail))
	return Outcome{Kind: kind, Failure: f}
}

// causeOf is the log-only cause an SDK error carries, if any: for an outbound request
// that got no response, the whole error, whose text (net/http's) names the request.
func causeOf(err error) error {
	var (
		invalid  *InvalidInput
		refused  *Refused
		retryErr *Retryable
		httpErr  *HTTPError
	)
	switch {
	case errors.As(err, &invalid):
		return invalid.Err
	case errors.As(err, &refused):
		return refused.Err
	case errors.As(err, &retryErr):
		return retryErr.Err
	case errors.As(err, &httpErr):
		return err
	}
	return nil
}

func typeName(v any) string {
	if v == nil {
		return "<nil>"
	}
	return reflect.TypeOf(v).String()
}

func clip(s string) string {
	if len(s) <= maxUncaughtMessage {
		return s
	}
	cut := maxUncaughtMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
