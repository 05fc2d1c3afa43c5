//go:build wasip1

package export_spindle_job_kind

// Outbound HTTP: [guest.Host.SendHTTP] over `wasi:http/outgoing-handler`, one handle call
// per request, the body streamed out and the response's body streamed in as it is read.
//
// Resources are dropped children first (a pollable before its future, a stream before
// its body, a body before its response), explicitly rather than left to Go's cleanups,
// which run in no set order: the host traps a guest that drops a parent while a child
// lives. A body never closed stays open until the instance ends with the call.
//
// Imports that return lists or strings are called through [hostAllocated]: the host
// writes their results into memory it asks of the bindings' cabi_realloc, which must
// not reach the clock (see there).
//
// Nothing here is linked into a kind that does not send HTTP: only an interface call of
// SendHTTP (spindle.dev/guest/wasihttp's) keeps the method, and with it these bindings.

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"

	witRuntime "go.bytecodealliance.org/pkg/wit/runtime"
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"spindle.dev/guest"
	"wit_component/wasi_http_outgoing_handler"
	wasiHTTP "wit_component/wasi_http_types"
	"wit_component/wasi_io_streams"
)

// writeChunk is the most one `blocking-write-and-flush` may carry: WASI streams take at
// most 4096 bytes per call.
const writeChunk = 4096

// readChunk is the most asked of one `blocking-read`; the host caps the body's size.
const readChunk = 64 << 10

func (bindings) SendHTTP(req *guest.OutboundRequest) (*guest.OutboundResponse, error) {
	outgoing, err := outgoingRequest(req)
	if err != nil {
		return nil, err
	}
	options := requestOptions(req)
	// An empty body is never opened, so the host sends none rather than an empty chunked
	// one (which some servers refuse on a GET).
	var body *wasiHTTP.OutgoingBody
	if req.Body != nil && req.ContentLength != 0 {
		taken := outgoing.Body()
		if taken.IsErr() {
			outgoing.Drop()
			if options.IsSome() {
				options.Some().Drop()
			}
			return nil, &guest.HTTPError{Code: "internal-error", Detail: "the request body was already taken"}
		}
		body = taken.Ok()
	}
	handled := hostAllocated(func() witTypes.Result[*wasiHTTP.FutureIncomingResponse, wasiHTTP.ErrorCode] {
		return wasi_http_outgoing_handler.Handle(outgoing, options)
	})
	if handled.IsErr() {
		if body != nil {
			body.Drop()
		}
		return nil, httpError(handled.Err())
	}
	future := handled.Ok()
	// The body goes out after `handle`, while the host sends: written before, a large one
	// would fill the host's buffer with nobody reading it.
	var sent error
	if body != nil {
		sent = writeBody(body, req.Body)
	}
	// A failed response explains a failed body write (a denied request's body is
	// drained, or its stream closed), so it is reported first.
	response, err := wait(future)
	future.Drop()
	if err != nil {
		return nil, err
	}
	if sent != nil {
		response.Drop()
		return nil, sent
	}
	fields := response.Headers()
	entries := hostAllocated(fields.Entries)
	fields.Drop()
	header := make([]guest.Field, len(entries))
	for i, e := range entries {
		header[i] = guest.Field{Name: e.F0, Value: string(e.F1)}
	}
	in, err := openBody(response)
	if err != nil {
		response.Drop()
		return nil, err
	}
	return &guest.OutboundResponse{Status: int(response.Status()), Header: header, Body: in}, nil
}

