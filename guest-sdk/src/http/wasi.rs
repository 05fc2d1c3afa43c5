//! [`Request::send`] on wasm: one `wasi:http/outgoing-handler` call, body streamed out,
//! response read whole.
//!
//! Resources are dropped children first (a pollable before its future, a stream before
//! its body, a body's headers before the body's owner): the host traps a guest that
//! drops a parent while a child lives.

use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    Fields, FutureIncomingResponse, HeaderError, IncomingBody, IncomingResponse, OutgoingBody, OutgoingRequest,
    RequestOptions, http_error_code,
};
use wasip2::io::error::Error as IoError;
use wasip2::io::streams::StreamError;

use super::url::Target;
use super::{HttpError, Request, Response, Timeouts};

/// Most bytes one `blocking-write-and-flush` may carry: WASI streams take at most 4096
/// per call.
const WRITE_CHUNK: usize = 4096;

/// Bytes asked for per `blocking-read`; the host caps the body's total size.
const READ_CHUNK: u64 = 64 * 1024;

pub(super) fn send(request: Request, target: Target) -> Result<Response, HttpError> {
    let outgoing = outgoing_request(&request, &target)?;
    let options = options(request.timeouts)?;
    // An empty body is never opened, so the host sends none rather than an empty
    // chunked one (which some servers refuse on a GET).
    let body = if request.body.is_empty() { None } else { Some(take_body(&outgoing)?) };
    let future = outgoing_handler::handle(outgoing, options)?;
    // The body goes out after `handle`, while the host sends: written before, a large
    // one would fill the host's buffer with nobody reading it.
    let sent = body.map_or(Ok(()), |body| {
        let written = write_body(&body, &request.body);
        let finished = OutgoingBody::finish(body, None).map_err(HttpError::from);
        written.and(finished)
    });
    // A failed response explains a failed body write (a denied request closes the body
    // stream), so it is reported first.
    let response = wait(&future)?;
    drop(future);
    sent?;
    let status = response.status();
    let headers = {
        let fields = response.headers();
        fields.entries()
    };
    let body = read_body(&response)?;
    Ok(Response { status, headers, body })
}

fn outgoing_request(request: &Request, target: &Target) -> Result<OutgoingRequest, HttpError> {
    let headers = Fields::new();
    for (name, value) in &request.headers {
        headers.append(name, value).map_err(|e| {
            let problem = match e {
                HeaderError::InvalidSyntax => "is malformed",
                HeaderError::Forbidden => "may not be set by a guest",
                HeaderError::Immutable => "cannot be changed",
            };
            HttpError::InvalidRequest(format!("header `{name}` {problem}"))
        })?;
    }
    // The body's size is known: say it, so that a server that does not read chunked
    // bodies gets it whole (the host sets it anew where it puts secrets in the body).
    if !request.body.is_empty() && !request.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
    {
        let length = request.body.len().to_string();
        headers.append("content-length", length.as_bytes()).map_err(|_| {
            HttpError::InvalidRequest("the host does not let the request say its content-length".into())
        })?;
    }
    let outgoing = OutgoingRequest::new(headers);
    let invalid = |what: &str| HttpError::InvalidRequest(format!("{what} of {:?} is not valid", request.url));
    outgoing.set_method(&request.method).map_err(|()| invalid("the method"))?;
    outgoing.set_scheme(Some(&target.scheme)).map_err(|()| invalid("the scheme"))?;
    outgoing.set_authority(Some(&target.authority)).map_err(|()| invalid("the host"))?;
    outgoing.set_path_with_query(Some(&target.path_with_query)).map_err(|()| invalid("the path"))?;
    Ok(outgoing)
}

/// The request's options, if it asked for any timeout.
fn options(timeouts: Timeouts) -> Result<Option<RequestOptions>, HttpError> {
    if timeouts == Timeouts::default() {
        return Ok(None);
    }
    let nanos = |d: Option<Duration>| d.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let unsupported = |what: &str| HttpError::InvalidRequest(format!("the host does not support a {what} timeout"));
    let options = RequestOptions::new();
    options.set_connect_timeout(nanos(timeouts.connect)).map_err(|()| unsupported("connect"))?;
    options.set_first_byte_timeout(nanos(timeouts.first_byte)).map_err(|()| unsupported("first-byte"))?;
    options.set_between_bytes_timeout(nanos(timeouts.between_bytes)).map_err(|()| unsupported("between-bytes"))?;
    Ok(Some(options))
}

fn take_body(outgoing: &OutgoingRequest) -> Result<OutgoingBody, HttpError> {
    outgoing.body().map_err(|()| HttpError::Other("the request body was already taken".into()))
}

fn write_body(body: &OutgoingBody, bytes: &[u8]) -> Result<(), HttpError> {
    let stream = body.write().map_err(|()| HttpError::Other("the request body stream was already taken".into()))?;
    for chunk in bytes.chunks(WRITE_CHUNK) {
        stream.blocking_write_and_flush(chunk).map_err(|e| stream_error(e, "request body"))?;
    }
    Ok(())
}

/// Blocks until the response's head arrives or the request fails.
fn wait(future: &FutureIncomingResponse) -> Result<IncomingResponse, HttpError> {
    loop {
        match future.get() {
            Some(Ok(Ok(response))) => return Ok(response),
            Some(Ok(Err(code))) => return Err(code.into()),
            Some(Err(())) => return Err(HttpError::Other("the response was already taken".into())),
            None => future.subscribe().block(),
        }
    }
}

/// Reads the body to its end; the host fails the read once the body passes its cap.
fn read_body(response: &IncomingResponse) -> Result<Vec<u8>, HttpError> {
    let body = response.consume().map_err(|()| HttpError::Other("the response body was already taken".into()))?;
    let stream = body.stream().map_err(|()| HttpError::Other("the response body stream was already taken".into()))?;
    let mut bytes = Vec::new();
    let read = loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break Ok(()),
            Err(e) => break Err(stream_error(e, "response body")),
        }
    };
    drop(stream);
    // Trailers are not read: the host reports a body that failed through the stream.
    drop(IncomingBody::finish(body));
    read.map(|()| bytes)
}

fn stream_error(error: StreamError, what: &str) -> HttpError {
    match error {
        StreamError::Closed => HttpError::Other(format!("the {what} stream closed early")),
        StreamError::LastOperationFailed(error) => io_error(&error, what),
    }
}

/// An I/O error as the HTTP failure behind it, when the host says which.
fn io_error(error: &IoError, what: &str) -> HttpError {
    match http_error_code(error) {
        Some(code) => code.into(),
        None => HttpError::Other(format!("{what}: {}", error.to_debug_string())),
    }
}
