//! A destination that echoes a request back (a debugging endpoint, a reflecting proxy)
//! would hand the guest the secret values the host put in place. Before the guest reads
//! a response, every form of a value the step could send is replaced with the placeholder
//! the guest already holds — in the header values, the header names (a header named with
//! a form is dropped), the body across its chunk boundaries (decoded first when it came
//! gzip- or deflate-encoded: `send`), and the trailers. The forms: the value raw;
//! base64 (standard and URL-safe, padded or not) of the value alone and, as the chars that
//! depend on nothing else, of the value at any offset inside a longer base64 text (`Basic
//! user:value`, `Bearer value`); hex (either case); percent-encoded (either case of hex,
//! `+` or `%20` for a space); JSON-escaped (as `serde_json` writes it, and with every
//! non-ASCII character or `/` escaped); HTML-escaped (named and numeric). The same
//! replacement runs again over everything the host keeps of the guest's (the sandbox's
//! `scrub`): a value the guest came by some other way is never stored.
//!
//! What it cannot follow: any other transformation of the value by the destination (a
//! hash, a cipher, a compression the host does not decode, a value split across fields
//! or reversed), and a destination bound to the secret that chooses to reveal it through
//! a side channel (the time it takes, which of two answers it gives). Binding each
//! secret to the destinations that need it (a deployment's `--secret NAME@RULE`) is what
//! keeps every other destination from seeing it at all.

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
            for form in forms(value) {
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

    /// Whether a header name (which HTTP lowercases) holds a form, in any case.
    fn names(&self, name: &[u8]) -> bool {
        self.pairs.iter().any(|(form, _)| name.windows(form.len()).any(|w| w.eq_ignore_ascii_case(form)))
    }

    /// The response's headers (or trailers) with every form replaced, and any header
    /// whose name holds one dropped (a name cannot carry a placeholder); the length goes,
    /// since the body's may change.
    pub(super) fn headers(&self, headers: &mut HeaderMap) {
        headers.remove(http::header::CONTENT_LENGTH);
        let named: Vec<http::HeaderName> =
            headers.keys().filter(|name| self.names(name.as_str().as_bytes())).cloned().collect();
        for name in named {
            headers.remove(name);
        }
        for value in headers.values_mut() {
            if let Some(replaced) = self.apply(value.as_bytes()) {
                *value = http::HeaderValue::from_bytes(&replaced)
                    .unwrap_or_else(|_| http::HeaderValue::from_static("[redacted]"));
            }
        }
    }
}

/// Every form of `value` a destination could hand back (see the module's doc).
fn forms(value: &str) -> Vec<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let raw = value.as_bytes();
    let mut forms = vec![raw.to_vec()];
    for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
        forms.push(engine.encode(raw).into_bytes());
    }
    // Inside a longer base64 text the value's bytes start at some offset in a group of
    // three: for each offset, the groups made of its bytes alone.
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for offset in 1..3 {
            let mut shifted = vec![0u8; offset];
            shifted.extend_from_slice(raw);
            let encoded = engine.encode(&shifted);
            let whole = (offset + raw.len()) / 3;
            if whole >= 2 {
                forms.push(encoded.as_bytes()[4..whole * 4].to_vec());
            }
        }
        let encoded = engine.encode(raw);
        forms.push(encoded.as_bytes()[..(raw.len() / 3) * 4].to_vec());
    }
    forms.push(hex::encode(raw).into_bytes());
    forms.push(hex::encode_upper(raw).into_bytes());
    for (upper, space, every) in [
        (true, "%20", false),
        (false, "%20", false),
        (true, "+", false),
        (false, "+", false),
        (true, "%20", true),
        (false, "%20", true),
    ] {
        forms.push(percent_encoded(raw, upper, space, every).into_bytes());
    }
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json.trim_matches('"');
    forms.push(json.as_bytes().to_vec());
    forms.push(json.replace('/', "\\/").into_bytes());
    forms.push(json_ascii(json).into_bytes());
    for (quote, apostrophe) in [("&quot;", "&#39;"), ("&#34;", "&#x27;"), ("&quot;", "&apos;"), ("&quot;", "'")] {
        let html = value
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', quote)
            .replace('\'', apostrophe);
        forms.push(html.into_bytes());
    }
    forms
}

