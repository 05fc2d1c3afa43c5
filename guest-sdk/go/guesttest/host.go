package guesttest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"

	"spindle.dev/guest"
)

// LogLine is one line a kind logged: its level, its text, and the step that logged it
// (the hook's name, `on-failure` or `on-success`, in a hook).
type LogLine struct {
	Step    string
	Level   guest.Level
	Message string
}

// Placeholder is a secret's placeholder as [Host] hands it out: shaped like the host's,
// with a fixed tag for its random one.
func Placeholder(name string) string { return "{{spindle-secret:" + name + ":local}}" }

// Host answers a kind's calls from what a test set and records what the kind did. Its
// zero value is ready: no settings, no secrets, every heartbeat proceeds, no outbound
// HTTP.
type Host struct {
	// Settings and Secrets are what [guest.Config] answers from.
	Settings map[string]string
	Secrets  map[string]string
	// Heartbeats are the host's first answers to heartbeats, in order; then Proceed.
	Heartbeats []guest.Heartbeat
	// Outputs are the job's completed outputs, for prior-output asks.
	Outputs map[string][]byte
	// Echo, if set, also receives log lines and stderr (os.Stderr, say).
	Echo io.Writer
	// HTTP answers outbound requests (net/http's through spindle.dev/guest/wasihttp)
	// with secrets in place in their headers, as the upstream would see them; nil: each
	// fails with `configuration-error`. See [Serve] and [RoundTripFunc].
	HTTP http.RoundTripper

	// Logs, Stderr and Progress record what the kind did.
	Logs     []LogLine
	Stderr   strings.Builder
	Progress []guest.Checkpoint

	running string
}

var _ guest.Host = (*hostFor)(nil)

// hostFor is the guest.Host view of a Host; unexported so that Host's fields, not its
// methods, are what a test sees.
type hostFor struct{ h *Host }

// For is h as the [guest.Host] a step or hook runs against, tagging log lines with step.
func (h *Host) For(step string) guest.Host {
	h.running = step
	return hostFor{h}
}

func (v hostFor) Log(level guest.Level, message string) {
	v.h.Logs = append(v.h.Logs, LogLine{Step: v.h.running, Level: level, Message: message})
	if v.h.Echo != nil {
		fmt.Fprintf(v.h.Echo, "[%s] %s\n", level, message)
	}
}

func (v hostFor) Heartbeat(progress *guest.Checkpoint) guest.Heartbeat {
	if progress != nil {
		v.h.Progress = append(v.h.Progress, *progress)
	}
	if len(v.h.Heartbeats) == 0 {
		return guest.Proceed
	}
	reply := v.h.Heartbeats[0]
	v.h.Heartbeats = v.h.Heartbeats[1:]
	return reply
}

func (v hostFor) PriorOutput(step string) ([]byte, bool) {
	output, ok := v.h.Outputs[step]
	return output, ok
}

func (v hostFor) Setting(name string) (string, bool) {
	value, ok := v.h.Settings[name]
	return value, ok
}

func (v hostFor) Secret(name string) (string, bool) {
	if _, ok := v.h.Secrets[name]; !ok {
		return "", false
	}
	return Placeholder(name), true
}

func (v hostFor) HMACSHA256(secret string, message []byte) ([]byte, bool) {
	key, ok := v.h.Secrets[secret]
	if !ok {
		return nil, false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(message)
	return mac.Sum(nil), true
}

func (v hostFor) Stderr(text string) {
	v.h.Stderr.WriteString(text)
	if v.h.Echo != nil {
		io.WriteString(v.h.Echo, text)
	}
}

// Reveal is value with each set secret's placeholder replaced by the secret, as the host
// does in the headers of outbound requests.
func (h *Host) Reveal(value []byte) []byte {
	for name, secret := range h.Secrets {
		value = bytes.ReplaceAll(value, []byte(Placeholder(name)), []byte(secret))
	}
	return value
}

// NewCall is a first-attempt call of step with input (JSON-encoded, except []byte and
// json.RawMessage) and the given prior outputs, against h: for testing one step
// function directly. For another attempt, cursor or awaited, build the
// [guest.StepInput] and call [guest.NewCall] with h.For(step).
func (h *Host) NewCall(step string, input any, prior ...guest.PriorOutput) *guest.Call {
	return guest.NewCall(h.For(step), guest.StepInput{
		JobID:          LocalJobID,
		Step:           step,
		Attempt:        1,
		IdempotencyKey: LocalJobID + "/" + step,
		Payload:        mustEncode(input),
		Prior:          prior,
	})
}
