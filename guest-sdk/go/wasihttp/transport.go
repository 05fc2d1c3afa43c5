// Package wasihttp is net/http over `wasi:http/outgoing-handler`: a [Transport] that
// sends a step's requests through the Spindle host, so Go's own HTTP clients, and the
// libraries built on them, work inside a job kind.
//
// Importing it makes it [http.DefaultTransport], so http.Get, http.Post and
// http.DefaultClient go through the host:
//
//	import _ "spindle.dev/guest/wasihttp"
//
//	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
//	if errors.Is(err, wasihttp.ErrDenied) { ... } // the host's policy refused it
//
// A client or library that builds its own *http.Transport must be given [NewClient] or
// a [Transport] instead. The package is kept out of spindle.dev/guest because net/http
// adds megabytes to a component: only kinds that import it carry it.
//
// The host's policy denies every request unless the operator, the tenant and the kind's
// deployment all allow its destination; a denied request fails with an [*Error] whose
// Code is `HTTP-request-denied` before anything leaves the host. The host bounds each
// phase, the response body's size and the requests one step call may make, so timeouts
// are only for a step that wants to give up sooner. Credentials go in headers as the
// placeholders [guest.Config.Secret] returns; the host puts the values in their place.
// Unless a request has an `Idempotency-Key` header the host adds one, stable across the
// step's attempts.
//
// An [*Error] escaping a step reports what the other SDKs report: a denied request is
// refused `http-request-denied`, a malformed one `http-request-invalid`, any other
// retryable `upstream-unavailable`. A response, whatever its status, is not an error.
//
// Natively (`go test`), a step's requests go to the [http.RoundTripper] its test gave
// guesttest (Options.HTTP); requests made outside any step go out through the
// transport net/http had before, so a test's own client still works.
package wasihttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"spindle.dev/guest"
)

// Error is why a request got no response: Code is the `wasi:http` error-code case, as
// the WIT and the host's records spell it (see [guest.HTTPError]).
type Error = guest.HTTPError

// Classes of [Error], for errors.Is, through net/http's *url.Error as well.
var (
	// ErrDenied: the host's policy refused the request (`HTTP-request-denied`).
	ErrDenied = guest.ErrHTTPDenied
	// ErrInvalidRequest: the request cannot be sent as built; sending it again cannot help.
	ErrInvalidRequest = guest.ErrHTTPInvalidRequest
	// ErrTimeout: a phase ran out of time (the *url.Error's Timeout() is true too).
	ErrTimeout = guest.ErrHTTPTimeout
	// ErrConnect: the destination could not be reached or its TLS was wrong.
	ErrConnect = guest.ErrHTTPConnect
	// ErrTooLarge: the response body is larger than the host lets a step receive.
	ErrTooLarge = guest.ErrHTTPTooLarge
	// ErrConnectionLimit: the host has as many outbound connections open as it allows.
	ErrConnectionLimit = guest.ErrHTTPConnectionLimit
)

// MaxBufferedBody is how much of a request body of unknown size (ContentLength 0 with
// a Body, or -1) the transport reads ahead: a body that ends within it goes with a
// Content-Length, since some servers refuse chunked requests; a longer one is streamed
// chunked.
const MaxBufferedBody = 64 << 10

// Transport is an [http.RoundTripper] that sends through the host of the step being
// run (see [guest.CurrentHost]). Its zero value leaves every phase to the host's
// bounds; a request's context deadline (an http.Client's Timeout sets one) caps each
// phase too.
//
// A request body of known size goes with a Content-Length, never chunked; the
// response body is streamed from the host as it is read, and closing it releases the
// host's resources. The host's HTTP client owns the connection: the hop-by-hop fields
// (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade, TE) and Host
// are not sent (the URL's host is the destination and the Host header), trailers are
// not sent, and the response is not decompressed.
type Transport struct {
	// ConnectTimeout bounds opening the connection (DNS, TCP, TLS); 0: the host's.
	ConnectTimeout time.Duration
	// FirstByteTimeout bounds the wait for the response's head; 0: the host's.
	FirstByteTimeout time.Duration
	// BetweenBytesTimeout bounds the gap between two chunks of the response body; 0:
	// the host's.
	BetweenBytesTimeout time.Duration
}

// NewClient is an http.Client over a zero [Transport]. Like any http.Client it follows
// up to 10 redirects, each a request the host's policy checks and counts.
func NewClient() *http.Client { return &http.Client{Transport: &Transport{}} }

// native is the transport net/http had before this package replaced it, which requests
// made outside any step use in a native build (a test's own client).
var native http.RoundTripper

func init() {
	if runtime.GOOS != "wasip1" {
		native = http.DefaultTransport
	}
	http.DefaultTransport = &Transport{}
}

// RoundTrip sends req through the host and returns the response's head, its body still
// to be read. A request that got no response fails with an [*Error] (http.Client wraps
// it in a *url.Error).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := guest.CurrentHost()
	if host == nil && native != nil {
		return native.RoundTrip(req)
	}
	out, err := t.outbound(req)
	if err == nil && host == nil {
		err = &Error{Code: "configuration-error", Detail: "no step or hook is running: requests go through the host of the one being run"}
	}
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := host.SendHTTP(out)
	closeBody(req)
	if err != nil {
		return nil, err
	}
	return response(req, resp), nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// outbound is req as the host takes it.
