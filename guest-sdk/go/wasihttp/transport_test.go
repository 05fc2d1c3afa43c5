package wasihttp_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"spindle.dev/guest"
	"spindle.dev/guest/guesttest"
	"spindle.dev/guest/wasihttp"
)

// runStep runs step as the one step of a job whose host answers requests with rt, once.
func runStep(rt http.RoundTripper, secrets map[string]string, step guest.StepFunc) *guesttest.Run {
	kind := &guest.Kind{Name: "probe", Steps: []guest.Step{{Key: "probe", Run: step}}, Retry: guest.RetryPolicy{MaxAttempts: 1}}
	return guesttest.RunJob(kind, nil, &guesttest.Options{HTTP: rt, Secrets: secrets})
}

// received is a request as the fake upstream got it.
type received struct {
	method, path     string
	header           http.Header
	contentLength    int64
	transferEncoding []string
	body             string
}

// upstream answers 200 `{"ok":true}` and records what it received.
func upstream(got *[]received) http.RoundTripper {
	return guesttest.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		*got = append(*got, received{r.Method, r.URL.RequestURI(), r.Header, r.ContentLength, r.TransferEncoding, string(body)})
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
}

// send runs one request in a step and returns the error escaping it, if any.
func send(rt http.RoundTripper, req func() (*http.Response, error)) (*guesttest.Run, error) {
	var sent error
	run := runStep(rt, nil, func(c *guest.Call) (any, error) {
		resp, err := req()
		if err != nil {
			sent = err
			return nil, err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return nil, err
	})
	return run, sent
}

// opaqueReader hides its size from net/http, as a stream would.
type opaqueReader struct{ io.Reader }

func TestABodyOfKnownSizeGoesWithContentLengthNotChunked(t *testing.T) {
	var got []received
	body := `{"message":"hi"}`
	if _, err := send(upstream(&got), func() (*http.Response, error) {
		return http.Post("http://api.test/hook?x=1", "application/json", strings.NewReader(body))
	}); err != nil {
		t.Fatal(err)
	}
	r := got[0]
	if r.method != "POST" || r.path != "/hook?x=1" || r.body != body {
		t.Errorf("received %+v", r)
	}
	if r.header.Get("Content-Length") != "16" || r.contentLength != 16 || r.transferEncoding != nil {
		t.Errorf("framing: Content-Length %q (%d), Transfer-Encoding %v", r.header.Get("Content-Length"), r.contentLength, r.transferEncoding)
	}
	if r.header.Get("Content-Type") != "application/json" {
		t.Errorf("header %v", r.header)
	}
}

func TestAShortBodyOfUnknownSizeIsMeasured(t *testing.T) {
	var got []received
	if _, err := send(upstream(&got), func() (*http.Response, error) {
		return http.Post("http://api.test/hook", "text/plain", opaqueReader{strings.NewReader("streamed")})
	}); err != nil {
		t.Fatal(err)
	}
	if r := got[0]; r.header.Get("Content-Length") != "8" || r.transferEncoding != nil || r.body != "streamed" {
		t.Errorf("received %+v", r)
	}
}

func TestALongBodyOfUnknownSizeIsStreamedChunked(t *testing.T) {
	var got []received
	long := strings.Repeat("0123456789abcdef", wasihttp.MaxBufferedBody/16+100)
	if _, err := send(upstream(&got), func() (*http.Response, error) {
		return http.Post("http://api.test/upload", "text/plain", opaqueReader{strings.NewReader(long)})
	}); err != nil {
		t.Fatal(err)
	}
	r := got[0]
	if r.header.Get("Content-Length") != "" || r.contentLength != -1 || strings.Join(r.transferEncoding, ",") != "chunked" {
		t.Errorf("framing: Content-Length %q (%d), Transfer-Encoding %v", r.header.Get("Content-Length"), r.contentLength, r.transferEncoding)
	}
	if r.body != long {
		t.Errorf("body of %d bytes, want %d", len(r.body), len(long))
	}
}

func TestAGetHasNoBodyAndAnEmptyPostSaysSo(t *testing.T) {
	var got []received
	if _, err := send(upstream(&got), func() (*http.Response, error) { return http.Get("http://api.test/") }); err != nil {
		t.Fatal(err)
	}
	if _, err := send(upstream(&got), func() (*http.Response, error) { return http.Post("http://api.test/", "", nil) }); err != nil {
		t.Fatal(err)
	}
	if get := got[0]; get.method != "GET" || get.header.Get("Content-Length") != "" || get.contentLength != 0 || get.body != "" {
		t.Errorf("GET %+v", get)
	}
	if post := got[1]; post.header.Get("Content-Length") != "0" || post.body != "" {
		t.Errorf("POST %+v", post)
	}
}

func TestABodyThatBreaksItsContentLengthFails(t *testing.T) {
	var got []received
	_, err := send(upstream(&got), func() (*http.Response, error) {
		req, _ := http.NewRequest("PUT", "http://api.test/x", opaqueReader{strings.NewReader("short")})
		req.ContentLength = 10
		return http.DefaultClient.Do(req)
	})
	if err == nil || !strings.Contains(err.Error(), "ContentLength=10 with Body length 5") || len(got) != 0 {
		t.Errorf("err %v, upstream got %d requests", err, len(got))
	}
}

func TestTheResponseHeadAndBodyComeThrough(t *testing.T) {
	rt := guesttest.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Content-Length", "7")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created")
	}))
	var (
		resp *http.Response
		body []byte
	)
	run := runStep(rt, nil, func(c *guest.Call) (any, error) {
		var err error
		if resp, err = http.Get("http://api.test/things"); err != nil {
			return nil, err
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, err
	})
	if !run.Succeeded() {
		t.Fatalf("failed %+v", run.Failure)
	}
	if resp.StatusCode != 201 || resp.Status != "201 Created" || resp.ContentLength != 7 || string(body) != "created" {
		t.Errorf("response %d %q %d %q", resp.StatusCode, resp.Status, resp.ContentLength, body)
	}
	if cookies := resp.Header.Values("Set-Cookie"); strings.Join(cookies, ";") != "a=1;b=2" {
		t.Errorf("Set-Cookie %q", cookies)
	}
	if resp.Request == nil || resp.Request.URL.Path != "/things" {
		t.Errorf("request %+v", resp.Request)
	}
}

