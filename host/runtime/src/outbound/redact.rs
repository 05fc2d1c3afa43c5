//! A destination that echoes a request back (a debugging endpoint, a reflecting proxy)
//! would hand the guest the secret values the host put in place. Before the guest reads
//! a response, every form of a value the step could send — raw, base64 (standard and
//! URL-safe, padded or not), hex (either case) — is replaced with the placeholder the
//! guest already holds, in the headers and across the body's chunk boundaries. The same
//! replacement runs again over everything the host keeps of the guest's (the sandbox's
//! `scrub`): a value the guest came by some other way is never stored.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use wasmtime_wasi_http::{Error, WasiBody};

use super::replace;

/// Forms shorter than this are left alone: they would rewrite ordinary text.
const SHORTEST_FORM: usize = 4;

/// What to replace with what, longest first.
#[derive(Debug)]
pub(crate) struct Redactions {
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    longest: usize,
}

impl Redactions {
    /// The forms of each `(value, placeholder)`; none when there is nothing to hide.
    pub(crate) fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, String)>) -> Option<Arc<Self>> {
        let mut pairs = Vec::new();
        for (value, placeholder) in secrets {
            let raw = value.as_bytes();
            let b64 = [
                base64::engine::general_purpose::STANDARD.encode(raw),
                base64::engine::general_purpose::STANDARD_NO_PAD.encode(raw),
                base64::engine::general_purpose::URL_SAFE.encode(raw),
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw),
            ];
            let hex = [hex::encode(raw), hex::encode_upper(raw)];
            for form in std::iter::once(raw.to_vec()).chain(b64.into_iter().chain(hex).map(String::into_bytes)) {
                if form.len() >= SHORTEST_FORM && !pairs.iter().any(|(f, _)| *f == form) {
                    pairs.push((form, placeholder.clone().into_bytes()));
                }
            }
        }
        // A padded form holds the unpadded one: replace the longer first.
        pairs.sort_by_key(|(form, _)| std::cmp::Reverse(form.len()));
        let longest = pairs.first().map(|(f, _)| f.len())?;
        Some(Arc::new(Self { pairs, longest }))
    }

    /// `bytes` with every form replaced, or `None` if it holds none.
    pub(crate) fn apply(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        for (form, placeholder) in &self.pairs {
            if let Some(replaced) = replace(out.as_deref().unwrap_or(bytes), form, placeholder) {
                out = Some(replaced);
            }
        }
        out
    }

    /// The response's headers with every form replaced; the length goes, since the
    /// body's may change.
    pub(super) fn headers(&self, headers: &mut HeaderMap) {
        headers.remove(http::header::CONTENT_LENGTH);
        for value in headers.values_mut() {
            if let Some(replaced) = self.apply(value.as_bytes())
                && let Ok(replaced) = http::HeaderValue::from_bytes(&replaced)
            {
                *value = replaced;
            }
        }
    }
}

/// A response body with every form replaced; it holds back the last `longest - 1`
/// bytes of each chunk until the next one shows whether a form spans the two.
pub(super) struct Redacted {
    inner: WasiBody,
    redactions: Arc<Redactions>,
    held: Vec<u8>,
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl Redacted {
    pub(super) fn new(inner: WasiBody, redactions: Arc<Redactions>) -> Self {
        Self { inner, redactions, held: Vec::new(), trailers: None, ended: false }
    }

    /// What is held, replaced, as the last data frame.
    fn flush(&mut self) -> Option<Frame<Bytes>> {
        if self.held.is_empty() {
            return None;
        }
        let held = std::mem::take(&mut self.held);
        let out = self.redactions.apply(&held).unwrap_or(held);
        Some(Frame::data(Bytes::from(out)))
    }
}

impl Body for Redacted {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        loop {
            if self.ended {
                if let Some(frame) = self.flush() {
                    return Poll::Ready(Some(Ok(frame)));
                }
                return Poll::Ready(self.trailers.take().map(Ok));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => self.ended = true,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Err(trailers) => {
                        self.trailers = Some(trailers);
                        self.ended = true;
                    }
                    Ok(data) => {
                        let mut held = std::mem::take(&mut self.held);
                        held.extend_from_slice(&data);
                        let held = self.redactions.apply(&held).unwrap_or(held);
                        let keep = self.redactions.longest - 1;
                        if held.len() <= keep {
                            self.held = held;
                            continue;
                        }
                        let cut = held.len() - keep;
                        self.held = held[cut..].to_vec();
                        let mut out = held;
                        out.truncate(cut);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.held.is_empty() && self.trailers.is_none()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    const VALUE: &str = "sk_live_7Hq2vX9pLmN4";
    const PLACEHOLDER: &str = "{{spindle-secret:stripe:00}}";

    fn redactions() -> Arc<Redactions> {
        Redactions::new([(VALUE, PLACEHOLDER.to_owned())]).unwrap()
    }

    /// Every form of the value, each echoed once.
    fn echo() -> String {
        let raw = VALUE.as_bytes();
        format!(
            "raw {VALUE} std {} url {} nopad {} hex {} HEX {} end",
            base64::engine::general_purpose::STANDARD.encode(raw),
            base64::engine::general_purpose::URL_SAFE.encode(raw),
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(raw),
            hex::encode(raw),
            hex::encode_upper(raw)
        )
    }

    fn no_form_left(text: &str) {
        let raw = VALUE.as_bytes();
        for form in [
            VALUE.to_owned(),
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(raw),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw),
            hex::encode(raw),
            hex::encode_upper(raw),
        ] {
            assert!(!text.contains(&form), "{form} left in {text}");
        }
    }

    /// A body of the given chunks, in order.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = Error;

        fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
            Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
        }
    }

    #[test]
    fn every_form_of_a_value_is_replaced_in_headers() {
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", format!("Bearer {VALUE}").parse().unwrap());
        headers.insert("content-length", "12".parse().unwrap());
        redactions().headers(&mut headers);
        assert_eq!(headers["x-echo"], format!("Bearer {PLACEHOLDER}"));
        assert!(!headers.contains_key("content-length"), "the body's length may change");
    }

    #[tokio::test]
    async fn every_form_is_replaced_across_any_chunking() {
        let text = echo();
        for size in [1, 2, 3, 7, 19, 64, text.len()] {
            let inner = Chunks(text.as_bytes().chunks(size).map(Bytes::copy_from_slice).collect()).boxed_unsync();
            let body = Redacted::new(inner, redactions()).collect().await.unwrap().to_bytes();
            let got = String::from_utf8(body.to_vec()).unwrap();
            no_form_left(&got);
            assert!(got.starts_with(&format!("raw {PLACEHOLDER} std {PLACEHOLDER}")), "chunks of {size}: {got}");
            assert!(got.ends_with(&format!("HEX {PLACEHOLDER} end")), "chunks of {size}: {got}");
        }
    }

    #[test]
    fn short_values_and_no_secrets_redact_nothing() {
        assert!(Redactions::new([("abc", PLACEHOLDER.to_owned())]).is_some_and(|r| r.apply(b"abc").is_none()));
        assert!(Redactions::new(std::iter::empty::<(&str, String)>()).is_none());
    }
}
