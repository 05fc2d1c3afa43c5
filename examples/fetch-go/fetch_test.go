package fetch

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"spindle.dev/guest"
	"spindle.dev/guest/guesttest"
	"spindle.dev/guest/wasihttp"
)

const (
	hookURL   = "http://api.test/hook"
	deniedURL = "http://elsewhere.test/steal"
)

var input = map[string]string{"url": hookURL, "denied_url": deniedURL, "message": "hello, upstream"}

// upstream plays the host and the upstream: it denies deniedURL as the deployment's
// policy would, and answers hookURL with status and body after recording the request.
type upstream struct {
	status int
	// answerDenied: deniedURL is answered instead of denied (a policy left open).
	answerDenied bool
	got          []*http.Request
	bodies       []string
}

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.String() == deniedURL && !u.answerDenied {
		return nil, &wasihttp.Error{Code: "HTTP-request-denied"}
	}
	return guesttest.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.got, u.bodies = append(u.got, r), append(u.bodies, string(body))
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(u.status)
		io.WriteString(w, `{"ok":true}`)
	})).RoundTrip(req)
}

func run(t *testing.T, u *upstream, secrets map[string]string) *guesttest.Run {
	t.Helper()
	return guesttest.RunJob(Kind, input, &guesttest.Options{HTTP: u, Secrets: secrets})
}

func TestPostsTheMessageAndCatchesTheDenial(t *testing.T) {
	u := &upstream{status: 200}
	r := run(t, u, map[string]string{APITokenSecret: "tok-123"})
	if !r.Succeeded() {
		t.Fatalf("failed: %+v\n%s", r.Failure, r.Stderr)
	}
	if len(u.got) != 1 {
		t.Fatalf("the upstream got %d requests", len(u.got))
	}
	req := u.got[0]
	if req.Method != "POST" || req.URL.String() != hookURL {
		t.Errorf("request %s %s", req.Method, req.URL)
	}
	if got := req.Header.Get("authorization"); got != "Bearer tok-123" {
		t.Errorf("authorization %q", got)
	}
	if got := req.Header.Get("content-type"); got != "application/json" {
		t.Errorf("content-type %q", got)
	}
	var sent map[string]string
	if err := json.Unmarshal([]byte(u.bodies[0]), &sent); err != nil || len(sent) != 1 || sent["message"] != "hello, upstream" {
		t.Errorf("body %q: %v", u.bodies[0], err)
	}
	if got, n := req.Header.Get("content-length"), len(u.bodies[0]); got != strconv.Itoa(n) || req.ContentLength != int64(n) || req.TransferEncoding != nil {
		t.Errorf("framing: content-length %q, transfer-encoding %v", got, req.TransferEncoding)
	}
	var out Output
	if ok, err := r.Output("call", &out); !ok || err != nil {
		t.Fatalf("output: %v %v", ok, err)
	}
	want := Output{Status: 200, Body: `{"ok":true}`, Denied: true,
		DeniedError: `Post "` + deniedURL + `": HTTP-request-denied: the host's outbound policy does not allow this request`}
	if out != want {
		t.Errorf("output %+v, want %+v", out, want)
	}
}

func TestWithoutTheSecretNoAuthorizationIsSent(t *testing.T) {
	u := &upstream{status: 200}
	if r := run(t, u, nil); !r.Succeeded() {
		t.Fatalf("failed: %+v", r.Failure)
	}
	if _, ok := u.got[0].Header["Authorization"]; ok {
		t.Errorf("authorization sent: %q", u.got[0].Header.Get("authorization"))
	}
}

func TestAnErrorStatusIsRetried(t *testing.T) {
	u := &upstream{status: 503}
	r := run(t, u, nil)
	if r.Failure == nil || r.Failure.Code != "upstream-status" || r.Failure.Message != "the upstream answered 503" ||
		len(r.Calls) != 3 || len(u.got) != 3 {
		t.Fatalf("failure %+v after %d calls, %d requests", r.Failure, len(r.Calls), len(u.got))
	}
	if r.Calls[0].Outcome.Kind != guest.OutcomeRetryable {
		t.Errorf("first outcome %+v", r.Calls[0].Outcome)
	}
}

func TestAnAnsweredDeniedURLIsReportedNotDenied(t *testing.T) {
	u := &upstream{status: 200, answerDenied: true}
	r := run(t, u, nil)
	var out Output
	if ok, err := r.Output("call", &out); !ok || err != nil {
		t.Fatalf("output: %v %v (%+v)", ok, err, r.Failure)
	}
	if out.Denied || out.DeniedError != "" || len(u.got) != 2 {
		t.Errorf("output %+v after %d requests", out, len(u.got))
	}
}

func TestADeniedURLIsRefusedByTheSDK(t *testing.T) {
	r := guesttest.RunJob(Kind, map[string]string{"url": deniedURL, "denied_url": deniedURL, "message": "x"},
		&guesttest.Options{HTTP: &upstream{status: 200}})
	want := guesttest.JobFailure{Step: "call", Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}
	if r.Failure == nil || *r.Failure != want || len(r.Calls) != 1 {
		t.Errorf("failure %+v after %d calls", r.Failure, len(r.Calls))
	}
}

func TestRefusesInputWithoutURLs(t *testing.T) {
	for _, in := range []any{map[string]any{}, map[string]any{"url": hookURL}, []byte("nope")} {
		r := guesttest.RunJob(Kind, in, nil)
		if r.Failure == nil || r.Failure.Code != "invalid-input" {
			t.Errorf("%v: failure %+v", in, r.Failure)
		}
	}
}

func TestDescribesItself(t *testing.T) {
	if err := Kind.Validate(); err != nil {
		t.Fatal(err)
	}
	spec := Kind.Spec()
	if spec.Name != "fetch-go" || len(spec.Steps) != 1 || spec.Steps[0].Key != "call" || spec.InputSchema != "" {
		t.Errorf("spec %+v", spec)
	}
	if r := spec.Retry; r.MaxAttempts != 3 || guest.Millis(r.InitialBackoff) != 100 || guest.Millis(r.MaxBackoff) != 1000 {
		t.Errorf("retry %+v", r)
	}
}
