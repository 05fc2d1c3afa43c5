package guest

import (
	"errors"
	"io"
	"sync"
	"time"
)

// OutboundRequest is one outbound HTTP request as `wasi:http/outgoing-handler` takes it,
// for [Host.SendHTTP]. Kinds do not build one: they use net/http through the
// spindle.dev/guest/wasihttp transport, which does.
type OutboundRequest struct {
	// Method is the request's method, upper case (`GET`, `POST`, ...).
	Method string
	// Scheme is `http` or `https` (another is passed on for the host to refuse).
	Scheme string
	// Authority is `host` or `host:port`: where the request goes and its Host header.
	Authority string
	// PathWithQuery is from the first `/` on, without a fragment; `/` at least.
	PathWithQuery string
	// Header is the request's header fields in order, Content-Length included when the
	// body's size is known. Values may hold secrets' placeholders, which the host
	// replaces once its policy allowed the request.
	Header []Field
	// Body is the request's content, read once to its end; nil: no body.
	Body io.Reader
	// ContentLength is Body's size in bytes, or -1 when it is not known (the host then
	// sends it chunked).
	ContentLength int64
	// The longest the host may take to connect, to the response's head and between two
	// chunks of the response body; 0 leaves a phase to the host's own bound (which also
	// caps a longer one).
	ConnectTimeout      time.Duration
	FirstByteTimeout    time.Duration
	BetweenBytesTimeout time.Duration
}

// Field is one header field. Names compare ASCII case-insensitively.
type Field struct {
	Name  string
	Value string
}

// OutboundResponse is the head of a response and its body, as [Host.SendHTTP] returns it.
type OutboundResponse struct {
	Status int
	// Header is the response's header fields in the order the host gave them.
	Header []Field
	// Body streams the response's content; closing it releases the host's resources.
	// A read fails with an [*HTTPError] when the body is cut short or passes the host's
	// cap on its size.
	Body io.ReadCloser
}

// HTTPError is why an outbound request got no response (a response with any status is
// not an error). Code is the `wasi:http` `error-code` case, as the WIT and the host's
// records of requests spell it: `HTTP-request-denied`, `connection-refused`, `DNS-error`,
// `HTTP-response-body-size`, ... For a request it does not send, the SDK names the case
// the host would (`HTTP-request-URI-invalid`, `HTTP-request-method-invalid`), its own
// `HTTP-request-header-invalid` for a header field wasi:http does not take from a guest
// (the WIT has a header-error, not an error-code, for that), or `configuration-error`
// when there is no host to send through.
//
// errors.Is tells the class of an HTTPError wherever it sits in a chain (net/http's
// *url.Error unwraps to it): [ErrHTTPDenied], [ErrHTTPInvalidRequest], [ErrHTTPTimeout],
// [ErrHTTPConnect], [ErrHTTPTooLarge], [ErrHTTPConnectionLimit]. Escaping a step, it
// reports what the other SDKs report (see [FailureOf]): denied and invalid requests are
// refused `http-request-denied` and `http-request-invalid`, since the same request fails
// the same way again; the rest retryable `upstream-unavailable`.
type HTTPError struct {
	Code string
	// Detail is what the host or the SDK added: a DNS rcode, a TLS alert, a size, the
	// header at fault; may be empty.
	Detail string
}

// Classes of [HTTPError], for errors.Is.
var (
	// ErrHTTPDenied: the host's policy refused the request (`HTTP-request-denied`,
	// `destination-IP-prohibited`): its destination is not allowed for this tenant and
	// deployment, or the call made more requests than the host allows one call.
	ErrHTTPDenied = errors.New("the host's outbound policy does not allow this request")
	// ErrHTTPInvalidRequest: the request cannot be sent as built (a malformed URL, method
	// or header, a body of the wrong size); sending it again cannot help.
	ErrHTTPInvalidRequest = errors.New("the request cannot be sent as built")
	// ErrHTTPTimeout: a phase ran out of time (DNS, connect, the response's head, the gap
	// between two body chunks, the whole exchange).
	ErrHTTPTimeout = errors.New("no answer in time")
	// ErrHTTPConnect: the destination could not be reached or its TLS was wrong (no such
	// name, refused, reset, a bad certificate).
	ErrHTTPConnect = errors.New("could not connect")
	// ErrHTTPTooLarge: the response body is larger than the host lets a step receive.
	ErrHTTPTooLarge = errors.New("the response body is larger than the host allows")
	// ErrHTTPConnectionLimit: the host has as many outbound connections open as it
	// allows; later one may be free.
	ErrHTTPConnectionLimit = errors.New("too many outbound connections are open")
)

