//! Server-sent events, read from a streamed answer as they arrive: `event:` names them,
//! `data:` lines (joined by newlines) carry them, a blank line ends each.

use crate::Error;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub name: String,
    pub data: String,
}

/// The events of one streamed answer.
#[derive(Debug)]
pub(crate) struct Events {
    response: reqwest::Response,
    base: String,
    /// Bytes read but not yet a whole line (a chunk may end mid-character).
    buffer: Vec<u8>,
    name: String,
    data: String,
    ended: bool,
}

impl Events {
    pub(crate) fn new(response: reqwest::Response, base: String) -> Self {
        Self { response, base, buffer: Vec::new(), name: String::new(), data: String::new(), ended: false }
    }

    /// The next event; `None` once the host ended the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<Event>, Error> {
        loop {
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                if let Some(event) = self.line(line.trim_end_matches(['\n', '\r'])) {
                    return Ok(Some(event));
                }
            }
            if self.ended {
                return Ok(None);
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                Ok(None) => self.ended = true,
                Err(source) => return Err(Error::Transport { base: self.base.clone(), source }),
            }
        }
    }

    /// Takes one line; answers the event a blank line completes.
    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            if self.data.is_empty() && self.name.is_empty() {
                return None;
            }
            let name = if self.name.is_empty() { "message".to_owned() } else { std::mem::take(&mut self.name) };
            return Some(Event { name, data: std::mem::take(&mut self.data) });
        }
        if let Some(value) = line.strip_prefix("event:") {
            self.name = value.trim_start().to_owned();
        } else if let Some(value) = line.strip_prefix("data:") {
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
        None
    }
}
