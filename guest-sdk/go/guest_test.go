package guest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"testing"
	"time"

	"spindle.dev/guest"
	"spindle.dev/guest/guesttest"
)

type rows struct {
	Rows int `json:"rows"`
}

func call(h *guesttest.Host, in guest.StepInput) *guest.Call {
	if in.Step == "" {
		in.Step = "import"
	}
	return guest.NewCall(h.For(in.Step), in)
}

func cursor(s string) *string { return &s }

func TestReadsInputPriorAndCursorAsJSON(t *testing.T) {
	var h guesttest.Host
	c := call(&h, guest.StepInput{
		JobID: "0190-job", Attempt: 2, IdempotencyKey: "0190-job/import",
		Payload: []byte(`{"rows": 3}`),
		Prior:   []guest.PriorOutput{{Step: "validate", Output: []byte(`{"rows": 5}`)}},
		Cursor:  cursor(`{"rows": 7}`),
	})
	var in, prior, at rows
	if err := c.Input(&in); err != nil || in.Rows != 3 {
		t.Errorf("input %+v %v", in, err)
	}
	if err := c.Prior("validate", &prior); err != nil || prior.Rows != 5 {
		t.Errorf("prior %+v %v", prior, err)
	}
	if ok, err := c.CursorJSON(&at); !ok || err != nil || at.Rows != 7 {
		t.Errorf("cursor %+v %v %v", at, ok, err)
	}
	if c.Key() != "import" || c.Attempt() != 2 || c.IdempotencyKey() != "0190-job/import" || c.JobID() != "0190-job" {
		t.Errorf("identity %s %d %s %s", c.Key(), c.Attempt(), c.IdempotencyKey(), c.JobID())
	}
}

func code(err error) string {
	f, _ := guest.FailureOf(err)
	return f.Code
}

func TestBadJSONIsRefusedWithACodePerSource(t *testing.T) {
	var h guesttest.Host
	c := call(&h, guest.StepInput{
		Payload: []byte("{"), Prior: []guest.PriorOutput{{Step: "validate", Output: []byte("[]")}}, Cursor: cursor("x"),
		Awaited: guest.Awaited{Kind: guest.AwaitedSignal, Signal: []byte("1")},
	})
	var v rows
	_, cursorErr := c.CursorJSON(&v)
	_, signalErr := c.Signal(&v)
	for err, want := range map[error]string{
		c.Input(&v):              "invalid-input",
		c.Prior("validate", &v):  "invalid-prior",
		c.Prior("summarise", &v): "missing-prior",
		cursorErr:                "invalid-cursor",
		signalErr:                "invalid-signal",
	} {
		if got := code(err); got != want {
			t.Errorf("%v: code %q, want %q", err, got, want)
		}
	}
	var invalid *guest.InvalidInput
	if err := c.Input(&v); !errors.As(err, &invalid) || invalid.Message != "the job's input is not JSON (at byte 1)" {
		t.Errorf("input error %#v", err)
	}
}

func TestAPriorOutputMissingFromTheInputIsAskedOfTheHost(t *testing.T) {
	h := guesttest.Host{Outputs: map[string][]byte{"validate": []byte(`{"rows": 9}`)}}
	c := call(&h, guest.StepInput{})
	var v rows
	if err := c.Prior("validate", &v); err != nil || v.Rows != 9 {
		t.Errorf("prior %+v %v", v, err)
	}
	if ok, err := c.PriorIfCompleted("skipped", &v); ok || err != nil {
		t.Errorf("a skipped step: %v %v", ok, err)
	}
}

type strict struct {
	Amount int `json:"amount"`
}

func (s *strict) Validate() error {
	if s.Amount <= 0 {
		return errors.New("`amount` must be positive")
	}
	return nil
}

func TestMismatchesAndValidationNameThePlaceNotTheValue(t *testing.T) {
	var h guesttest.Host
	for payload, want := range map[string]string{
		`{"amount": "4111111111111111"}`: "the job's input does not fit guest_test.strict at `amount`: expected integer, got string",
		`[]`:                             "the job's input does not fit guest_test.strict: expected object, got array",
		`{"amount": -4111}`:              "the job's input does not fit guest_test.strict: `amount` must be positive",
	} {
		var v strict
		err := call(&h, guest.StepInput{Payload: []byte(payload)}).Input(&v)
		f, retryable := guest.FailureOf(err)
		if f.Code != "invalid-input" || retryable || f.Message != want || strings.Contains(f.Message, "4111") {
			t.Errorf("%s: %+v (retryable %v), want %q", payload, f, retryable, want)
		}
	}
}