func TestSecretsArePutInPlaceForTheUpstreamOnly(t *testing.T) {
	var got []received
	var sent string
	run := runStep(upstream(&got), map[string]string{"api-token": "s3cr3t"}, func(c *guest.Call) (any, error) {
		token, _ := c.Config().Secret("api-token")
		sent = "Bearer " + token
		req, _ := http.NewRequest("GET", "http://api.test/me", nil)
		req.Header.Set("Authorization", sent)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return nil, err
	})
	if !run.Succeeded() {
		t.Fatalf("failed %+v", run.Failure)
	}
	if sent != "Bearer "+guesttest.Placeholder("api-token") || got[0].header.Get("Authorization") != "Bearer s3cr3t" {
		t.Errorf("the step sent %q, the upstream saw %q", sent, got[0].header.Get("Authorization"))
	}
}

func TestADenialIsATypedErrorThroughNetHTTP(t *testing.T) {
	deny := guesttest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, &wasihttp.Error{Code: "HTTP-request-denied"}
	})
	run, err := send(deny, func() (*http.Response, error) {
		return http.Post("http://elsewhere.test/x", "application/json", strings.NewReader("{}"))
	})
	var (
		urlErr  *url.Error
		httpErr *wasihttp.Error
	)
	if !errors.As(err, &urlErr) || !errors.As(err, &httpErr) || httpErr.Code != "HTTP-request-denied" {
		t.Fatalf("err %#v", err)
	}
	if !errors.Is(err, wasihttp.ErrDenied) || errors.Is(err, wasihttp.ErrTimeout) || urlErr.Timeout() {
		t.Errorf("classes of %v", err)
	}
	if want := `Post "http://elsewhere.test/x": HTTP-request-denied: the host's outbound policy does not allow this request`; err.Error() != want {
		t.Errorf("text %q, want %q", err.Error(), want)
	}
	want := &guesttest.JobFailure{Step: "probe", Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}
	if run.Failure == nil || *run.Failure != *want || len(run.Calls) != 1 {
		t.Errorf("failure %+v after %d calls", run.Failure, len(run.Calls))
	}
	if logs := run.LogMessages(); len(logs) != 1 || !strings.Contains(logs[0], `(Post "http://elsewhere.test/x": HTTP-request-denied`) {
		t.Errorf("the log does not name the request: %q", logs)
	}
}