// outgoingRequest is req's head as an outgoing-request resource.
func outgoingRequest(req *guest.OutboundRequest) (*wasiHTTP.OutgoingRequest, error) {
	headers := wasiHTTP.MakeFields()
	for _, f := range req.Header {
		if appended := headers.Append(f.Name, []byte(f.Value)); appended.IsErr() {
			headers.Drop()
			problem := "is not accepted"
			switch appended.Err().Tag() {
			case wasiHTTP.HeaderErrorInvalidSyntax:
				problem = "is malformed"
			case wasiHTTP.HeaderErrorForbidden:
				problem = "may not be set by a guest"
			case wasiHTTP.HeaderErrorImmutable:
				problem = "cannot be changed"
			}
			return nil, &guest.HTTPError{Code: "HTTP-request-header-invalid", Detail: fmt.Sprintf("header `%s` %s", f.Name, problem)}
		}
	}
	outgoing := wasiHTTP.MakeOutgoingRequest(headers)
	steps := []struct {
		code string
		set  func() bool
	}{
		{"HTTP-request-method-invalid", func() bool { return outgoing.SetMethod(method(req.Method)).IsOk() }},
		{"HTTP-request-URI-invalid", func() bool { return outgoing.SetScheme(witTypes.Some(scheme(req.Scheme))).IsOk() }},
		{"HTTP-request-URI-invalid", func() bool { return outgoing.SetAuthority(witTypes.Some(req.Authority)).IsOk() }},
		{"HTTP-request-URI-invalid", func() bool { return outgoing.SetPathWithQuery(witTypes.Some(req.PathWithQuery)).IsOk() }},
	}
	for _, step := range steps {
		if !step.set() {
			outgoing.Drop()
			target := req.Method + " " + req.Scheme + "://" + req.Authority + req.PathWithQuery
			return nil, &guest.HTTPError{Code: step.code, Detail: "the host does not accept " + strconv.Quote(target)}
		}
	}
	return outgoing, nil
}

func method(m string) wasiHTTP.Method {
	switch m {
	case "GET":
		return wasiHTTP.MakeMethodGet()
	case "HEAD":
		return wasiHTTP.MakeMethodHead()
	case "POST":
		return wasiHTTP.MakeMethodPost()
	case "PUT":
		return wasiHTTP.MakeMethodPut()
	case "DELETE":
		return wasiHTTP.MakeMethodDelete()
	case "CONNECT":
		return wasiHTTP.MakeMethodConnect()
	case "OPTIONS":
		return wasiHTTP.MakeMethodOptions()
	case "TRACE":
		return wasiHTTP.MakeMethodTrace()
	case "PATCH":
		return wasiHTTP.MakeMethodPatch()
	}
	return wasiHTTP.MakeMethodOther(m)
}

func scheme(s string) wasiHTTP.Scheme {
	switch s {
	case "http":
		return wasiHTTP.MakeSchemeHttp()
	case "https":
		return wasiHTTP.MakeSchemeHttps()
	}
	return wasiHTTP.MakeSchemeOther(s)
}

// requestOptions are the timeouts req asks for, if any. A timeout the host does not
// take is left to its own bound, which applies anyway.
func requestOptions(req *guest.OutboundRequest) witTypes.Option[*wasiHTTP.RequestOptions] {
	if req.ConnectTimeout <= 0 && req.FirstByteTimeout <= 0 && req.BetweenBytesTimeout <= 0 {
		return witTypes.None[*wasiHTTP.RequestOptions]()
	}
	options := wasiHTTP.MakeRequestOptions()
	nanos := func(d int64) witTypes.Option[uint64] { return witTypes.Some(uint64(d)) }
	if req.ConnectTimeout > 0 {
		options.SetConnectTimeout(nanos(req.ConnectTimeout.Nanoseconds()))
	}
	if req.FirstByteTimeout > 0 {
		options.SetFirstByteTimeout(nanos(req.FirstByteTimeout.Nanoseconds()))
	}
	if req.BetweenBytesTimeout > 0 {
		options.SetBetweenBytesTimeout(nanos(req.BetweenBytesTimeout.Nanoseconds()))
	}
	return witTypes.Some(options)
}