func TestErrorsMapByTypeThroughWrapping(t *testing.T) {
	_, pathErr := fs.Stat(emptyFS{}, "x")
	for _, tc := range []struct {
		err       error
		want      guest.Failure
		retryable bool
	}{
		{&guest.Refused{Code: "card-declined", Message: "declined"}, guest.Failure{Code: "card-declined", Message: "declined"}, false},
		{fmt.Errorf("charging: %w", &guest.Retryable{Code: "psp-down", Message: "the PSP is down"}), guest.Failure{Code: "psp-down", Message: "the PSP is down"}, true},
		{&guest.InvalidInput{Message: "no"}, guest.Failure{Code: "invalid-input", Message: "no"}, false},
		{guest.ErrCancelled, guest.Failure{Code: "stopped", Message: "the step stopped as the host asked"}, true},
		{errors.New("boom"), guest.Failure{Code: guest.UncaughtCode, Message: "*errors.errorString: boom"}, true},
		{fmt.Errorf("reading config: %w", pathErr), guest.Failure{Code: guest.UncaughtCode, Message: "*fs.PathError: reading config: stat x: file does not exist"}, true},
	} {
		f, retryable := guest.FailureOf(tc.err)
		if f != tc.want || retryable != tc.retryable {
			t.Errorf("%v: %+v %v, want %+v %v", tc.err, f, retryable, tc.want, tc.retryable)
		}
	}
}

func TestHTTPErrorsMapAsInTheOtherSDKs(t *testing.T) {
	denied := &guest.HTTPError{Code: "HTTP-request-denied"}
	through := &url.Error{Op: "Post", URL: "http://elsewhere.test/x", Err: denied}
	for _, tc := range []struct {
		err       error
		want      guest.Failure
		retryable bool
	}{
		{denied, guest.Failure{Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}, false},
		{fmt.Errorf("notifying: %w", through), guest.Failure{Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}, false},
		{&guest.HTTPError{Code: "destination-IP-prohibited"}, guest.Failure{Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}, false},
		{&guest.HTTPError{Code: "HTTP-request-URI-invalid", Detail: "no host"}, guest.Failure{Code: "http-request-invalid", Message: "the outbound request is malformed"}, false},
		{&guest.HTTPError{Code: "connection-refused"}, guest.Failure{Code: "upstream-unavailable", Message: "the upstream service did not answer"}, true},
		{&guest.HTTPError{Code: "HTTP-response-timeout"}, guest.Failure{Code: "upstream-unavailable", Message: "the upstream service did not answer"}, true},
		{&guest.HTTPError{Code: "internal-error", Detail: "?"}, guest.Failure{Code: "upstream-unavailable", Message: "the upstream service did not answer"}, true},
		// The kind's own reading of the failure wins over the SDK's.
		{&guest.Refused{Code: "subscriber-gone", Message: "gone", Err: through}, guest.Failure{Code: "subscriber-gone", Message: "gone"}, false},
	} {
		f, retryable := guest.FailureOf(tc.err)
		if f != tc.want || retryable != tc.retryable {
			t.Errorf("%v: %+v %v, want %+v %v", tc.err, f, retryable, tc.want, tc.retryable)
		}
	}
	if !errors.Is(through, guest.ErrHTTPDenied) || errors.Is(through, guest.ErrHTTPInvalidRequest) {
		t.Error("the class is not seen through url.Error")
	}
	if through.Timeout() || !(&guest.HTTPError{Code: "DNS-timeout"}).Timeout() {
		t.Error("Timeout() is not the class's")
	}
	for err, want := range map[*guest.HTTPError]string{
		denied:                                  "HTTP-request-denied: the host's outbound policy does not allow this request",
		{Code: "DNS-error", Detail: "NXDOMAIN"}: "DNS-error: NXDOMAIN",
		{Code: "connection-refused"}:            "connection-refused",
	} {
		if err.Error() != want {
			t.Errorf("%q, want %q", err.Error(), want)
		}
	}
	var h guesttest.Host
	o := (&guest.Kind{Name: "k", Steps: []guest.Step{{Key: "import", Run: func(*guest.Call) (any, error) { return nil, through }}}}).
		RunStep(h.For("import"), guest.StepInput{Step: "import"})
	if o.Kind != guest.OutcomeRefused || len(h.Logs) != 1 ||
		h.Logs[0].Message != `step `+"`import`"+` refused http-request-denied: the outbound request is not allowed by policy (Post "http://elsewhere.test/x": HTTP-request-denied: the host's outbound policy does not allow this request)` {
		t.Errorf("outcome %+v, logs %+v", o, h.Logs)
	}
}

