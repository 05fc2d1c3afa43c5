//! Response bodies decoded before they are scrubbed. A destination that echoes a secret
//! gzip- or deflate-encoded hands the guest bytes no scrub can read (a probe rebuilt the
//! value from such bodies). When a step holds secrets, the host asks only for encodings
//! it decodes (`Accept-Encoding: gzip, deflate`), decodes what comes, and hands the guest
//! the identity body; a response in any other encoding is refused. The decoded size
//! counts against the response cap, so a small compressed body cannot become a large one.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::write::{DeflateDecoder, GzDecoder, ZlibDecoder};
use http_body::{Body, Frame};
use wasmtime_wasi_http::{Error, WasiBody};

/// What `Accept-Encoding` a request of a step with secrets carries.
pub(super) const ACCEPTED: &str = "gzip, deflate";

/// How a response's body is encoded, as far as the host can decode it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Encoding {
    /// None (`identity`, or no header).
    Identity,
    /// `gzip` (or `x-gzip`).
    Gzip,
    /// `deflate`: zlib-wrapped as the standard says, or raw as some servers send it.
    Deflate,
}

impl Encoding {
    /// The encoding a `Content-Encoding` header names, or `None` for one the host cannot
    /// decode (or a chain of several).
    pub(super) fn of(header: Option<&http::HeaderValue>) -> Option<Self> {
        let Some(value) = header else { return Some(Self::Identity) };
        match value.to_str().ok()?.trim().to_ascii_lowercase().as_str() {
            "" | "identity" => Some(Self::Identity),
            "gzip" | "x-gzip" => Some(Self::Gzip),
            "deflate" => Some(Self::Deflate),
            _ => None,
        }
    }
}

enum Decoder {
    Gzip(GzDecoder<Vec<u8>>),
    Zlib(ZlibDecoder<Vec<u8>>),
    Raw(DeflateDecoder<Vec<u8>>),
    /// `deflate` before its first two bytes tell zlib from raw.
    Sniffing(Vec<u8>),
}

impl Decoder {
    fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Gzip(d) => d.write_all(data),
            Self::Zlib(d) => d.write_all(data),
            Self::Raw(d) => d.write_all(data),
            Self::Sniffing(seen) => {
                seen.extend_from_slice(data);
                if seen.len() < 2 {
                    return Ok(());
                }
                // A zlib header: method 8, and the two bytes a multiple of 31.
                let zlib = seen[0] & 0x0f == 8 && (u16::from(seen[0]) << 8 | u16::from(seen[1])) % 31 == 0;
                let seen = std::mem::take(seen);
                *self = if zlib {
                    Self::Zlib(ZlibDecoder::new(Vec::new()))
                } else {
                    Self::Raw(DeflateDecoder::new(Vec::new()))
                };
                self.write(&seen)
            }
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        match self {
            Self::Gzip(d) => d.try_finish(),
            Self::Zlib(d) => d.try_finish(),
            Self::Raw(d) => d.try_finish(),
            Self::Sniffing(seen) if seen.is_empty() => Ok(()),
            Self::Sniffing(_) => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "one byte of deflate")),
        }
    }

    /// The bytes decoded so far, taken.
    fn take(&mut self) -> Vec<u8> {
        match self {
            Self::Gzip(d) => std::mem::take(d.get_mut()),
            Self::Zlib(d) => std::mem::take(d.get_mut()),
            Self::Raw(d) => std::mem::take(d.get_mut()),
            Self::Sniffing(_) => Vec::new(),
        }
    }
}

/// A response body decoded as it arrives, its decoded size bounded.
pub(super) struct Decoded {
    inner: WasiBody,
    decoder: Decoder,
    cap: u64,
    out: u64,
    trailers: Option<Frame<Bytes>>,
    ended: bool,
}

impl Decoded {
    /// `inner`, encoded as `encoding` (not [`Encoding::Identity`]), decoded up to `cap` bytes.
    pub(super) fn new(inner: WasiBody, encoding: Encoding, cap: u64) -> Self {
        let decoder = match encoding {
            Encoding::Gzip => Decoder::Gzip(GzDecoder::new(Vec::new())),
            Encoding::Deflate | Encoding::Identity => Decoder::Sniffing(Vec::new()),
        };
        Self { inner, decoder, cap, out: 0, trailers: None, ended: false }
    }