// writeBody streams content into body in chunks a stream takes, then finishes it. If
// content fails, the body is dropped unfinished, which the host takes as a body cut
// short: the request fails rather than go out incomplete.
func writeBody(body *wasiHTTP.OutgoingBody, content io.Reader) error {
	opened := body.Write()
	if opened.IsErr() {
		body.Drop()
		return &guest.HTTPError{Code: "internal-error", Detail: "the request body stream was already taken"}
	}
	stream := opened.Ok()
	buf := make([]byte, writeChunk)
	var failed error
	for failed == nil {
		n, err := content.Read(buf)
		if n > 0 {
			if written := stream.BlockingWriteAndFlush(buf[:n]); written.IsErr() {
				failed = streamError(written.Err(), "request body")
				break
			}
		}
		if err == io.EOF {
			break
		}
		failed = err
	}
	stream.Drop()
	if failed != nil {
		body.Drop()
		return failed
	}
	finished := hostAllocated(func() witTypes.Result[witTypes.Unit, wasiHTTP.ErrorCode] {
		return wasiHTTP.OutgoingBodyFinish(body, witTypes.None[*wasiHTTP.Fields]())
	})
	if finished.IsErr() {
		return httpError(finished.Err())
	}
	return nil
}

// wait blocks until the response's head arrives or the request fails.
func wait(future *wasiHTTP.FutureIncomingResponse) (*wasiHTTP.IncomingResponse, error) {
	for {
		ready := hostAllocated(future.Get)
		if ready.IsNone() {
			pollable := future.Subscribe()
			pollable.Block()
			pollable.Drop()
			continue
		}
		taken := ready.Some()
		if taken.IsErr() {
			return nil, &guest.HTTPError{Code: "internal-error", Detail: "the response was already taken"}
		}
		result := taken.Ok()
		if result.IsErr() {
			return nil, httpError(result.Err())
		}
		return result.Ok(), nil
	}
}

// incomingBody streams a response's body; Close drops the stream, the body and the
// response, in that order.
type incomingBody struct {
	response *wasiHTTP.IncomingResponse
	body     *wasiHTTP.IncomingBody
	stream   *wasi_io_streams.InputStream
	// err is what every read returns once one ended (io.EOF at the end).
	err error
}

func openBody(response *wasiHTTP.IncomingResponse) (*incomingBody, error) {
	consumed := response.Consume()
	if consumed.IsErr() {
		return nil, &guest.HTTPError{Code: "internal-error", Detail: "the response body was already taken"}
	}
	body := consumed.Ok()
	opened := body.Stream()
	if opened.IsErr() {
		body.Drop()
		return nil, &guest.HTTPError{Code: "internal-error", Detail: "the response body stream was already taken"}
	}
	return &incomingBody{response: response, body: body, stream: opened.Ok()}, nil
}

func (b *incomingBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		read := hostAllocated(func() witTypes.Result[[]byte, wasi_io_streams.StreamError] {
			return b.stream.BlockingRead(uint64(min(len(p), readChunk)))
		})
		if read.IsErr() {
			if e := read.Err(); e.Tag() == wasi_io_streams.StreamErrorClosed {
				b.err = io.EOF
			} else {
				b.err = streamError(e, "response body")
			}
			return 0, b.err
		}
		n := copy(p, read.Ok())
		// The bindings pin what cabi_realloc hands the host until the export returns;
		// copied, the chunk is garbage, and a long body need not stay in memory whole.
		witRuntime.Unpin()
		if n > 0 {
			return n, nil
		}
	}
}

func (b *incomingBody) Close() error {
	if b.stream == nil {
		return nil
	}
	b.stream.Drop()
	// Trailers are not read: a body that failed is reported through the stream.
	wasiHTTP.IncomingBodyFinish(b.body).Drop()
	b.response.Drop()
	b.stream, b.body, b.response = nil, nil, nil
	if b.err == nil {
		b.err = errClosed
	}
	return nil
}

var errClosed = errors.New("wasihttp: read on a closed response body")

// streamError is a failed stream operation as an HTTPError, with the host's error-code
// where it has one.
func streamError(e wasi_io_streams.StreamError, what string) error {
	if e.Tag() == wasi_io_streams.StreamErrorClosed {
		return &guest.HTTPError{Code: "HTTP-protocol-error", Detail: "the " + what + " stream closed early"}
	}
	ioErr := e.LastOperationFailed()
	defer ioErr.Drop()
	if code := hostAllocated(func() witTypes.Option[wasiHTTP.ErrorCode] { return wasiHTTP.HttpErrorCode(ioErr) }); code.IsSome() {
		return httpError(code.Some())
	}
	return &guest.HTTPError{Code: "internal-error", Detail: what + ": " + hostAllocated(ioErr.ToDebugString)}
}

