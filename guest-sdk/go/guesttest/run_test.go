package guesttest_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"spindle.dev/guest"
	"spindle.dev/guest/guesttest"
)

// plan is what the spread kind fans out: one child per kind, passes times.
type plan struct {
	Kinds  []string `json:"kinds"`
	Join   string   `json:"join"`
	Keep   bool     `json:"keep"`
	Keyed  bool     `json:"keyed"`
	Passes int      `json:"passes"`
	Retry  bool     `json:"retry_after_first_pass"`
}

type seen struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	State   string          `json:"state"`
	Output  json.RawMessage `json:"output,omitempty"`
	Failure string          `json:"failure,omitempty"`
}

// spread fans out children, then completes with what it saw of the last pass; a second
// step shows the job goes on.
var spread = &guest.Kind{
	Name:  "spread",
	Retry: guest.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
	Steps: []guest.Step{
		{Key: "spread", Run: func(c *guest.Call) (any, error) {
			p := plan{Passes: 1}
			if err := c.Input(&p); err != nil {
				return nil, err
			}
			pass := 0
			if _, err := c.CursorJSON(&pass); err != nil {
				return nil, err
			}
			if children, ok := c.Children(); ok {
				if p.Retry && c.Attempt() == 1 {
					return nil, &guest.Retryable{Code: "flaky", Message: "once"}
				}
				if pass >= p.Passes {
					var out []seen
					for _, child := range children {
						s := seen{ID: child.JobID, Kind: child.Kind, State: child.State.String(), Output: child.Output}
						if child.Failure != nil {
							s.Failure = child.Failure.Code
						}
						out = append(out, s)
					}
					return out, nil
				}
			}
			f := guest.FanOut{}
			switch p.Join {
			case "any":
				f.Join = guest.JoinAny()
			case "", "all":
			default:
				var n uint32
				fmt.Sscan(p.Join, &n)
				f.Join = guest.JoinCount(n)
			}
			if p.Keep {
				f.Leftover = guest.LeftoverKeep
			}
			for i, kind := range p.Kinds {
				child := guest.Child{Kind: kind, Input: map[string]int{"index": i}}
				if p.Keyed {
					child.IdempotencyKey = fmt.Sprintf("k%d", i)
				}
				f.Children = append(f.Children, child)
			}
			return guest.AwaitChildren(f).WithCursorJSON(pass + 1), nil
		}},
		{Key: "after", Run: func(*guest.Call) (any, error) { return "after", nil }},
	},
}

// waiter waits for each signal its input names in turn, then completes with the bodies
// (null for a timeout).
var waiter = &guest.Kind{
	Name: "waiter",
	Steps: []guest.Step{{Key: "wait", Run: func(c *guest.Call) (any, error) {
		var names []string
		if err := c.Input(&names); err != nil {
			return nil, err
		}
		bodies := []json.RawMessage{}
		if _, err := c.CursorJSON(&bodies); err != nil {
			return nil, err
		}
		switch {
		case c.SignalTimedOut():
			bodies = append(bodies, json.RawMessage("null"))
		case c.Awaited().Kind == guest.AwaitedSignal:
			var body json.RawMessage
			if _, err := c.Signal(&body); err != nil {
				return nil, err
			}
			bodies = append(bodies, body)
		}
		if len(bodies) < len(names) {
			return guest.AwaitSignal(names[len(bodies)], time.Minute).WithCursorJSON(bodies), nil
		}
		return bodies, nil
	}}},
}

func output[T any](t *testing.T, run *guesttest.Run, step string) T {
	t.Helper()
	var v T
	if ok, err := run.Output(step, &v); !ok || err != nil {
		t.Fatalf("%s's output: %v %v (failure %+v)", step, ok, err, run.Failure)
	}
	return v
}

func states(t *testing.T, run *guesttest.Run) []string {
	var out []string
	for _, s := range output[[]seen](t, run, "spread") {
		out = append(out, s.State)
	}
	return out
}