    /// What was decoded, as a frame, or the error of a body over the cap.
    fn emit(&mut self) -> Option<Result<Frame<Bytes>, Error>> {
        let decoded = self.decoder.take();
        if decoded.is_empty() {
            return None;
        }
        self.out = self.out.saturating_add(decoded.len() as u64);
        if self.out > self.cap {
            return Some(Err(Error::HttpResponseBodySize(Some(self.cap))));
        }
        Some(Ok(Frame::data(Bytes::from(decoded))))
    }
}

impl Body for Decoded {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        loop {
            if self.ended {
                return Poll::Ready(self.trailers.take().map(Ok));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    self.ended = true;
                    if self.decoder.finish().is_err() {
                        return Poll::Ready(Some(Err(Error::HttpProtocolError)));
                    }
                    if let Some(frame) = self.emit() {
                        return Poll::Ready(Some(frame));
                    }
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Err(trailers) => {
                        self.trailers = Some(trailers);
                        self.ended = true;
                        if self.decoder.finish().is_err() {
                            return Poll::Ready(Some(Err(Error::HttpProtocolError)));
                        }
                        if let Some(frame) = self.emit() {
                            return Poll::Ready(Some(frame));
                        }
                    }
                    Ok(data) => {
                        if self.decoder.write(&data).is_err() {
                            return Poll::Ready(Some(Err(Error::HttpProtocolError)));
                        }
                        if let Some(frame) = self.emit() {
                            return Poll::Ready(Some(frame));
                        }
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.trailers.is_none()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use flate2::Compression;
    use http_body_util::BodyExt;

    use super::*;

    use super::super::Chunks;

    fn body(bytes: Vec<u8>, chunk: usize) -> WasiBody {
        Chunks(bytes.chunks(chunk).map(Bytes::copy_from_slice).collect()).boxed_unsync()
    }

    async fn decoded(encoded: Vec<u8>, encoding: Encoding, chunk: usize, cap: u64) -> Result<Vec<u8>, Error> {
        let collected = Decoded::new(body(encoded, chunk), encoding, cap).collect().await?;
        Ok(collected.to_bytes().to_vec())
    }

    #[tokio::test]
    async fn gzip_zlib_and_raw_deflate_are_decoded_in_any_chunking() {
        let plain = b"the secret sk_live_7Hq2vX9pLmN4 echoed back ".repeat(50);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        zlib.write_all(&plain).unwrap();
        let zlib = zlib.finish().unwrap();
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(&plain).unwrap();
        let raw = raw.finish().unwrap();
        for chunk in [1, 2, 5, 64, 100_000] {
            assert_eq!(decoded(gz.clone(), Encoding::Gzip, chunk, 1 << 20).await.unwrap(), plain, "gzip by {chunk}");
            assert_eq!(decoded(zlib.clone(), Encoding::Deflate, chunk, 1 << 20).await.unwrap(), plain);
            assert_eq!(decoded(raw.clone(), Encoding::Deflate, chunk, 1 << 20).await.unwrap(), plain);
        }
    }

    #[tokio::test]
    async fn a_body_that_decodes_past_the_cap_or_does_not_decode_is_an_error() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), Compression::best());
        gz.write_all(&vec![0u8; 10 << 20]).unwrap();
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
        assert!(matches!(decoded(bomb, Encoding::Gzip, 4096, 1 << 20).await, Err(Error::HttpResponseBodySize(_))));
        assert!(matches!(
            decoded(b"not gzip at all".to_vec(), Encoding::Gzip, 4, 1 << 20).await,
            Err(Error::HttpProtocolError)
        ));
        assert_eq!(Encoding::of(Some(&http::HeaderValue::from_static("br"))), None);
        assert_eq!(Encoding::of(Some(&http::HeaderValue::from_static("gzip, br"))), None);
        assert_eq!(Encoding::of(Some(&http::HeaderValue::from_static("GZIP"))), Some(Encoding::Gzip));
        assert_eq!(Encoding::of(None), Some(Encoding::Identity));
    }
}