// errorCodes are the WIT names of the error-code cases, by tag.
var errorCodes = [...]string{
	wasiHTTP.ErrorCodeDnsTimeout:                     "DNS-timeout",
	wasiHTTP.ErrorCodeDnsError:                       "DNS-error",
	wasiHTTP.ErrorCodeDestinationNotFound:            "destination-not-found",
	wasiHTTP.ErrorCodeDestinationUnavailable:         "destination-unavailable",
	wasiHTTP.ErrorCodeDestinationIpProhibited:        "destination-IP-prohibited",
	wasiHTTP.ErrorCodeDestinationIpUnroutable:        "destination-IP-unroutable",
	wasiHTTP.ErrorCodeConnectionRefused:              "connection-refused",
	wasiHTTP.ErrorCodeConnectionTerminated:           "connection-terminated",
	wasiHTTP.ErrorCodeConnectionTimeout:              "connection-timeout",
	wasiHTTP.ErrorCodeConnectionReadTimeout:          "connection-read-timeout",
	wasiHTTP.ErrorCodeConnectionWriteTimeout:         "connection-write-timeout",
	wasiHTTP.ErrorCodeConnectionLimitReached:         "connection-limit-reached",
	wasiHTTP.ErrorCodeTlsProtocolError:               "TLS-protocol-error",
	wasiHTTP.ErrorCodeTlsCertificateError:            "TLS-certificate-error",
	wasiHTTP.ErrorCodeTlsAlertReceived:               "TLS-alert-received",
	wasiHTTP.ErrorCodeHttpRequestDenied:              "HTTP-request-denied",
	wasiHTTP.ErrorCodeHttpRequestLengthRequired:      "HTTP-request-length-required",
	wasiHTTP.ErrorCodeHttpRequestBodySize:            "HTTP-request-body-size",
	wasiHTTP.ErrorCodeHttpRequestMethodInvalid:       "HTTP-request-method-invalid",
	wasiHTTP.ErrorCodeHttpRequestUriInvalid:          "HTTP-request-URI-invalid",
	wasiHTTP.ErrorCodeHttpRequestUriTooLong:          "HTTP-request-URI-too-long",
	wasiHTTP.ErrorCodeHttpRequestHeaderSectionSize:   "HTTP-request-header-section-size",
	wasiHTTP.ErrorCodeHttpRequestHeaderSize:          "HTTP-request-header-size",
	wasiHTTP.ErrorCodeHttpRequestTrailerSectionSize:  "HTTP-request-trailer-section-size",
	wasiHTTP.ErrorCodeHttpRequestTrailerSize:         "HTTP-request-trailer-size",
	wasiHTTP.ErrorCodeHttpResponseIncomplete:         "HTTP-response-incomplete",
	wasiHTTP.ErrorCodeHttpResponseHeaderSectionSize:  "HTTP-response-header-section-size",
	wasiHTTP.ErrorCodeHttpResponseHeaderSize:         "HTTP-response-header-size",
	wasiHTTP.ErrorCodeHttpResponseBodySize:           "HTTP-response-body-size",
	wasiHTTP.ErrorCodeHttpResponseTrailerSectionSize: "HTTP-response-trailer-section-size",
	wasiHTTP.ErrorCodeHttpResponseTrailerSize:        "HTTP-response-trailer-size",
	wasiHTTP.ErrorCodeHttpResponseTransferCoding:     "HTTP-response-transfer-coding",
	wasiHTTP.ErrorCodeHttpResponseContentCoding:      "HTTP-response-content-coding",
	wasiHTTP.ErrorCodeHttpResponseTimeout:            "HTTP-response-timeout",
	wasiHTTP.ErrorCodeHttpUpgradeFailed:              "HTTP-upgrade-failed",
	wasiHTTP.ErrorCodeHttpProtocolError:              "HTTP-protocol-error",
	wasiHTTP.ErrorCodeLoopDetected:                   "loop-detected",
	wasiHTTP.ErrorCodeConfigurationError:             "configuration-error",
	wasiHTTP.ErrorCodeInternalError:                  "internal-error",
}