func TestErrorsEscapingAStepMapLikeTheOtherSDKs(t *testing.T) {
	for _, tc := range []struct {
		code      string
		class     error
		failure   string
		retryable bool
	}{
		{"HTTP-request-denied", wasihttp.ErrDenied, "http-request-denied", false},
		{"destination-IP-prohibited", wasihttp.ErrDenied, "http-request-denied", false},
		{"HTTP-request-URI-invalid", wasihttp.ErrInvalidRequest, "http-request-invalid", false},
		{"HTTP-request-body-size", wasihttp.ErrInvalidRequest, "http-request-invalid", false},
		{"connection-refused", wasihttp.ErrConnect, "upstream-unavailable", true},
		{"DNS-error", wasihttp.ErrConnect, "upstream-unavailable", true},
		{"HTTP-response-timeout", wasihttp.ErrTimeout, "upstream-unavailable", true},
		{"HTTP-response-body-size", wasihttp.ErrTooLarge, "upstream-unavailable", true},
		{"connection-limit-reached", wasihttp.ErrConnectionLimit, "upstream-unavailable", true},
		{"HTTP-protocol-error", nil, "upstream-unavailable", true},
	} {
		fail := guesttest.RoundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, &wasihttp.Error{Code: tc.code}
		})
		run, err := send(fail, func() (*http.Response, error) { return http.Get("http://api.test/") })
		if tc.class != nil && !errors.Is(err, tc.class) {
			t.Errorf("%s: not %v", tc.code, tc.class)
		}
		if urlErr := (*url.Error)(nil); errors.As(err, &urlErr) && urlErr.Timeout() != (tc.class == wasihttp.ErrTimeout) {
			t.Errorf("%s: Timeout() %v", tc.code, urlErr.Timeout())
		}
		f, retryable := guest.FailureOf(err)
		if f.Code != tc.failure || retryable != tc.retryable || run.Failure == nil || run.Failure.Code != tc.failure {
			t.Errorf("%s: failure %+v retryable %v, run %+v", tc.code, f, retryable, run.Failure)
		}
	}
}

func TestARequestTheHostCouldNotSendIsInvalid(t *testing.T) {
	var got []received
	for _, tc := range []struct {
		name string
		req  func() (*http.Response, error)
		code string
	}{
		{"credentials in the URL", func() (*http.Response, error) { return http.Get("http://user:pw@api.test/") }, "HTTP-request-URI-invalid"},
		{"a forbidden header", func() (*http.Response, error) {
			req, _ := http.NewRequest("GET", "http://api.test/", nil)
			req.Header.Set("Proxy-Authorization", "x")
			return http.DefaultClient.Do(req)
		}, "HTTP-request-header-invalid"},
		{"a line break in a value", func() (*http.Response, error) {
			req, _ := http.NewRequest("GET", "http://api.test/", nil)
			req.Header.Set("X-Note", "a\r\nInjected: yes")
			return http.DefaultClient.Do(req)
		}, "HTTP-request-header-invalid"},
	} {
		run, err := send(upstream(&got), tc.req)
		var httpErr *wasihttp.Error
		if !errors.As(err, &httpErr) || httpErr.Code != tc.code || !errors.Is(err, wasihttp.ErrInvalidRequest) {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if run.Failure == nil || run.Failure.Code != "http-request-invalid" {
			t.Errorf("%s: failure %+v", tc.name, run.Failure)
		}
	}
	if len(got) != 0 {
		t.Errorf("the upstream got %+v", got)
	}
}

func TestTheHostOwnsTheConnectionFields(t *testing.T) {
	var got []received
	if _, err := send(upstream(&got), func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", "http://api.test/", nil)
		req.Header.Set("Connection", "close")
		req.Header.Set("Keep-Alive", "timeout=5")
		req.Header.Set("X-Kept", "yes")
		return http.DefaultClient.Do(req)
	}); err != nil {
		t.Fatal(err)
	}
	if h := got[0].header; h.Get("Connection") != "" || h.Get("Keep-Alive") != "" || h.Get("X-Kept") != "yes" {
		t.Errorf("header %v", h)
	}
}

