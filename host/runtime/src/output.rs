//! Captured stdout and stderr with a byte cap.
//!
//! A guest may print; what it prints goes to the host's log, tagged with the job. Only
//! the first `cap` bytes are kept; the rest is counted and dropped without failing the
//! guest's write, so printing never changes a step's outcome. The last [`TAIL_BYTES`]
//! are kept besides: a traceback comes at the end of what a failing guest printed, and
//! a failed attempt's record keeps its last lines ([`Captured::tail_lines`]).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// One capped capture buffer; clones share it.
#[derive(Clone, Debug)]
pub struct Capture {
    inner: Arc<Mutex<Captured>>,
    cap: usize,
}

/// Bytes of the end of a stream kept whatever its length.
pub const TAIL_BYTES: usize = 4 << 10;

/// What a capture holds.
#[derive(Debug, Default)]
pub struct Captured {
    /// The first bytes written, up to the cap.
    pub kept: Vec<u8>,
    /// Bytes written beyond the cap.
    pub dropped: u64,
    /// The last bytes written, up to [`TAIL_BYTES`].
    pub tail: std::collections::VecDeque<u8>,
}

impl Captured {
    /// The last `lines` lines of the stream, at most `bytes` of them (whole lines where
    /// they fit, the end of a longer one otherwise), or `None` when nothing was written.
    pub fn tail_lines(&self, lines: usize, bytes: usize) -> Option<String> {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let text = String::from_utf8_lossy(&tail);
        let text = text.trim_end();
        if text.is_empty() {
            return None;
        }
        // `text[start..]` holds `count` whole lines; take more from the end while they fit.
        let (mut start, mut count, mut exhausted) = (text.len(), 0, true);
        for (at, _) in text.rmatch_indices('\n') {
            if count == lines || text.len() - (at + 1) > bytes {
                exhausted = false;
                break;
            }
            start = at + 1;
            count += 1;
        }
        if exhausted && count < lines && text.len() <= bytes {
            start = 0;
        }
        let mut kept = &text[start..];
        if kept.is_empty() {
            // The last line alone is longer than `bytes`: its end.
            let mut from = text.len() - bytes.min(text.len());
            while !text.is_char_boundary(from) {
                from += 1;
            }
            kept = &text[from..];
        }
        Some(kept.to_owned())
    }
}

impl Capture {
    /// A capture that keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self { inner: Arc::new(Mutex::new(Captured::default())), cap }
    }

    /// The most bytes it keeps from the start of the stream.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Takes what was captured so far.
    pub fn take(&self) -> Captured {
        match self.inner.lock() {
            Ok(mut guard) => std::mem::take(&mut *guard),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut guard = match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let room = self.cap.saturating_sub(guard.kept.len());
        let keep = room.min(bytes.len());
        guard.kept.extend_from_slice(&bytes[..keep]);
        guard.dropped += (bytes.len() - keep) as u64;
        let last = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let over = (guard.tail.len() + last.len()).saturating_sub(TAIL_BYTES);
        guard.tail.drain(..over);
        guard.tail.extend(last);
    }

    /// The last lines written so far (see [`Captured::tail_lines`]), leaving them in place.
    pub fn tail_lines(&self, lines: usize, bytes: usize) -> Option<String> {
        let guard = match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.tail_lines(lines, bytes)
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for Capture {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let c = Capture::new(4);
        c.push(b"abc");
        c.push(b"defg");
        let got = c.take();
        assert_eq!(got.kept, b"abcd");
        assert_eq!(got.dropped, 3);
    }

    #[test]
    fn keeps_the_last_lines_of_a_long_stream() {
        let c = Capture::new(8);
        for i in 0..1_000 {
            c.push(format!("line {i}\n").as_bytes());
        }
        c.push(b"Traceback (most recent call last):\nKeyError: 'missing'\n");
        let tail = c.tail_lines(3, 1024).expect("a tail");
        assert_eq!(tail, "line 999\nTraceback (most recent call last):\nKeyError: 'missing'");
        assert_eq!(c.tail_lines(100, 20).expect("a tail"), "KeyError: 'missing'");
        assert_eq!(c.tail_lines(100, 5).expect("a tail"), "sing'", "the end of a line longer than the cap");
        let short = Capture::new(8);
        short.push(b"one\ntwo\n");
        assert_eq!(short.tail_lines(5, 100).expect("a tail"), "one\ntwo", "every line when all fit");
        assert_eq!(Capture::new(8).tail_lines(3, 100), None);
    }
}
