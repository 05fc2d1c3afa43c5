//! Captured stdout and stderr with a byte cap.
//!
//! A guest may print; what it prints goes to the host's log, tagged with the job. Only
//! the first `cap` bytes are kept; the rest is counted and dropped without failing the
//! guest's write, so printing never changes a step's outcome.

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

/// What a capture holds.
#[derive(Debug, Default)]
pub struct Captured {
    /// The first bytes written, up to the cap.
    pub kept: Vec<u8>,
    /// Bytes written beyond the cap.
    pub dropped: u64,
}

impl Capture {
    /// A capture that keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self { inner: Arc::new(Mutex::new(Captured::default())), cap }
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
}
