//! Why a request got no response: [`HttpError`], from `wasi:http`'s `error-code`.

use std::fmt;

use wasip2::http::types::ErrorCode;

use crate::StepError;

/// Why a request got no response.
///
/// A response the upstream sent, whatever its status, is not an error here: see
/// [`Response::error_for_status`](super::Response::error_for_status).
///
/// Converts into a [`StepError`], so `?` in a step reports it: [`HttpError::Denied`] and
/// [`HttpError::InvalidRequest`] are refused (the same request fails the same way every
/// time), anything else is retryable with code `upstream-unavailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The host's policy refused the request (`HTTP-request-denied`): its destination is
    /// not allowed for this tenant and deployment, or the step call made more requests
    /// than the host allows one call.
    Denied,
    /// A phase ran out of time: DNS, connect, the first byte of the response, the gap
    /// between two body chunks, or the whole exchange (the host bounds each one).
    Timeout,
    /// The response body is larger than the host lets a step receive.
    TooLarge,
    /// The host has as many outbound connections open as it allows (for the process or
    /// the tenant); another attempt later may find one free.
    ConnectionLimit,
    /// The destination could not be reached or did not speak TLS as it should: an
    /// unresolved name, a refused or reset connection, a bad certificate.
    Connect(String),
    /// The request cannot be sent as built: a malformed URL, header or method, or a body
    /// that did not serialise. Sending it again cannot help.
    InvalidRequest(String),
    /// Any other failure: a protocol error, a body cut short, an error inside the host.
    Other(String),
}

/// Leads with the `error-code` name the host's records use where one name fits, so a
/// log line and the host's record of the request can be matched up.
impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied => f.write_str("HTTP-request-denied: the host's outbound policy does not allow this request"),
            Self::Timeout => f.write_str("timeout: no answer in time"),
            Self::TooLarge => f.write_str("HTTP-response-body-size: the response body is larger than the host allows"),
            Self::ConnectionLimit => f.write_str("connection-limit-reached: too many outbound connections are open"),
            Self::Connect(cause) => write!(f, "could not connect: {cause}"),
            Self::InvalidRequest(cause) => write!(f, "invalid request: {cause}"),
            Self::Other(cause) => f.write_str(cause),
        }
    }
}

impl std::error::Error for HttpError {}

/// The message names the class of failure only: the upstream's address and the cause
/// go to the host log as the error's detail.
impl From<HttpError> for StepError {
    fn from(error: HttpError) -> Self {
        let detail = error.to_string();
        match error {
            HttpError::Denied => {
                StepError::refused("http-request-denied", "the outbound request is not allowed by policy")
            }
            HttpError::InvalidRequest(_) => {
                StepError::refused("http-request-invalid", "the outbound request is malformed")
            }
            _ => StepError::retryable("upstream-unavailable", "the upstream service did not answer"),
        }
        .with_detail(detail)
    }
}

impl From<ErrorCode> for HttpError {
    fn from(code: ErrorCode) -> Self {
        use ErrorCode as E;
        match code {
            E::HttpRequestDenied | E::DestinationIpProhibited => Self::Denied,
            E::DnsTimeout
            | E::ConnectionTimeout
            | E::ConnectionReadTimeout
            | E::ConnectionWriteTimeout
            | E::HttpResponseTimeout => Self::Timeout,
            E::HttpResponseBodySize(_) => Self::TooLarge,
            E::ConnectionLimitReached => Self::ConnectionLimit,
            E::DnsError(_)
            | E::DestinationNotFound
            | E::DestinationUnavailable
            | E::DestinationIpUnroutable
            | E::ConnectionRefused
            | E::ConnectionTerminated
            | E::TlsProtocolError
            | E::TlsCertificateError
            | E::TlsAlertReceived(_) => Self::Connect(describe(&code)),
            E::HttpRequestLengthRequired
            | E::HttpRequestBodySize(_)
            | E::HttpRequestMethodInvalid
            | E::HttpRequestUriInvalid
            | E::HttpRequestUriTooLong
            | E::HttpRequestHeaderSectionSize(_)
            | E::HttpRequestHeaderSize(_)
            | E::HttpRequestTrailerSectionSize(_)
            | E::HttpRequestTrailerSize(_) => Self::InvalidRequest(describe(&code)),
            _ => Self::Other(describe(&code)),
        }
    }
}