func TestChildrenEchoTheirInputByDefault(t *testing.T) {
	run := guesttest.RunJob(spread, plan{Kinds: []string{"a", "b"}}, nil)
	want := []seen{
		{ID: guesttest.LocalChildID(1), Kind: "a", State: "succeeded", Output: json.RawMessage(`{"index":0}`)},
		{ID: guesttest.LocalChildID(2), Kind: "b", State: "succeeded", Output: json.RawMessage(`{"index":1}`)},
	}
	if got := output[[]seen](t, run, "spread"); !reflect.DeepEqual(got, want) {
		t.Errorf("seen %+v", got)
	}
	if got := output[string](t, run, "after"); got != "after" {
		t.Errorf("after %q", got)
	}
	second := run.CallsOf("spread")[1]
	if *second.Cursor != "1" || len(second.Awaited.Children) != 2 || run.FanOuts[0].Cursor != "1" {
		t.Errorf("second call %+v", second)
	}
}

func TestTheHandlerSettlesChildrenAndJoinsLeaveTheRestOpen(t *testing.T) {
	opts := &guesttest.Options{Children: func(kind string, _ []byte) guesttest.ChildOutcome {
		switch kind {
		case "fails":
			return guesttest.Failed("bad-image", "no")
		case "cancelled":
			return guesttest.Cancelled()
		}
		return guesttest.Succeeded(map[string]string{"kind": kind})
	}}
	for _, tc := range []struct {
		plan plan
		want []string
	}{
		{plan{Kinds: []string{"ok", "fails", "cancelled"}}, []string{"succeeded", "failed", "cancelled"}},
		{plan{Kinds: []string{"fails", "ok", "ok"}, Join: "any"}, []string{"failed", "open", "open"}},
		{plan{Kinds: []string{"ok", "ok", "ok"}, Join: "2", Keep: true}, []string{"succeeded", "succeeded", "open"}},
		{plan{Kinds: []string{"ok"}, Join: "5"}, []string{"succeeded"}},
	} {
		if got := states(t, guesttest.RunJob(spread, tc.plan, opts)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.plan, got, tc.want)
		}
	}
}

func TestAKeyedChildIsSettledOnce(t *testing.T) {
	settled := 0
	opts := &guesttest.Options{Children: func(_ string, input []byte) guesttest.ChildOutcome {
		settled++
		return guesttest.Succeeded(json.RawMessage(input))
	}}
	run := guesttest.RunJob(spread, plan{Kinds: []string{"a", "b"}, Passes: 3, Keyed: true}, opts)
	children := run.ChildrenOf("spread")
	if len(children) != 6 || children[0].Result.JobID != children[4].Result.JobID || settled != 2 {
		t.Errorf("%d children, %d settled", len(children), settled)
	}
	unkeyed := guesttest.RunJob(spread, plan{Kinds: []string{"a", "b"}, Passes: 2}, nil)
	if got := unkeyed.ChildrenOf("spread")[3].Result.JobID; got != guesttest.LocalChildID(4) {
		t.Errorf("unkeyed children are new each pass: %s", got)
	}
}

func TestAKeyedLeftoverStaysCancelledOrRunsOn(t *testing.T) {
	childStates := func(run *guesttest.Run) (out []string) {
		for _, c := range run.ChildrenOf("spread") {
			out = append(out, c.Result.State.String())
		}
		return out
	}
	cancelled := guesttest.RunJob(spread, plan{Kinds: []string{"a", "b"}, Join: "any", Keyed: true, Passes: 2}, nil)
	if got := childStates(cancelled); !reflect.DeepEqual(got, []string{"succeeded", "open", "succeeded", "cancelled"}) {
		t.Errorf("cancelled %v", got)
	}
	kept := guesttest.RunJob(spread, plan{Kinds: []string{"a", "b"}, Join: "any", Keyed: true, Keep: true, Passes: 2}, nil)
	if got := childStates(kept); !reflect.DeepEqual(got, []string{"succeeded", "open", "succeeded", "open"}) {
		t.Errorf("kept %v", got)
	}
}

func TestARetryAfterAnAwaitStartsOverWithoutCursorOrResults(t *testing.T) {
	run := guesttest.RunJob(spread, plan{Kinds: []string{"a"}, Retry: true}, nil)
	var got []string
	for _, c := range run.CallsOf("spread") {
		cursor := "-"
		if c.Cursor != nil {
			cursor = *c.Cursor
		}
		got = append(got, fmt.Sprintf("%d %s %v", c.Attempt, cursor, c.Awaited.Kind == guest.AwaitedChildren))
	}
	if want := []string{"1 - false", "1 1 true", "2 - false", "2 1 true"}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls %v", got)
	}
}

