// Package fetch is the fetch kind in Go: outbound HTTP with plain net/http, through the
// host's `wasi:http` (spindle.dev/guest/wasihttp is net/http's default transport once
// imported).
//
// Its behaviour is the same in every guest language. One step, `call`, with input
// `{"url", "denied_url", "message"}`:
//
//   - POSTs `{"message": <message>}` to `url` with `content-type: application/json`
//     and, if the deployment declared the tenant secret `api-token` and the tenant set
//     it, `authorization: Bearer <its placeholder>`, which the host replaces with the
//     secret once its policy allowed the request. The body's size is known, so it goes
//     with a Content-Length. A status other than 2xx is retryable `upstream-status`; no
//     response at all is what the SDK makes of it (denied: refused
//     `http-request-denied`; else retryable `upstream-unavailable`).
//   - POSTs the same body to `denied_url`, which the deployment is expected not to
//     allow, and catches the host's denial as the typed error it is.
//
// Output: `{"status", "body", "denied", "denied_error"}`: the first response's status
// and body (as text), whether the second request was denied, and the denial's text
// (empty, with `denied` false, if it was answered).
//
// The secret is the deployment's to declare and the policy the operator's, tenant's and
// deployment's to open:
//
//	spindle deploy fetch-go fetch-go.wasm --secret 'api-token@POST http://127.0.0.1:PORT/hook' --allow 'POST http://127.0.0.1:PORT/hook'
package fetch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"spindle.dev/guest"
	"spindle.dev/guest/wasihttp"
)

// APITokenSecret is the tenant secret sent as the bearer token; the deployment must
// declare it (`--secret api-token@RULE`) for the step to get its placeholder.
const APITokenSecret = "api-token"

// Kind is the fetch kind, as build.sh exports it.
// It declares no input schema, as the kind in the other languages does not: the step
// checks its input.
var Kind = &guest.Kind{
	Name:  "fetch-go",
	Steps: []guest.Step{{Key: "call", Weight: 1, Run: call}},
	Retry: guest.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second},
}

// Input is the job's input.
type Input struct {
	URL       string `json:"url"`
	DeniedURL string `json:"denied_url"`
	Message   string `json:"message"`
}

// Validate runs as the SDK decodes the input: both URLs are needed.
func (in *Input) Validate() error {
	switch {
	case in.URL == "":
		return errors.New("`url` must be a non-empty string")
	case in.DeniedURL == "":
		return errors.New("`denied_url` must be a non-empty string")
	}
	return nil
}

// Output is call's output.
type Output struct {
	Status      int    `json:"status"`
	Body        string `json:"body"`
	Denied      bool   `json:"denied"`
	DeniedError string `json:"denied_error"`
}

func call(c *guest.Call) (any, error) {
	var in Input
	if err := c.Input(&in); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]string{"message": in.Message})
	if err != nil {
		return nil, err
	}

	// The request net/http builds from a byte slice knows its size: it goes with a
	// Content-Length, not chunked.
	req, err := http.NewRequest(http.MethodPost, in.URL, bytes.NewReader(body))
	if err != nil {
		return nil, &guest.InvalidInput{Message: "`url` is not a URL", Err: err}
	}
	req.Header.Set("content-type", "application/json")
	if token, ok := c.Config().Secret(APITokenSecret); ok {
		req.Header.Set("authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// A *wasihttp.Error inside net/http's *url.Error: the SDK reports it.
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &guest.Retryable{Code: "upstream-status", Message: fmt.Sprintf("the upstream answered %d", resp.StatusCode)}
	}
	c.Logf(guest.LevelInfo, "the upstream answered %d with %d bytes", resp.StatusCode, len(answer))

	out := Output{Status: resp.StatusCode, Body: string(answer)}
	denied, err := http.Post(in.DeniedURL, "application/json", bytes.NewReader(body))
	switch {
	case errors.Is(err, wasihttp.ErrDenied):
		out.Denied, out.DeniedError = true, err.Error()
		c.Logf(guest.LevelInfo, "denied as expected: %v", err)
	case err != nil:
		return nil, err
	default:
		denied.Body.Close()
		c.Logf(guest.LevelWarn, "the request to denied_url was answered %d", denied.StatusCode)
	}
	return out, nil
}