/// The error code's WIT name (as the host's records spell it), with what detail it carries.
fn describe(code: &ErrorCode) -> String {
    use ErrorCode as E;
    let name = match code {
        E::DnsTimeout => "DNS-timeout",
        E::DnsError(_) => "DNS-error",
        E::DestinationNotFound => "destination-not-found",
        E::DestinationUnavailable => "destination-unavailable",
        E::DestinationIpProhibited => "destination-IP-prohibited",
        E::DestinationIpUnroutable => "destination-IP-unroutable",
        E::ConnectionRefused => "connection-refused",
        E::ConnectionTerminated => "connection-terminated",
        E::ConnectionTimeout => "connection-timeout",
        E::ConnectionReadTimeout => "connection-read-timeout",
        E::ConnectionWriteTimeout => "connection-write-timeout",
        E::ConnectionLimitReached => "connection-limit-reached",
        E::TlsProtocolError => "TLS-protocol-error",
        E::TlsCertificateError => "TLS-certificate-error",
        E::TlsAlertReceived(_) => "TLS-alert-received",
        E::HttpRequestDenied => "HTTP-request-denied",
        E::HttpRequestLengthRequired => "HTTP-request-length-required",
        E::HttpRequestBodySize(_) => "HTTP-request-body-size",
        E::HttpRequestMethodInvalid => "HTTP-request-method-invalid",
        E::HttpRequestUriInvalid => "HTTP-request-URI-invalid",
        E::HttpRequestUriTooLong => "HTTP-request-URI-too-long",
        E::HttpRequestHeaderSectionSize(_) => "HTTP-request-header-section-size",
        E::HttpRequestHeaderSize(_) => "HTTP-request-header-size",
        E::HttpRequestTrailerSectionSize(_) => "HTTP-request-trailer-section-size",
        E::HttpRequestTrailerSize(_) => "HTTP-request-trailer-size",
        E::HttpResponseIncomplete => "HTTP-response-incomplete",
        E::HttpResponseHeaderSectionSize(_) => "HTTP-response-header-section-size",
        E::HttpResponseHeaderSize(_) => "HTTP-response-header-size",
        E::HttpResponseBodySize(_) => "HTTP-response-body-size",
        E::HttpResponseTrailerSectionSize(_) => "HTTP-response-trailer-section-size",
        E::HttpResponseTrailerSize(_) => "HTTP-response-trailer-size",
        E::HttpResponseTransferCoding(_) => "HTTP-response-transfer-coding",
        E::HttpResponseContentCoding(_) => "HTTP-response-content-coding",
        E::HttpResponseTimeout => "HTTP-response-timeout",
        E::HttpUpgradeFailed => "HTTP-upgrade-failed",
        E::HttpProtocolError => "HTTP-protocol-error",
        E::LoopDetected => "loop-detected",
        E::ConfigurationError => "configuration-error",
        E::InternalError(_) => "internal-error",
    };
    let detail = match code {
        E::DnsError(payload) => payload.rcode.clone(),
        E::TlsAlertReceived(payload) => payload.alert_message.clone(),
        E::HttpResponseTransferCoding(coding) | E::HttpResponseContentCoding(coding) => coding.clone(),
        E::InternalError(message) => message.clone(),
        _ => None,
    };
    match detail {
        Some(detail) => format!("{name} ({detail})"),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_map_onto_the_classes_a_step_acts_on() {
        assert_eq!(HttpError::from(ErrorCode::HttpRequestDenied), HttpError::Denied);
        assert_eq!(HttpError::from(ErrorCode::HttpResponseTimeout), HttpError::Timeout);
        assert_eq!(HttpError::from(ErrorCode::DnsTimeout), HttpError::Timeout);
        assert_eq!(HttpError::from(ErrorCode::HttpResponseBodySize(Some(16))), HttpError::TooLarge);
        assert_eq!(HttpError::from(ErrorCode::ConnectionLimitReached), HttpError::ConnectionLimit);
        assert_eq!(HttpError::from(ErrorCode::ConnectionRefused), HttpError::Connect("connection-refused".into()));
        assert_eq!(
            HttpError::from(ErrorCode::InternalError(Some("boom".into()))),
            HttpError::Other("internal-error (boom)".into())
        );
    }

    #[test]
    fn denied_and_malformed_are_refused_the_rest_retried() {
        let denied = StepError::from(HttpError::Denied);
        assert_eq!((denied.is_retryable(), denied.code()), (false, "http-request-denied"));
        let invalid = StepError::from(HttpError::InvalidRequest("no host".into()));
        assert_eq!((invalid.is_retryable(), invalid.code()), (false, "http-request-invalid"));
        for error in [HttpError::Timeout, HttpError::TooLarge, HttpError::Connect("connection-refused".into())] {
            let step = StepError::from(error.clone());
            assert_eq!((step.is_retryable(), step.code()), (true, "upstream-unavailable"));
            assert_eq!(step.detail(), Some(error.to_string().as_str()));
        }
    }
}
