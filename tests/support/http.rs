//! A small HTTP/1.1 server on 127.0.0.1 for outbound tests: it counts the connections it
//! accepts, keeps every request it reads, and answers as the test says — or never, or a
//! byte a second, or without end.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// A request as the server read it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The method.
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// Headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Seen {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// How the server answers one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status and a body.
    Answer(u16, Vec<u8>),
    /// Reads the request and never answers.
    Silent,
    /// Headers, then one byte of body a second.
    Trickle,
    /// Headers (no length), then zeros without end.
    Flood,
    /// A status and a body, after a pause.
    Later(Duration, u16, Vec<u8>),
    /// A status, extra header lines (`name: value`), and a body.
    With(u16, Vec<(String, String)>, Vec<u8>),
}

type Answer = Arc<dyn Fn(&Seen, usize) -> Reply + Send + Sync>;

/// The server.
#[derive(Debug)]
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    arrived: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// A server answering request number `n` (from 0) with `answer(request, n)`.
    pub async fn start(answer: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a test server");
        let addr = listener.local_addr().expect("its address");
        let accepts = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let answer: Answer = Arc::new(answer);
        let task = tokio::spawn({
            let (accepts, seen, arrived) = (accepts.clone(), seen.clone(), arrived.clone());
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    accepts.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(stream, answer.clone(), seen.clone(), arrived.clone()));
                }
            }
        });
        Self { addr, accepts, seen, arrived, task }
    }

    /// A server that answers 200 with `body` to everything.
    pub async fn ok(body: &'static str) -> Self {
        Self::start(move |_, _| Reply::Answer(200, body.as_bytes().to_vec())).await
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    /// Requests read so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// Waits until at least `n` requests have been read.
    pub async fn until_seen(&self, n: usize) -> Vec<Seen> {
        loop {
            let notified = self.arrived.notified();
            let seen = self.seen();
            if seen.len() >= n {
                return seen;
            }
            let _ = tokio::time::timeout(Duration::from_secs(120), notified).await;
            assert!(self.seen().len() >= n || !self.task.is_finished(), "the test server stopped");
        }
    }
}

async fn serve(mut stream: TcpStream, answer: Answer, seen: Arc<Mutex<Vec<Seen>>>, arrived: Arc<Notify>) {
    loop {
        let Some(request) = read_request(&mut stream).await else { return };
        let n = {
            let mut seen = seen.lock().expect("seen");
            seen.push(request.clone());
            seen.len() - 1
        };
        arrived.notify_waiters();
        match answer(&request, n) {
            Reply::Answer(status, body) => {
                let head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n", body.len());
                if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&body).await.is_err() {
                    return;
                }
            }
            Reply::With(status, headers, body) => {
                let mut head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&body).await.is_err() {
                    return;
                }
            }
            Reply::Silent => {
                std::future::pending::<()>().await;
            }
            Reply::Later(pause, status, body) => {
                tokio::time::sleep(pause).await;
                let head = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n", body.len());
                if stream.write_all(head.as_bytes()).await.is_err() || stream.write_all(&body).await.is_err() {
                    return;
                }
            }
            Reply::Trickle => {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n").await;
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    if stream.write_all(b"x").await.is_err() {
                        return;
                    }
                }
            }
            Reply::Flood => {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n").await;
                let chunk = vec![0u8; 64 * 1024];
                while stream.write_all(&chunk).await.is_ok() {}
                return;
            }
        }
    }
}

/// One request off `stream`: head, then a `content-length` body.
async fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut buffer = Vec::new();
    let mut byte = [0u8; 1];
    while !buffer.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        buffer.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buffer).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        read_chunked(stream).await?
    } else {
        let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.ok()?;
        body
    };
    Some(Seen { method, target, headers, body })
}

/// A chunked body: hex size lines, each chunk, until the empty one.
async fn read_chunked(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            line.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&line[..line.len() - 2]).into_owned();
        let size = usize::from_str_radix(text.split(';').next()?.trim(), 16).ok()?;
        let mut chunk = vec![0u8; size + 2];
        stream.read_exact(&mut chunk).await.ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