func (t *Transport) outbound(req *http.Request) (*guest.OutboundRequest, error) {
	u := req.URL
	invalidURL := func(why string) error {
		return &Error{Code: "HTTP-request-URI-invalid", Detail: why}
	}
	switch {
	case u == nil:
		return nil, invalidURL("the request has no URL")
	case u.Scheme == "":
		return nil, invalidURL("no scheme (expected `http://` or `https://`)")
	case u.Host == "":
		return nil, invalidURL("no host")
	case u.User != nil:
		// The host would pass them on in the clear and log them with the URL.
		return nil, invalidURL("credentials in the URL (put them in a header)")
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !isToken(method) {
		return nil, &Error{Code: "HTTP-request-method-invalid", Detail: fmt.Sprintf("method %q", method)}
	}
	path := u.RequestURI()
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	header, err := fields(req.Header)
	if err != nil {
		return nil, err
	}
	body, length, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	// A known size goes as Content-Length (some servers refuse chunked bodies); net/http
	// sends an explicit 0 for the methods that carry a body.
	if length > 0 || (length == 0 && (method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch)) {
		header = append(header, guest.Field{Name: "Content-Length", Value: strconv.FormatInt(length, 10)})
	}
	out := &guest.OutboundRequest{
		Method:              method,
		Scheme:              strings.ToLower(u.Scheme),
		Authority:           u.Host,
		PathWithQuery:       path,
		Header:              header,
		Body:                body,
		ContentLength:       length,
		ConnectTimeout:      t.ConnectTimeout,
		FirstByteTimeout:    t.FirstByteTimeout,
		BetweenBytesTimeout: t.BetweenBytesTimeout,
	}
	if err := capByDeadline(req.Context(), out); err != nil {
		return nil, err
	}
	return out, nil
}

// capByDeadline shortens each phase's timeout to what is left of ctx, if it has a
// deadline: a blocked host call cannot be cancelled from inside the component.
func capByDeadline(ctx context.Context, out *guest.OutboundRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(deadline)
	if left <= 0 {
		return context.DeadlineExceeded
	}
	for _, d := range []*time.Duration{&out.ConnectTimeout, &out.FirstByteTimeout, &out.BetweenBytesTimeout} {
		if *d == 0 || *d > left {
			*d = left
		}
	}
	return nil
}

// notSent are the fields the host's HTTP client owns (it manages the connection and
// frames the body); the transport leaves them out as net/http's own would rewrite them.
var notSent = map[string]bool{
	"Connection":        true,
	"Keep-Alive":        true,
	"Proxy-Connection":  true,
	"Transfer-Encoding": true,
	"Upgrade":           true,
	"Te":                true,
	"Host":              true,
	"Content-Length":    true, // set from the body
}

// forbidden are the other fields wasi:http refuses from a guest.
var forbidden = map[string]bool{"Proxy-Authenticate": true, "Proxy-Authorization": true, "Http2-Settings": true}

// fields is h as header fields in a stable order (by name, each name's values in order).
func fields(h http.Header) ([]guest.Field, error) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []guest.Field
	for _, name := range names {
		canonical := http.CanonicalHeaderKey(name)
		if notSent[canonical] {
			continue
		}
		invalid := func(problem string) error {
			return &Error{Code: "HTTP-request-header-invalid", Detail: fmt.Sprintf("header `%s` %s", name, problem)}
		}
		switch {
		case forbidden[canonical]:
			return nil, invalid("may not be set by a guest")
		case !isToken(name):
			return nil, invalid("has a malformed name")
		}
		for _, value := range h[name] {
			if !isFieldValue(value) {
				return nil, invalid("has a malformed value")
			}
			out = append(out, guest.Field{Name: name, Value: value})
		}
	}
	return out, nil
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), as names and methods are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x7f || c <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// isFieldValue reports whether s may be a field's value: no control characters but tab
// (so no line breaks that would start another field).
func isFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// requestBody is what of req's body to send and its size (-1: unknown, sent chunked).
// A body of unknown size is read ahead up to MaxBufferedBody, so that a short one goes
// with its size too.
func requestBody(req *http.Request) (io.Reader, int64, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, 0, nil
	}
	if req.ContentLength > 0 {
		return &exactBody{body: req.Body, declared: req.ContentLength, left: req.ContentLength}, req.ContentLength, nil
	}
	head, err := io.ReadAll(io.LimitReader(req.Body, MaxBufferedBody+1))
	switch {
	case err != nil:
		return nil, 0, err
	case len(head) == 0:
		return nil, 0, nil
	case len(head) <= MaxBufferedBody:
		return bytes.NewReader(head), int64(len(head)), nil
	}
	return io.MultiReader(bytes.NewReader(head), req.Body), -1, nil
}

// exactBody is a body that must be as long as its declared ContentLength, as net/http
// insists: the host would otherwise fail the request with `HTTP-request-body-size`
// after a Content-Length that does not hold.
type exactBody struct {
	body           io.Reader
	declared, left int64
}

func (b *exactBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		var extra [1]byte
		switch n, err := io.ReadFull(b.body, extra[:]); {
		case n > 0:
			return 0, fmt.Errorf("wasihttp: ContentLength=%d with a longer Body", b.declared)
		case err == io.EOF:
			return 0, io.EOF
		default:
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if err == io.EOF {
		if b.left > 0 {
			return n, fmt.Errorf("wasihttp: ContentLength=%d with Body length %d", b.declared, b.declared-b.left)
		}
		err = nil
	}
	return n, err
}

// response is the host's response as net/http's.
func response(req *http.Request, r *guest.OutboundResponse) *http.Response {
	header := make(http.Header, len(r.Header))
	for _, f := range r.Header {
		header.Add(f.Name, f.Value)
	}
	length := int64(-1)
	if n, err := strconv.ParseInt(header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		length = n
	}
	body := r.Body
	if body == nil {
		body = http.NoBody
	}
	status := strconv.Itoa(r.Status)
	if text := http.StatusText(r.Status); text != "" {
		status += " " + text
	}
	return &http.Response{
		Status:        status,
		StatusCode:    r.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          body,
		ContentLength: length,
		Request:       req,
	}
}
