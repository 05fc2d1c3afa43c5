package greet

import (
	"encoding/json"
	"strings"
	"testing"

	"spindle.dev/guest"
	"spindle.dev/guest/guesttest"
)

func TestGreetsAda(t *testing.T) {
	run := guesttest.RunJob(Kind, map[string]any{"name": "Ada"}, nil)
	if !run.Succeeded() {
		t.Fatalf("failed: %+v\n%s", run.Failure, run.Stderr)
	}
	var delivered Delivered
	if ok, err := run.Output("deliver", &delivered); !ok || err != nil {
		t.Fatalf("deliver's output: %v %v", ok, err)
	}
	if delivered != (Delivered{Delivered: "Hello, Ada!", Attempt: 1}) {
		t.Errorf("delivered %+v", delivered)
	}
	if got, _ := run.OutputBytes("compose"); string(got) != `{"text":"Hello, Ada!"}` {
		t.Errorf("compose's output %s", got)
	}
	want := []string{"composing a greeting for Ada", "delivered Hello, Ada! (key " + guesttest.LocalJobID + "/deliver)"}
	if got := run.LogMessages(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs %q, want %q", got, want)
	}
}

func TestRefusesInputWithoutAName(t *testing.T) {
	for _, input := range []any{map[string]any{}, map[string]any{"name": ""}, map[string]any{"name": 7}, []any{}, []byte("not json")} {
		run := guesttest.RunJob(Kind, input, nil)
		if run.Failure == nil || run.Failure.Step != "compose" || run.Failure.Code != "invalid-input" {
			t.Errorf("%v: failure %+v", input, run.Failure)
		}
		if len(run.Calls) != 1 {
			t.Errorf("%v: a refusal is retried: %d calls", input, len(run.Calls))
		}
	}
}

func TestSaysWhatIsWrongWithoutQuotingTheInput(t *testing.T) {
	run := guesttest.RunJob(Kind, map[string]any{}, nil)
	if want := "the job's input does not fit greet.Input: `name` must be a non-empty string"; run.Failure.Message != want {
		t.Errorf("message %q, want %q", run.Failure.Message, want)
	}
	run = guesttest.RunJob(Kind, map[string]any{"name": 4111111111111111}, nil)
	if want := "the job's input does not fit greet.Input at `name`: expected string, got number"; run.Failure.Message != want {
		t.Errorf("message %q, want %q", run.Failure.Message, want)
	}
}

func TestAFlakyDeliverySucceedsOnTheSecondAttempt(t *testing.T) {
	run := guesttest.RunJob(Kind, map[string]any{"name": "Ada", "flaky": true}, nil)
	if !run.Succeeded() {
		t.Fatalf("failed: %+v", run.Failure)
	}
	var delivered Delivered
	run.Output("deliver", &delivered)
	if delivered.Attempt != 2 {
		t.Errorf("delivered at attempt %d", delivered.Attempt)
	}
	calls := run.CallsOf("deliver")
	if len(calls) != 2 || calls[0].Outcome.Kind != guest.OutcomeRetryable ||
		calls[0].Outcome.Failure != (guest.Failure{Code: "upstream-unavailable", Message: "the first attempt fails on purpose"}) {
		t.Errorf("deliver's calls %+v", calls)
	}
}

func TestAnExplosionIsAnUncaughtPanicRetriedToTheEnd(t *testing.T) {
	run := guesttest.RunJob(Kind, map[string]any{"name": "Ada", "explode": true}, nil)
	if run.Failure == nil || run.Failure.Step != "compose" || run.Failure.Code != guest.UncaughtCode {
		t.Fatalf("failure %+v", run.Failure)
	}
	if want := "runtime.plainError: assignment to entry in nil map"; run.Failure.Message != want {
		t.Errorf("message %q, want %q", run.Failure.Message, want)
	}
	var attempts []int
	for _, c := range run.Calls {
		attempts = append(attempts, c.Attempt)
	}
	if len(attempts) != 3 || attempts[2] != 3 {
		t.Errorf("attempts %v", attempts)
	}
	for _, want := range []string{"panic in step `compose`: assignment to entry in nil map", "goroutine ", "greet.compose("} {
		if !strings.Contains(run.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, run.Stderr)
		}
	}
}

func TestComposeOnItsOwn(t *testing.T) {
	var host guesttest.Host
	out, err := compose(host.NewCall("compose", map[string]string{"name": "Grace"}))
	if err != nil || out != (Composed{Text: "Hello, Grace!"}) {
		t.Errorf("compose: %v %v", out, err)
	}
	if len(host.Logs) != 1 || host.Logs[0].Message != "composing a greeting for Grace" {
		t.Errorf("logs %+v", host.Logs)
	}
}

func TestDescribesItselfAsTheSpecSays(t *testing.T) {
	if err := Kind.Validate(); err != nil {
		t.Fatal(err)
	}
	spec := Kind.Spec()
	if spec.Name != "greet-go" || len(spec.Steps) != 2 || spec.Steps[0] != (guest.StepSpec{Key: "compose", Weight: 1, OutputSchema: composedSchema}) ||
		spec.Steps[1] != (guest.StepSpec{Key: "deliver", Weight: 1}) {
		t.Errorf("spec %+v", spec)
	}
	if r := spec.Retry; r.MaxAttempts != 3 || guest.Millis(r.InitialBackoff) != 100 || guest.Millis(r.MaxBackoff) != 1000 {
		t.Errorf("retry %+v", r)
	}
	if spec.Cancellable || spec.HasFailureEffect || spec.NotifiesOnSuccess {
		t.Errorf("flags %+v", spec)
	}
}

func TestDeclaresItsInputSchema(t *testing.T) {
	type property struct {
		Type      string `json:"type"`
		MinLength *int   `json:"minLength"`
	}
	var schema struct {
		Schema               string              `json:"$schema"`
		Type                 string              `json:"type"`
		Required             []string            `json:"required"`
		Properties           map[string]property `json:"properties"`
		AdditionalProperties any                 `json:"additionalProperties"`
	}
	spec := Kind.Spec()
	if err := json.Unmarshal([]byte(spec.InputSchema), &schema); err != nil {
		t.Fatalf("the input schema: %v", err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" || schema.Type != "object" ||
		strings.Join(schema.Required, ",") != "name" || schema.AdditionalProperties != nil {
		t.Errorf("schema %+v", schema)
	}
	if name := schema.Properties["name"]; name.Type != "string" || name.MinLength == nil || *name.MinLength != 1 {
		t.Errorf("name %+v", name)
	}
	for _, flag := range []string{"flaky", "explode"} {
		if p := schema.Properties[flag]; p.Type != "boolean" {
			t.Errorf("%s %+v", flag, p)
		}
	}
	var composed struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(spec.Steps[0].OutputSchema), &composed); err != nil || strings.Join(composed.Required, ",") != "text" {
		t.Errorf("compose's output schema %q: %v", spec.Steps[0].OutputSchema, err)
	}
}