// httpClass is the class of an error-code case, nil for a case that has none.
func httpClass(code string) error {
	switch code {
	case "HTTP-request-denied", "destination-IP-prohibited":
		return ErrHTTPDenied
	case "HTTP-request-length-required", "HTTP-request-body-size", "HTTP-request-method-invalid",
		"HTTP-request-URI-invalid", "HTTP-request-URI-too-long", "HTTP-request-header-section-size",
		"HTTP-request-header-size", "HTTP-request-header-invalid", "HTTP-request-trailer-section-size",
		"HTTP-request-trailer-size":
		return ErrHTTPInvalidRequest
	case "DNS-timeout", "connection-timeout", "connection-read-timeout", "connection-write-timeout",
		"HTTP-response-timeout":
		return ErrHTTPTimeout
	case "DNS-error", "destination-not-found", "destination-unavailable", "destination-IP-unroutable",
		"connection-refused", "connection-terminated", "TLS-protocol-error", "TLS-certificate-error",
		"TLS-alert-received":
		return ErrHTTPConnect
	case "HTTP-response-body-size":
		return ErrHTTPTooLarge
	case "connection-limit-reached":
		return ErrHTTPConnectionLimit
	}
	return nil
}

// Error leads with the code, so that a log line and the host's record of the request
// can be matched up: `HTTP-request-denied: the host's outbound policy does not allow
// this request`, `DNS-error: NXDOMAIN`.
func (e *HTTPError) Error() string {
	switch class := httpClass(e.Code); {
	case e.Detail != "":
		return e.Code + ": " + e.Detail
	case class == ErrHTTPDenied || class == ErrHTTPTooLarge || class == ErrHTTPConnectionLimit:
		return e.Code + ": " + class.Error()
	}
	return e.Code
}

// Is reports whether target is e's class (see [HTTPError]).
func (e *HTTPError) Is(target error) bool {
	class := httpClass(e.Code)
	return class != nil && class == target
}

// Timeout reports whether a phase ran out of time; net/http's *url.Error asks it.
func (e *HTTPError) Timeout() bool { return httpClass(e.Code) == ErrHTTPTimeout }

// stepFailure is the failure an HTTPError escaping a step reports, named as in the
// other SDKs; whether it may be retried.
func (e *HTTPError) stepFailure() (Failure, bool) {
	switch httpClass(e.Code) {
	case ErrHTTPDenied:
		return Failure{Code: "http-request-denied", Message: "the outbound request is not allowed by policy"}, false
	case ErrHTTPInvalidRequest:
		return Failure{Code: "http-request-invalid", Message: "the outbound request is malformed"}, false
	}
	return Failure{Code: "upstream-unavailable", Message: "the upstream service did not answer"}, true
}

// The host outbound requests go through: that of the step or hook being run.
var (
	boundMu sync.Mutex
	bound   Host
)

// bind makes h the host outbound requests go through and returns the one before.
func bind(h Host) Host {
	boundMu.Lock()
	defer boundMu.Unlock()
	before := bound
	bound = h
	return before
}

// CurrentHost is the host of the step or hook being run, which outbound requests go
// through (spindle.dev/guest/wasihttp sends with its SendHTTP); nil outside any. [NewCall]
// binds its host too, and it stays bound (a step run puts back what it found), so that a
// step function called directly in a test sends through the test's host.
//
// A process has one: in a component only one call ever runs, but natively, tests whose
// steps send HTTP must not run them in parallel (t.Parallel), or a request may go
// through another test's host.
func CurrentHost() Host {
	boundMu.Lock()
	defer boundMu.Unlock()
	return bound
}