/// `raw` percent-encoded: every byte but letters and digits when `every`, else but the
/// unreserved ones (RFC 3986); `space` for a space.
fn percent_encoded(raw: &[u8], upper: bool, space: &str, every: bool) -> String {
    let mut out = String::new();
    for &b in raw {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => out.push(char::from(b)),
            b'-' | b'.' | b'_' | b'~' if !every => out.push(char::from(b)),
            b' ' => out.push_str(space),
            _ if upper => out.push_str(&format!("%{b:02X}")),
            _ => out.push_str(&format!("%{b:02x}")),
        }
    }
    out
}

/// JSON text with every non-ASCII character escaped (`\u00e9`, surrogate pairs beyond).
fn json_ascii(json: &str) -> String {
    let mut out = String::new();
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
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
                    Err(mut trailers) => {
                        if let Some(map) = trailers.trailers_mut() {
                            self.redactions.headers(map);
                        }
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

    use super::super::Chunks;

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

    /// The forms a probe rebuilt the value from, each now replaced: percent-encoded, JSON-
    /// and HTML-escaped (a value holding `"` and `\\`), base64 inside longer base64 text
    /// (`Basic user:value`, `Bearer value`) at every offset.
    #[test]
    fn escaped_encoded_and_embedded_forms_are_replaced() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        const ODD: &str = "sk_\"live\\ 7Hq/2vé+X<9>&'p";
        let redactions = Redactions::new([(ODD, PLACEHOLDER.to_owned())]).unwrap();
        let mut echoes = vec![
            serde_json::to_string(ODD).unwrap(),
            serde_json::to_string(&serde_json::json!({ "echo": ODD })).unwrap(),
            percent_encoded(ODD.as_bytes(), true, "%20", false),
            percent_encoded(ODD.as_bytes(), false, "+", false),
            percent_encoded(ODD.as_bytes(), true, "%20", true),
            json_ascii(&serde_json::to_string(ODD).unwrap()),
            ODD.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
                .replace('\'', "&#39;"),
        ];
        for prefix in ["", "u:", "us:", "Bearer ", "user:"] {
            echoes.push(STANDARD.encode(format!("{prefix}{ODD}")));
            echoes.push(URL_SAFE_NO_PAD.encode(format!("{prefix}{ODD} and more")));
        }
        for echo in &echoes {
            let replaced = redactions.apply(echo.as_bytes()).unwrap_or_else(|| panic!("nothing replaced in {echo}"));
            let text = String::from_utf8_lossy(&replaced);
            assert!(text.contains(PLACEHOLDER), "{echo} → {text}");
            // What is left of the value's base64 is at most the two groups at its edges.
            let decoded = STANDARD.decode(text.replace(PLACEHOLDER, "").trim_end_matches('=')).unwrap_or_default();
            assert!(!String::from_utf8_lossy(&decoded).contains("7Hq/2v"), "{echo} → {text}");
        }
    }

    /// A header named with the value is dropped (no name can carry a placeholder), and
    /// trailers are scrubbed like headers.
    #[tokio::test]
    async fn header_names_and_trailers_are_scrubbed() {
        let mut headers = HeaderMap::new();
        headers.insert(http::HeaderName::from_bytes(VALUE.as_bytes()).unwrap(), "1".parse().unwrap());
        headers.insert("x-ok", "fine".parse().unwrap());
        redactions().headers(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        let mut trailers = HeaderMap::new();
        trailers.insert("x-echo", VALUE.parse().unwrap());
        struct WithTrailers(Option<HeaderMap>);
        impl Body for WithTrailers {
            type Data = Bytes;
            type Error = Error;
            fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
                Poll::Ready(self.0.take().map(|t| Ok(Frame::trailers(t))))
            }
        }
        let body = Redacted::new(WithTrailers(Some(trailers)).boxed_unsync(), redactions());
        let collected = body.collect().await.unwrap();
        let trailers = collected.trailers().expect("the trailers").clone();
        assert_eq!(trailers["x-echo"], PLACEHOLDER);
    }

    #[test]
    fn short_values_and_no_secrets_redact_nothing() {
        assert!(Redactions::new([("abc", PLACEHOLDER.to_owned())]).is_some_and(|r| r.apply(b"abc").is_none()));
        assert!(Redactions::new(std::iter::empty::<(&str, String)>()).is_none());
    }
}
