// Package greet is the greet kind in Go: compose a greeting, then deliver it once per job.
//
// Its behaviour is the same in every guest language (see the polyglot spec): `compose`
// refuses input without a non-empty `name` and, asked to `explode`, fails with Go's
// natural uncaught error, a write to a nil map; `deliver` fails its first attempt when
// asked to be `flaky`.
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
		{Key: "compose", Weight: 1, Run: compose},
		{Key: "deliver", Weight: 1, Run: deliver},
	},
	Retry: guest.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
}

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
