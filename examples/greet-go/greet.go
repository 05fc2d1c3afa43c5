// Package greet is the greet kind in Go: compose a greeting, then deliver it once per job.
//
// Its behaviour is the same in every guest language (see the polyglot spec): its input
// schema has the host refuse a submission without a non-empty string `name`; `compose`
// refuses such input itself too (the local runner does not check schemas) and, asked to
// `explode`, fails with Go's natural uncaught error, a write to a nil map; `deliver`
// fails its first attempt when asked to be `flaky`.
package greet

import (
	"errors"
	"time"

	"spindle.dev/guest"
)

// Kind is the greet kind, as build.sh exports it.
var Kind = &guest.Kind{
	Name: "greet-go",
	Steps: []guest.Step{
		{Key: "compose", Weight: 1, Run: compose, OutputSchema: composedSchema},
		{Key: "deliver", Weight: 1, Run: deliver},
	},
	Retry:       guest.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
	InputSchema: inputSchema,
}

// inputSchema is the JSON Schema (draft 2020-12) of [Input]: the host refuses a
// submission that breaks it (422 `invalid-input`) before anything is queued.
const inputSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Input",
  "description": "Who to greet, and the failures to demonstrate.",
  "type": "object",
  "required": ["name"],
  "properties": {
    "name": {"type": "string", "minLength": 1, "description": "who to greet"},
    "flaky": {"type": "boolean", "default": false, "description": "fail deliver's first attempt"},
    "explode": {"type": "boolean", "default": false, "description": "fail compose with a panic"}
  }
}`

// composedSchema is the JSON Schema of [Composed], compose's output.
const composedSchema = `{"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}`

// Input is the job's input: who to greet, and the failures to demonstrate.
type Input struct {
	Name    string `json:"name"`
	Flaky   bool   `json:"flaky,omitempty"`
	Explode bool   `json:"explode,omitempty"`
}

// Validate runs as the SDK decodes the input, so a missing name is refused
// `invalid-input` like malformed JSON.
func (in *Input) Validate() error {
	if in.Name == "" {
		return errors.New("`name` must be a non-empty string")
	}
	return nil
}

// Composed is compose's output, read back by deliver.
type Composed struct {
	Text string `json:"text"`
}

func compose(c *guest.Call) (any, error) {
	var in Input
	if err := c.Input(&in); err != nil {
		return nil, err
	}
	if in.Explode {
		// A write to a map nobody made: the panic escapes, and the SDK reports it as
		// retryable `uncaught-exception` with its stack on stderr.
		var greetings map[string]string
		greetings[in.Name] = "boom"
	}
	c.Logf(guest.LevelInfo, "composing a greeting for %s", in.Name)
	return Composed{Text: "Hello, " + in.Name + "!"}, nil
}

// Delivered is deliver's output.
type Delivered struct {
	Delivered string `json:"delivered"`
	Attempt   int    `json:"attempt"`
}

func deliver(c *guest.Call) (any, error) {
	var composed Composed
	if err := c.Prior("compose", &composed); err != nil {
		return nil, err
	}
	var in Input
	if err := c.Input(&in); err != nil {
		return nil, err
	}
	c.Heartbeat(nil)
	if in.Flaky && c.Attempt() == 1 {
		return nil, &guest.Retryable{Code: "upstream-unavailable", Message: "the first attempt fails on purpose"}
	}
	// Steps run at least once: a real mailer would drop duplicates by this key.
	c.Logf(guest.LevelInfo, "delivered %s (key %s)", composed.Text, c.IdempotencyKey())
	return Delivered{Delivered: composed.Text, Attempt: c.Attempt()}, nil
}