type emptyFS struct{}

func (emptyFS) Open(name string) (fs.File, error) {
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

func TestOutcomes(t *testing.T) {
	if o := guest.Complete(map[string]int{"rows": 3}); o.Kind != guest.OutcomeComplete || string(o.Output) != `{"rows":3}` {
		t.Errorf("complete %+v", o)
	}
	if o := guest.Complete([]byte("raw")); string(o.Output) != "raw" {
		t.Errorf("bytes go as they are: %q", o.Output)
	}
	if o := guest.Complete(nil); string(o.Output) != "null" {
		t.Errorf("nil is null: %q", o.Output)
	}
	if o := guest.Complete(make(chan int)); o.Kind != guest.OutcomeRefused || o.Failure.Code != "invalid-output" {
		t.Errorf("a channel: %+v", o)
	}
	if o := guest.Snooze(1500 * time.Millisecond); o.SnoozeSecs != 2 {
		t.Errorf("snooze rounds up: %d", o.SnoozeSecs)
	}
	if o := guest.More("10", 10, 100).WithCursor("20"); o.Checkpoint != (guest.Checkpoint{Cursor: "20", Done: 10, Total: 100}) {
		t.Errorf("more %+v", o.Checkpoint)
	}
	if o := guest.AwaitSignal("shipped", 72*time.Hour).WithCursorJSON([]int{1}); o.Signal != (guest.SignalWait{Name: "shipped", TimeoutSecs: 259200, Cursor: "[1]"}) {
		t.Errorf("await signal %+v", o.Signal)
	}
	o := guest.AwaitChildren(guest.FanOut{Children: []guest.Child{{Kind: "thumbnail", Input: map[string]int{"w": 64}}}, Join: guest.JoinCount(1)})
	if input, _ := o.FanOut.Children[0].InputBytes(); o.Kind != guest.OutcomeAwaitChildren || string(input) != `{"w":64}` {
		t.Errorf("await children %+v", o)
	}
	if o := guest.AwaitChildren(guest.FanOut{Children: []guest.Child{{Input: 1}}}); o.Failure.Code != "invalid-child" {
		t.Errorf("a child without a kind: %+v", o)
	}
}

func TestSpecDefaultsAndValidation(t *testing.T) {
	noop := func(*guest.Call) (any, error) { return nil, nil }
	k := &guest.Kind{Name: "noop", Steps: []guest.Step{{Key: "run", Run: noop}}, OnFailure: func(*guest.Job) error { return nil }}
	spec := k.Spec()
	if spec.Retry != guest.DefaultRetry || spec.Cancellable || !spec.HasFailureEffect || spec.NotifiesOnSuccess {
		t.Errorf("spec %+v", spec)
	}
	if err := k.Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
	bad := &guest.Kind{
		Steps:       []guest.Step{{Key: "a", Run: noop}, {Key: "a"}},
		Retry:       guest.RetryPolicy{MaxAttempts: 101},
		InputSchema: "[]",
	}
	err := bad.Validate()
	for _, want := range []string{"no name", `"a" is declared twice`, `"a" has no Run`, "MaxAttempts 101", "input schema: not a JSON object"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation %v lacks %q", err, want)
		}
	}
}

func TestAnUnknownStepIsRefused(t *testing.T) {
	k := &guest.Kind{Name: "k", Steps: []guest.Step{{Key: "run", Run: func(*guest.Call) (any, error) { return nil, nil }}}}
	var h guesttest.Host
	o := k.RunStep(h.For("other"), guest.StepInput{Step: "other"})
	if o.Kind != guest.OutcomeRefused || o.Failure.Code != "unknown-step" {
		t.Errorf("outcome %+v", o)
	}
}