func TestWithoutAnHTTPOptionAStepIsToldSo(t *testing.T) {
	run, err := send(nil, func() (*http.Response, error) { return http.Get("http://api.test/") })
	var httpErr *wasihttp.Error
	if !errors.As(err, &httpErr) || httpErr.Code != "configuration-error" || !strings.Contains(httpErr.Detail, "guesttest.Options") {
		t.Fatalf("err %v", err)
	}
	if run.Failure == nil || run.Failure.Code != "upstream-unavailable" {
		t.Errorf("failure %+v", run.Failure)
	}
}

func TestOutsideAStepNetHTTPsOwnTransportServes(t *testing.T) {
	if guest.CurrentHost() != nil {
		t.Fatal("a host is still bound after the runs")
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "real") }))
	defer server.Close()
	resp, err := http.Get(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); string(body) != "real" {
		t.Errorf("body %q", body)
	}
}

// recordingHost is a guest.Host that keeps the requests it is asked to send.
type recordingHost struct {
	sent []*guest.OutboundRequest
}

func (h *recordingHost) Log(guest.Level, string)                     {}
func (h *recordingHost) Heartbeat(*guest.Checkpoint) guest.Heartbeat { return guest.Proceed }
func (h *recordingHost) PriorOutput(string) ([]byte, bool)           { return nil, false }
func (h *recordingHost) Setting(string) (string, bool)               { return "", false }
func (h *recordingHost) Secret(string) (string, bool)                { return "", false }
func (h *recordingHost) HMACSHA256(string, []byte) ([]byte, bool)    { return nil, false }
func (h *recordingHost) Stderr(string)                               {}
func (h *recordingHost) SendHTTP(req *guest.OutboundRequest) (*guest.OutboundResponse, error) {
	h.sent = append(h.sent, req)
	return &guest.OutboundResponse{Status: 204, Body: io.NopCloser(bytes.NewReader(nil))}, nil
}

func TestTimeoutsAndADeadlineReachTheHost(t *testing.T) {
	h := &recordingHost{}
	kind := &guest.Kind{Name: "probe", Steps: []guest.Step{{Key: "probe", Run: func(c *guest.Call) (any, error) {
		client := &http.Client{Transport: &wasihttp.Transport{ConnectTimeout: 2 * time.Second, BetweenBytesTimeout: 500 * time.Millisecond}}
		if _, err := client.Get("http://api.test/a"); err != nil {
			return nil, err
		}
		client.Timeout = time.Second
		_, err := client.Get("http://api.test/b")
		return nil, err
	}}}}
	if o := kind.RunStep(h, guest.StepInput{Step: "probe"}); o.Kind != guest.OutcomeComplete {
		t.Fatalf("outcome %+v", o)
	}
	if len(h.sent) != 2 {
		t.Fatalf("sent %d", len(h.sent))
	}
	if a := h.sent[0]; a.ConnectTimeout != 2*time.Second || a.FirstByteTimeout != 0 || a.BetweenBytesTimeout != 500*time.Millisecond {
		t.Errorf("without a deadline: %v %v %v", a.ConnectTimeout, a.FirstByteTimeout, a.BetweenBytesTimeout)
	}
	b := h.sent[1]
	if b.ConnectTimeout > time.Second || b.FirstByteTimeout > time.Second || b.FirstByteTimeout < 900*time.Millisecond ||
		b.BetweenBytesTimeout != 500*time.Millisecond {
		t.Errorf("under a 1 s deadline: %v %v %v", b.ConnectTimeout, b.FirstByteTimeout, b.BetweenBytesTimeout)
	}
	if b.Method != "GET" || b.Scheme != "http" || b.Authority != "api.test" || b.PathWithQuery != "/b" || b.Body != nil || b.ContentLength != 0 {
		t.Errorf("request %+v", b)
	}
	if guest.CurrentHost() != nil {
		t.Error("the step's host is still bound after it ran")
	}
}
