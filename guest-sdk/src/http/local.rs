//! [`Request::send`] off wasm: the handler a unit test set stands in for the upstream.

use super::url::Target;
use super::{HttpError, Request, Response};
use crate::local_host;

/// Hands the request to the test's handler as the upstream would get it: secret
/// placeholders in headers replaced by the values the test set, as the host does.
pub(super) fn send(mut request: Request, _target: Target) -> Result<Response, HttpError> {
    let handler = local_host::http_handler()
        .ok_or_else(|| HttpError::Other("no outbound HTTP off wasm (see testing::set_http_handler)".into()))?;
    for (_, value) in &mut request.headers {
        *value = local_host::reveal(value);
    }
    handler(&request)
}