func TestAPanicIsUncaughtWithItsStackOnStderr(t *testing.T) {
	k := &guest.Kind{Name: "k", Steps: []guest.Step{{Key: "run", Run: func(*guest.Call) (any, error) {
		var rows []int
		return rows[3], nil
	}}}}
	var h guesttest.Host
	o := k.RunStep(h.For("run"), guest.StepInput{Step: "run"})
	if o.Kind != guest.OutcomeRetryable || o.Failure.Code != guest.UncaughtCode ||
		o.Failure.Message != "runtime.boundsError: runtime error: index out of range [3] with length 0" {
		t.Errorf("outcome %+v", o)
	}
	stderr := h.Stderr.String()
	if !strings.HasPrefix(stderr, "panic in step `run`: runtime error: index out of range [3] with length 0 [recovered]\n\ngoroutine ") ||
		!strings.Contains(stderr, "\npanic(") || strings.Contains(stderr, "debug.Stack") || !strings.Contains(stderr, "guest_test.TestAPanic") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if msgs := h.Logs; len(msgs) != 1 || msgs[0].Level != guest.LevelWarn {
		t.Errorf("logs %+v", msgs)
	}
}

func TestAReturnedErrorIsLoggedWithItsCauseButReportsOnlyTheSafeParts(t *testing.T) {
	k := &guest.Kind{Name: "k", Steps: []guest.Step{{Key: "charge", Run: func(*guest.Call) (any, error) {
		return nil, &guest.Refused{Code: "card-declined", Message: "the card was declined", Err: errors.New("psp said 4111: do not honour")}
	}}}}
	var h guesttest.Host
	o := k.RunStep(h.For("charge"), guest.StepInput{Step: "charge"})
	if o.Failure != (guest.Failure{Code: "card-declined", Message: "the card was declined"}) {
		t.Errorf("failure %+v", o.Failure)
	}
	if want := "step `charge` refused card-declined: the card was declined (psp said 4111: do not honour)"; len(h.Logs) != 1 || h.Logs[0].Message != want {
		t.Errorf("logs %+v", h.Logs)
	}
	if h.Stderr.Len() != 0 {
		t.Errorf("a refusal writes no stderr: %q", h.Stderr.String())
	}
}

func TestHeartbeatsAndConfig(t *testing.T) {
	h := guesttest.Host{
		Heartbeats: []guest.Heartbeat{guest.Proceed, guest.StopCancelled},
		Settings:   map[string]string{"region": "eu"},
		Secrets:    map[string]string{"token": "s3cr3t"},
	}
	c := call(&h, guest.StepInput{})
	if err := c.KeepAlive(&guest.Checkpoint{Cursor: "1", Done: 1}); err != nil {
		t.Errorf("proceed: %v", err)
	}
	if err := c.KeepAlive(nil); !errors.Is(err, guest.ErrCancelled) || c.StopRequested() != guest.StopCancelled {
		t.Errorf("cancel: %v %v", err, c.StopRequested())
	}
	if region, ok := c.Config().Get("region"); !ok || region != "eu" {
		t.Errorf("setting %q %v", region, ok)
	}
	token, ok := c.Config().Secret("token")
	if !ok || token == "s3cr3t" || string(h.Reveal([]byte("Bearer "+token))) != "Bearer s3cr3t" {
		t.Errorf("secret placeholder %q", token)
	}
	if mac, ok := c.Config().HMACSHA256("token", []byte("m")); !ok || len(mac) != 32 {
		t.Errorf("hmac %x %v", mac, ok)
	}
	if _, ok := c.Config().Secret("unset"); ok {
		t.Error("an unset secret")
	}
	if len(h.Progress) != 1 || h.Progress[0].Done != 1 {
		t.Errorf("progress %+v", h.Progress)
	}
}

func TestChildResults(t *testing.T) {
	var h guesttest.Host
	c := call(&h, guest.StepInput{Awaited: guest.Awaited{Kind: guest.AwaitedChildren, Children: []guest.ChildResult{
		{JobID: "c1", State: guest.ChildSucceeded, Output: json.RawMessage(`{"rows": 2}`)},
		{JobID: "c2"},
	}}})
	children, ok := c.Children()
	if !ok || len(children) != 2 || children[1].State != guest.ChildOpen {
		t.Fatalf("children %+v", children)
	}
	var v rows
	if ok, err := children[0].OutputJSON(&v); !ok || err != nil || v.Rows != 2 {
		t.Errorf("output %+v %v %v", v, ok, err)
	}
	if _, ok := c.SignalBytes(); ok || c.SignalTimedOut() {
		t.Error("no signal")
	}
}