// httpError is an error-code as the SDK's HTTPError: its WIT name and the detail it
// carries.
func httpError(code wasiHTTP.ErrorCode) *guest.HTTPError {
	tag := code.Tag()
	name := "error-code(" + strconv.Itoa(int(tag)) + ")"
	if int(tag) < len(errorCodes) {
		name = errorCodes[tag]
	}
	return &guest.HTTPError{Code: name, Detail: errorDetail(code)}
}

func errorDetail(code wasiHTTP.ErrorCode) string {
	text := func(o witTypes.Option[string]) string { return o.SomeOr("") }
	size := func(o witTypes.Option[uint64]) string {
		if o.IsNone() {
			return ""
		}
		return "limit " + strconv.FormatUint(o.Some(), 10) + " bytes"
	}
	field := func(f wasiHTTP.FieldSizePayload) string { return text(f.FieldName) }
	switch code.Tag() {
	case wasiHTTP.ErrorCodeDnsError:
		return text(code.DnsError().Rcode)
	case wasiHTTP.ErrorCodeTlsAlertReceived:
		return text(code.TlsAlertReceived().AlertMessage)
	case wasiHTTP.ErrorCodeHttpRequestBodySize:
		return size(code.HttpRequestBodySize())
	case wasiHTTP.ErrorCodeHttpResponseBodySize:
		return size(code.HttpResponseBodySize())
	case wasiHTTP.ErrorCodeHttpRequestHeaderSize:
		if f := code.HttpRequestHeaderSize(); f.IsSome() {
			return field(f.Some())
		}
	case wasiHTTP.ErrorCodeHttpRequestTrailerSize:
		return field(code.HttpRequestTrailerSize())
	case wasiHTTP.ErrorCodeHttpResponseHeaderSize:
		return field(code.HttpResponseHeaderSize())
	case wasiHTTP.ErrorCodeHttpResponseTrailerSize:
		return field(code.HttpResponseTrailerSize())
	case wasiHTTP.ErrorCodeHttpResponseTransferCoding:
		return text(code.HttpResponseTransferCoding())
	case wasiHTTP.ErrorCodeHttpResponseContentCoding:
		return text(code.HttpResponseContentCoding())
	case wasiHTTP.ErrorCodeInternalError:
		return text(code.InternalError())
	}
	return ""
}

// hostAllocated calls an import whose results the host writes into memory it asks of
// cabi_realloc, with Go's collector off meanwhile.
//
// The bindings' cabi_realloc allocates with Go's allocator, which may start a
// collection, assist one, or, when it grows the heap, return memory to the system;
// each reads the clock, a `wasi:clocks` import, and a component may not call out while
// the host is inside its cabi_realloc: the step traps (`cannot leave component
// instance`), as a response body of a few MB read in chunks did. With the collector
// off (SetGCPercent waits out a collection under way) none of the first two happens,
// and the scavenger's pacing asks for no return of memory, except after a collection
// that finished while the collector was off, which paces it as if the heap had no
// room to grow: then one collection with it on sets the pacing right again. The
// collector is back on as soon as the call returns.
func hostAllocated[T any](call func() T) T {
	cycles := gcCycles()
	old := debug.SetGCPercent(-1)
	if gcCycles() != cycles {
		debug.SetGCPercent(old)
		runtime.GC()
		debug.SetGCPercent(-1)
	}
	defer debug.SetGCPercent(old)
	return call()
}

// gcStats is where gcCycles reads the number of completed collections (kept, so that
// its pause history is not allocated again on each read).
var gcStats debug.GCStats

func gcCycles() int64 {
	debug.ReadGCStats(&gcStats)
	return gcStats.NumGC
}