func TestSignalsAreConsumedInOrderByNameAndEachOnce(t *testing.T) {
	opts := &guesttest.Options{Signals: []guesttest.Signal{
		{Name: "shipped", Body: map[string]int{"n": 1}}, {Name: "other", Body: []byte("ignored")}, {Name: "shipped", Body: map[string]int{"n": 2}},
	}}
	run := guesttest.RunJob(waiter, []string{"shipped", "shipped", "shipped"}, opts)
	if got, _ := run.OutputBytes("wait"); string(got) != `[{"n":1},{"n":2},null]` {
		t.Errorf("bodies %s (failure %+v)", got, run.Failure)
	}
	if len(run.SignalWaits) != 3 || run.SignalWaits[2].Arrived || run.SignalWaits[0].TimeoutSecs != 60 {
		t.Errorf("waits %+v", run.SignalWaits)
	}
	if len(run.SignalsLeft) != 1 || run.SignalsLeft[0].Name != "other" {
		t.Errorf("left %+v", run.SignalsLeft)
	}
	bad := guesttest.RunJob(waiter, []string{"shipped"}, &guesttest.Options{Signals: []guesttest.Signal{{Name: "shipped", Body: []byte("not json")}}})
	if bad.Failure == nil || bad.Failure.Code != "invalid-signal" {
		t.Errorf("a body that is not JSON: %+v", bad.Failure)
	}
}

func TestRetriesRiseToTheBudgetAndHooksRun(t *testing.T) {
	var hookSaw *guest.Failure
	k := &guest.Kind{
		Name:  "flaky",
		Retry: guest.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
		Steps: []guest.Step{{Key: "call", Run: func(c *guest.Call) (any, error) {
			return nil, fmt.Errorf("attempt %d: %w", c.Attempt(), &guest.Retryable{Code: "upstream-unavailable", Message: "try again"})
		}}},
		OnFailure: func(job *guest.Job) error {
			hookSaw = job.Failure
			job.Logf(guest.LevelInfo, "compensating %s", job.JobID)
			return nil
		},
	}
	run := guesttest.RunJob(k, nil, nil)
	if run.State() != "failed" || len(run.Calls) != 3 || run.Calls[2].Attempt != 3 || run.Failure.Code != "upstream-unavailable" {
		t.Errorf("run %+v", run)
	}
	if run.Hook == nil || run.Hook.Hook != "on-failure" || run.Hook.Failure != nil || hookSaw == nil || hookSaw.Code != "upstream-unavailable" {
		t.Errorf("hook %+v saw %+v", run.Hook, hookSaw)
	}
	if got := run.LogMessages("on-failure"); len(got) != 1 || got[0] != "compensating "+guesttest.LocalJobID {
		t.Errorf("hook logs %v", got)
	}
}

func TestMoreCallsAgainWithTheCursorInTheSameAttempt(t *testing.T) {
	k := &guest.Kind{Name: "paged", Steps: []guest.Step{{Key: "import", Run: func(c *guest.Call) (any, error) {
		page := 0
		if _, err := c.CursorJSON(&page); err != nil {
			return nil, err
		}
		if page < 3 {
			c.Heartbeat(&guest.Checkpoint{Cursor: fmt.Sprint(page), Done: uint64(page), Total: 3})
			return guest.MoreJSON(page+1, uint64(page+1), 3), nil
		}
		return guest.Snooze(0).WithCursor("ignored"), nil
	}}}}
	// A snooze that never ends would loop: the runner stops at its call limit.
	run := guesttest.RunJob(k, nil, nil)
	if run.Failure == nil || run.Failure.Code != "call-limit" || run.Calls[3].Attempt != 1 || len(run.Progress) != 3 {
		t.Errorf("run failure %+v, %d calls", run.Failure, len(run.Calls))
	}
}

func TestAnInvalidKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	guesttest.RunJob(&guest.Kind{Name: "empty"}, nil, nil)
}
