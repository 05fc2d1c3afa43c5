package guesttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"

	"spindle.dev/guest"
)

// RoundTripFunc answers a test's outbound requests with a function, as
// [Options.HTTP]: a response, or an error for a request that got none (a
// `&wasihttp.Error{Code: "HTTP-request-denied"}` plays the host's policy refusing it).
type RoundTripFunc func(req *http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// Serve answers a test's outbound requests with handler h, as a server would, for
// [Options.HTTP]; the handler sees the request as it would arrive (secrets in place,
// Content-Length as sent).
func Serve(h http.Handler) http.RoundTripper {
	return RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result(), nil
	})
}

func (v hostFor) SendHTTP(out *guest.OutboundRequest) (*guest.OutboundResponse, error) {
	if v.h.HTTP == nil {
		return nil, &guest.HTTPError{Code: "configuration-error",
			Detail: "no outbound HTTP off a host: give guesttest.Options (or Host) an HTTP round tripper"}
	}
	req, err := v.h.incoming(out)
	if err != nil {
		return nil, err
	}
	resp, err := v.h.HTTP.RoundTrip(req)
	if err != nil {
		var httpErr *guest.HTTPError
		if errors.As(err, &httpErr) {
			return nil, httpErr
		}
		return nil, &guest.HTTPError{Code: "internal-error", Detail: err.Error()}
	}
	in := &guest.OutboundResponse{Status: resp.StatusCode, Body: resp.Body}
	names := make([]string, 0, len(resp.Header))
	for name := range resp.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, value := range resp.Header[name] {
			in.Header = append(in.Header, guest.Field{Name: name, Value: value})
		}
	}
	if in.Body == nil {
		in.Body = http.NoBody
	}
	return in, nil
}

// incoming is an outbound request as its destination would receive it through the
// host: secrets in place of their placeholders in the headers, the body read whole
// and held to its Content-Length (the host fails a request whose body is not as long
// as it said), chunked when its size was not known.
func (h *Host) incoming(out *guest.OutboundRequest) (*http.Request, error) {
	var body []byte
	if out.Body != nil {
		var err error
		if body, err = io.ReadAll(out.Body); err != nil {
			return nil, err
		}
	}
	if out.ContentLength >= 0 && int64(len(body)) != out.ContentLength {
		return nil, &guest.HTTPError{Code: "HTTP-request-body-size",
			Detail: fmt.Sprintf("%d bytes sent after a length of %d", len(body), out.ContentLength)}
	}
	url := out.Scheme + "://" + out.Authority + out.PathWithQuery
	req, err := http.NewRequest(out.Method, url, bytes.NewReader(body))
	if err != nil {
		return nil, &guest.HTTPError{Code: "HTTP-request-URI-invalid", Detail: err.Error()}
	}
	for _, f := range out.Header {
		req.Header.Add(f.Name, string(h.Reveal([]byte(f.Value))))
	}
	req.ContentLength = out.ContentLength
	if out.ContentLength < 0 {
		req.TransferEncoding = []string{"chunked"}
	} else if declared := req.Header.Get("Content-Length"); declared != strconv.FormatInt(out.ContentLength, 10) && declared != "" {
		return nil, &guest.HTTPError{Code: "HTTP-request-body-size",
			Detail: fmt.Sprintf("Content-Length %s for a body of %d bytes", declared, out.ContentLength)}
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	return req, nil
}
