//! The streamed chat requests to an `http://` target over plain HTTP/1.1, read by the request's
//! own task.
//!
//! A streaming reply is one small chunk per token, hundreds per request. Through reqwest each
//! chunk was read by hyper's connection task and handed to the request's task over a channel:
//! two task polls, a wake-up and the dispatcher per chunk, about 30 % of the user-space CPU of
//! reading the replies (perf, docs/PERFORMANCE.md). Here the task that sent the request reads
//! its socket, splits the chunked framing in its read buffer and hands the data on in place.
//! `https://` targets and the small requests (`/v1/models`, `/server_info`, `/metrics`) stay on
//! reqwest. Response heads are parsed with `httparse`; bodies may be chunked, sized or
//! close-delimited; connections are kept alive and pooled.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request body: ready, or still being built (sent chunked when it is done: the request's head
/// goes first).
pub enum Body {
    Ready(Vec<Bytes>),
    Later(Pin<Box<dyn Future<Output = Result<Vec<Bytes>, String>> + Send>>),
}

/// Why a request failed.
#[derive(Debug)]
pub enum Error {
    /// No connection (refused, unreachable, connect timeout).
    Connect(String),
    /// The connection failed before a complete response head.
    Request(String),
    /// The response body ended early or was malformed.
    Body(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Connect(m) | Error::Request(m) | Error::Body(m) => f.write_str(m),
        }
    }
}

/// Idle keep-alive connections kept per client; more are closed after their response.
const MAX_IDLE: usize = 4096;
/// A response head longer than this is refused.
const MAX_HEAD: usize = 64 << 10;
/// An error body is read up to this many bytes.
const MAX_ERROR_BODY: usize = 1 << 20;
const READ_BUF: usize = 16 << 10;

/// One origin (`http://host:port`), its pooled connections and the request-target prefix.
pub struct Client {
    host: String,
    port: u16,
    /// `Host` header value.
    authority: String,
    /// The base URL's path without a trailing slash (`""` for the root).
    prefix: String,
    connect_timeout: Duration,
    idle: Mutex<Vec<TcpStream>>,
}

impl Client {
    /// A client for `base_url`, or `None` when it is not a plain `http://` URL (the caller then
    /// uses reqwest).
    pub fn for_url(base_url: &str, connect_timeout: Duration) -> Option<Client> {
        let u = reqwest::Url::parse(base_url).ok()?;
        if u.scheme() != "http" || u.query().is_some() || !u.username().is_empty() {
            return None;
        }
        let port = u.port_or_known_default()?;
        // `[::1]` for an IPv6 address: bracketed in `Host`, bare for connecting.
        let authority = format!("{}:{port}", u.host_str()?);
        let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']').to_string();
        Some(Client {
            host,
            port,
            authority,
            prefix: u.path().trim_end_matches('/').to_string(),
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Connections waiting for a request.
    #[cfg(test)]
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// A pooled connection still open, or a new one; `true` when pooled.
    async fn checkout(&self) -> Result<(TcpStream, bool), Error> {
        loop {
            let s = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some(s) = s else { break };
            // The server may have closed it while idle (its keep-alive timeout): readable now
            // means closed (or stray bytes), either way unusable.
            let mut probe = [0u8; 1];
            if let Err(e) = s.try_read(&mut probe)
                && e.kind() == std::io::ErrorKind::WouldBlock
            {
                return Ok((s, true));
            }
        }
        let addr = &self.authority;
        let s = match tokio::time::timeout(self.connect_timeout, TcpStream::connect((self.host.as_str(), self.port))).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::Connect(format!("cannot connect to {addr}: {e}"))),
            Err(_) => return Err(Error::Connect(format!("cannot connect to {addr}: no answer within {:?}", self.connect_timeout))),
        };
        // One small write per token on the server's side and small requests here: no Nagle delay.
        let _ = s.set_nodelay(true);
        Ok((s, false))
    }

    fn checkin(&self, s: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(s);
        }
    }

    /// `POST {prefix}{path}` with `headers` and `body` (JSON); returns once the response head is
    /// in. A pooled connection that turns out closed before any response byte is retried once on
    /// a new connection.
    pub async fn post<'a>(&'a self, path: &str, headers: &[(&str, &str)], mut body: Body) -> Result<Response<'a>, Error> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (stream, pooled) = self.checkout().await?;
            match self.exchange(stream, path, headers, &mut body).await {
                Ok(r) => return Ok(r),
                // A keep-alive connection the server closed as it was taken: once more, fresh.
                Err((_, true)) if pooled && attempt == 1 => continue,
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One request on `stream`. The error's flag: nothing of a response came back (a retry on a
    /// fresh connection is safe to try when the connection was pooled).
    async fn exchange<'a>(
        &'a self,
        mut stream: TcpStream,
        path: &str,
        headers: &[(&str, &str)],
        body: &mut Body,
    ) -> Result<Response<'a>, (Error, bool)> {
        let mut head = format!("POST {}{} HTTP/1.1\r\nhost: {}\r\n", self.prefix, path, self.authority);
        for (k, v) in headers {
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        let io = |e: std::io::Error| (Error::Request(format!("sending the request: {e}")), true);
        match body {
            Body::Ready(parts) => {
                let len: usize = parts.iter().map(Bytes::len).sum();
                head.push_str(&format!("content-length: {len}\r\n\r\n"));
                let mut slices: Vec<IoSlice> = Vec::with_capacity(parts.len() + 1);
                slices.push(IoSlice::new(head.as_bytes()));
                slices.extend(parts.iter().map(|p| IoSlice::new(p)));
                write_all_vectored(&mut stream, &mut slices).await.map_err(io)?;
            }
            Body::Later(fut) => {
                head.push_str("transfer-encoding: chunked\r\n\r\n");
                stream.write_all(head.as_bytes()).await.map_err(io)?;
                let parts = fut.await.map_err(|e| (Error::Request(format!("building the request body: {e}")), false))?;
                // Kept for a retry: the build is not repeated.
                *body = Body::Ready(parts);
                let Body::Ready(parts) = body else { unreachable!("just set") };
                let sizes: Vec<String> = parts.iter().filter(|p| !p.is_empty()).map(|p| format!("{:x}\r\n", p.len())).collect();
                let mut slices: Vec<IoSlice> = Vec::with_capacity(3 * parts.len() + 1);
                for (p, size) in parts.iter().filter(|p| !p.is_empty()).zip(&sizes) {
                    slices.push(IoSlice::new(size.as_bytes()));
                    slices.push(IoSlice::new(p));
                    slices.push(IoSlice::new(b"\r\n"));
                }
                slices.push(IoSlice::new(b"0\r\n\r\n"));
                write_all_vectored(&mut stream, &mut slices).await.map_err(io)?;
            }
        }
        let mut r = Response {
            client: self,
            status: 0,
            headers: Vec::new(),
            stream: Some(stream),
            buf: vec![0; READ_BUF],
            pos: 0,
            end: 0,
            framing: Framing::Done,
            keep_alive: false,
        };
        r.read_head().await?;
        Ok(r)
    }
}

/// Writes every byte of `slices` (as few `writev` calls as the socket allows).
async fn write_all_vectored(stream: &mut TcpStream, slices: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    let mut bufs = slices;
    while !bufs.is_empty() {
        // The kernel takes at most IOV_MAX (1024) slices per call.
        let n = stream.write_vectored(&bufs[..bufs.len().min(1024)]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Content-Length`: bytes left.
    Length(u64),
    /// Until the server closes the connection.
    Close,
    /// Chunked: a size line next.
    ChunkSize,
    /// Chunked: bytes of the current chunk left.
    ChunkData(u64),
    /// Chunked: the line end after a chunk's data.
    ChunkEnd,
    /// Chunked: trailer lines up to the empty one.
    Trailers,
    Done,
}

/// A response whose head is in; its body is read with [`Response::data`].
pub struct Response<'a> {
    client: &'a Client,
    pub status: u16,
    /// Header names in lowercase.
    headers: Vec<(String, String)>,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    framing: Framing,
    keep_alive: bool,
}

impl Response<'_> {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Reads from the socket into the buffer; `Ok(0)` at end of stream.
    async fn fill(&mut self) -> std::io::Result<usize> {
        if self.pos == self.end {
            (self.pos, self.end) = (0, 0);
        } else if self.buf.len() - self.end < 4096 {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.end, 0);
                (self.pos, self.end) = (0, self.end - self.pos);
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let Some(s) = self.stream.as_mut() else { return Ok(0) };
        let n = s.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    async fn read_head(&mut self) -> Result<(), (Error, bool)> {
        let mut got_any = false;
        loop {
            let mut hs = [httparse::EMPTY_HEADER; 64];
            let mut r = httparse::Response::new(&mut hs);
            match r.parse(&self.buf[self.pos..self.end]) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = r.code.unwrap_or(0);
                    if (100..200).contains(&status) {
                        // An interim response (100 Continue): the real one follows.
                        self.pos += n;
                        continue;
                    }
                    self.status = status;
                    self.headers = r
                        .headers
                        .iter()
                        .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).trim().to_string()))
                        .collect();
                    let http11 = r.version == Some(1);
                    self.pos += n;
                    return self.start_body(http11).map_err(|e| (e, false));
                }
                Ok(httparse::Status::Partial) => {
                    if self.end - self.pos > MAX_HEAD {
                        return Err((Error::Request(format!("response head longer than {MAX_HEAD} bytes")), false));
                    }
                }
                Err(e) => return Err((Error::Request(format!("malformed response head: {e}")), false)),
            }
            match self.fill().await {
                Ok(0) => {
                    let msg =
                        if got_any { "the connection closed inside the response head" } else { "the connection closed before a response" };
                    return Err((Error::Request(msg.into()), !got_any));
                }
                Ok(_) => got_any = true,
                Err(e) => return Err((Error::Request(format!("reading the response: {e}")), !got_any)),
            }
        }
    }

    fn start_body(&mut self, http11: bool) -> Result<(), Error> {
        let close = self.header("connection").is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
        self.keep_alive = http11 && !close;
        let chunked = self
            .header("transfer-encoding")
            .is_some_and(|v| v.rsplit(',').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked")));
        self.framing = if chunked {
            Framing::ChunkSize
        } else if let Some(v) = self.header("content-length") {
            let n = v.parse::<u64>().map_err(|_| Error::Request(format!("response content-length {v:?} is not a number")))?;
            if n == 0 { Framing::Done } else { Framing::Length(n) }
        } else if self.status == 204 || self.status == 304 {
            Framing::Done
        } else {
            self.keep_alive = false;
            Framing::Close
        };
        if self.framing == Framing::Done {
            self.release();
        }
        Ok(())
    }

    /// The connection back to the pool once the body is complete.
    fn release(&mut self) {
        if let Some(s) = self.stream.take()
            && self.keep_alive
            && self.pos == self.end
        {
            self.client.checkin(s);
        }
    }

    /// The next run of body bytes (chunk framing removed): what is buffered, else what the next
    /// read brings; `None` at the end of the body.
    pub async fn data(&mut self) -> Result<Option<&[u8]>, Error> {
        let range = loop {
            let avail = self.end - self.pos;
            match self.framing {
                Framing::Done => return Ok(None),
                Framing::Length(left) | Framing::ChunkData(left) if avail > 0 => {
                    let n = (avail as u64).min(left) as usize;
                    let r = (self.pos, self.pos + n);
                    self.pos += n;
                    let left = left - n as u64;
                    self.framing = match self.framing {
                        Framing::Length(_) if left == 0 => Framing::Done,
                        Framing::Length(_) => Framing::Length(left),
                        _ if left == 0 => Framing::ChunkEnd,
                        _ => Framing::ChunkData(left),
                    };
                    if self.framing == Framing::Done {
                        self.release();
                    }
                    break r;
                }
                Framing::Close if avail > 0 => {
                    let r = (self.pos, self.end);
                    self.pos = self.end;
                    break r;
                }
                Framing::ChunkSize | Framing::ChunkEnd | Framing::Trailers if avail > 0 => {
                    let Some(nl) = self.buf[self.pos..self.end].iter().position(|&b| b == b'\n') else {
                        if avail > 4096 {
                            return Err(Error::Body("malformed chunked body: a framing line longer than 4096 bytes".into()));
                        }
                        self.more().await?;
                        continue;
                    };
                    let line = self.buf[self.pos..self.pos + nl].trim_ascii();
                    self.framing = match self.framing {
                        Framing::ChunkSize => {
                            let hex = line.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
                            let size = std::str::from_utf8(hex)
                                .ok()
                                .and_then(|h| u64::from_str_radix(h, 16).ok())
                                .ok_or_else(|| Error::Body(format!("malformed chunk size line {:?}", String::from_utf8_lossy(line))))?;
                            if size == 0 { Framing::Trailers } else { Framing::ChunkData(size) }
                        }
                        Framing::ChunkEnd if line.is_empty() => Framing::ChunkSize,
                        Framing::ChunkEnd => return Err(Error::Body("malformed chunked body: no line end after a chunk".into())),
                        _ if line.is_empty() => Framing::Done,
                        _ => Framing::Trailers,
                    };
                    self.pos += nl + 1;
                    if self.framing == Framing::Done {
                        self.release();
                        return Ok(None);
                    }
                }
                _ => self.more().await?,
            }
        };
        Ok(Some(&self.buf[range.0..range.1]))
    }

    /// One more read for the body; the end of the stream ends a close-delimited body and is an
    /// error for any other.
    async fn more(&mut self) -> Result<(), Error> {
        match self.fill().await {
            Ok(0) if self.framing == Framing::Close => {
                self.framing = Framing::Done;
                Ok(())
            }
            Ok(0) => Err(Error::Body("the connection closed before the end of the response body".into())),
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Body(format!("reading the response body: {e}"))),
        }
    }

    /// The whole body as text (an error reply), at most [`MAX_ERROR_BODY`] bytes of it.
    pub async fn text(&mut self) -> Result<String, Error> {
        let mut out = Vec::new();
        while let Some(d) = self.data().await? {
            let room = MAX_ERROR_BODY.saturating_sub(out.len());
            out.extend_from_slice(&d[..d.len().min(room)]);
            if room <= d.len() {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// What a scripted server does with the next request on a connection.
    #[derive(Clone)]
    enum Act {
        /// Writes these pieces, pausing between them so the client reads them apart.
        Reply(Vec<&'static [u8]>),
        /// Writes the pieces, then closes the connection.
        ReplyClose(Vec<&'static [u8]>),
        /// Reads the request and closes without answering.
        Drop,
    }

    /// A real TCP server following `script` (one list per accepted connection). Returns its URL,
    /// the requests it read (head and decoded body) and the count of connections accepted.
    async fn server(script: Vec<Vec<Act>>) -> (String, Arc<Mutex<Vec<(String, Vec<u8>)>>>, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/base/", l.local_addr().unwrap());
        let (seen, accepted) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicUsize::new(0)));
        let (s2, a2) = (seen.clone(), accepted.clone());
        tokio::spawn(async move {
            for acts in script {
                let (mut c, _) = l.accept().await.unwrap();
                a2.fetch_add(1, Ordering::SeqCst);
                let seen = s2.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for act in acts {
                        let Some(req) = read_request(&mut c, &mut buf).await else { return };
                        seen.lock().unwrap().push(req);
                        let (pieces, close) = match act {
                            Act::Reply(p) => (p, false),
                            Act::ReplyClose(p) => (p, true),
                            Act::Drop => return,
                        };
                        for p in pieces {
                            c.write_all(p).await.unwrap();
                            tokio::time::sleep(Duration::from_millis(15)).await;
                        }
                        if close {
                            return;
                        }
                    }
                    // Stay open until the client closes.
                    let _ = c.read(&mut [0u8; 1]).await;
                });
            }
        });
        (url, seen, accepted)
    }

    /// One request from `c` (bytes past it stay in `buf`): head text and body, sized or chunked.
    async fn read_request(c: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut b = [0u8; 4096];
            let n = c.read(&mut b).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&b[..n]);
        };
        let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
        buf.drain(..head_end);
        let lower = head.to_ascii_lowercase();
        let mut body = Vec::new();
        if let Some(l) = lower.lines().find_map(|l| l.strip_prefix("content-length: ")) {
            let n: usize = l.trim().parse().unwrap();
            while buf.len() < n {
                let mut b = [0u8; 65536];
                let k = c.read(&mut b).await.ok()?;
                buf.extend_from_slice(&b[..k]);
            }
            body = buf.drain(..n).collect();
        } else {
            // Chunked: until the last chunk.
            loop {
                if let Some(i) = buf.windows(5).position(|w| w == b"0\r\n\r\n") {
                    let raw: Vec<u8> = buf.drain(..i + 5).collect();
                    let mut rest = &raw[..];
                    while let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") {
                        let size = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap(), 16).unwrap();
                        if size == 0 {
                            break;
                        }
                        body.extend_from_slice(&rest[nl + 2..nl + 2 + size]);
                        rest = &rest[nl + 2 + size + 2..];
                    }
                    break;
                }
                let mut b = [0u8; 65536];
                let k = c.read(&mut b).await.ok()?;
                if k == 0 {
                    return None;
                }
                buf.extend_from_slice(&b[..k]);
            }
        }
        Some((head, body))
    }

    async fn body_of(r: &mut Response<'_>) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        while let Some(d) = r.data().await? {
            out.extend_from_slice(d);
        }
        Ok(out)
    }

    /// A hung exchange fails the test instead of stalling the suite.
    async fn within(f: impl Future<Output = ()>) {
        tokio::time::timeout(Duration::from_secs(30), f).await.expect("the exchange hung")
    }

    fn client(url: &str) -> Client {
        Client::for_url(url, Duration::from_secs(5)).expect("an http URL")
    }

    fn ready(parts: &[&'static [u8]]) -> Body {
        Body::Ready(parts.iter().map(|p| Bytes::from_static(p)).collect())
    }

    const CHUNKED: &[&[u8]] = &[
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nX-Sweep-Arrival-Ns: 42\r\ntransfer-encoding: chunked\r\n\r\n",
        b"0",
        b"f;ext=1\r\ndata: {\"a\":1",
        b"}\n\n\r",
        b"\n6\r\ndata: \r\n6\r\n[D",
        b"ONE]\r\n0\r\nx-trailer: 1\r\n",
        b"\r\n",
    ];

    #[tokio::test]
    async fn chunked_replies_read_whole_however_split_and_the_connection_is_reused() {
        within(async {
            let (url, seen, accepted) = server(vec![vec![Act::Reply(CHUNKED.to_vec()), Act::Reply(CHUNKED.to_vec())]]).await;
            let c = client(&url);
            for n in 0..2 {
                let mut r = c.post("/v1/chat/completions", &[("x-correlation-id", "abc")], ready(&[b"{\"m\":", b"[1,2]}"])).await.unwrap();
                assert_eq!((r.status, r.header("x-sweep-arrival-ns")), (200, Some("42")));
                assert_eq!(body_of(&mut r).await.unwrap(), b"data: {\"a\":1}\n\ndata: [DONE]", "request {n}");
                assert!(r.data().await.unwrap().is_none());
                drop(r);
                assert_eq!(c.idle_connections(), 1, "back in the pool after request {n}");
            }
            assert_eq!(accepted.load(Ordering::SeqCst), 1, "one keep-alive connection for both");
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 2);
            let (head, body) = &seen[0];
            assert!(head.starts_with("POST /base/v1/chat/completions HTTP/1.1\r\n"), "{head}");
            assert!(head.contains(&format!("host: {}\r\n", url.trim_start_matches("http://").trim_end_matches("/base/"))), "{head}");
            assert!(head.contains("x-correlation-id: abc\r\n") && head.contains("content-length: 11\r\n"), "{head}");
            assert_eq!(body, b"{\"m\":[1,2]}");
        })
        .await;
    }

    #[tokio::test]
    async fn sized_and_close_delimited_bodies_and_error_replies() {
        within(async {
            let sized: Vec<&[u8]> =
                vec![b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 25\r\n\r\n{\"error\":", b"{\"message\":\"x\"}}"];
            let close: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\n\r\nall of ", b"it"];
            let (url, _, accepted) = server(vec![vec![Act::Reply(sized), Act::ReplyClose(close)]]).await;
            let c = client(&url);
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            assert_eq!(r.status, 500);
            assert_eq!(r.text().await.unwrap(), "{\"error\":{\"message\":\"x\"}}");
            drop(r);
            assert_eq!(c.idle_connections(), 1);
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            assert_eq!(body_of(&mut r).await.unwrap(), b"all of it");
            drop(r);
            assert_eq!(c.idle_connections(), 0, "a close-delimited body ends its connection");
            assert_eq!(accepted.load(Ordering::SeqCst), 1);
        })
        .await;
    }

    #[tokio::test]
    async fn a_pooled_connection_the_server_closed_is_replaced() {
        within(async {
            let ok: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"];
            // First connection: one reply, then it drops the next request unanswered (a keep-alive
            // timeout racing the request); the second answers.
            let (url, seen, accepted) =
                server(vec![vec![Act::Reply(ok.clone()), Act::Drop], vec![Act::Reply(ok.clone()), Act::Reply(ok.clone())]]).await;
            let c = client(&url);
            for _ in 0..2 {
                let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
                assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
            }
            assert_eq!(accepted.load(Ordering::SeqCst), 2);
            assert_eq!(seen.lock().unwrap().len(), 3, "the dropped request was sent again on a new connection");
            // A connection closed while idle is noticed before use: no request is lost on it.
            let (url, seen, accepted) = server(vec![vec![Act::ReplyClose(ok.clone())], vec![Act::Reply(ok.clone())]]).await;
            let c = client(&url);
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
            drop(r);
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            assert_eq!(body_of(&mut r).await.unwrap(), b"ok");
            assert_eq!((accepted.load(Ordering::SeqCst), seen.lock().unwrap().len()), (2, 2));
        })
        .await;
    }

    #[tokio::test]
    async fn truncated_bodies_bad_heads_and_refused_connections_are_errors() {
        within(async {
            let cut: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n10\r\nonly part"];
            let bad: Vec<&[u8]> = vec![b"HTTP/1.1 2x0 OK\r\n\r\n"];
            let (url, _, _) = server(vec![vec![Act::ReplyClose(cut)], vec![Act::Reply(bad)], vec![Act::Drop]]).await;
            let c = client(&url);
            let mut r = c.post("/p", &[], ready(&[b"{}"])).await.unwrap();
            let e = body_of(&mut r).await.unwrap_err();
            assert!(matches!(e, Error::Body(_)) && e.to_string().contains("closed before the end"), "{e}");
            drop(r);
            let e = c.post("/p", &[], ready(&[b"{}"])).await.err().expect("a malformed head");
            assert!(matches!(e, Error::Request(_)) && e.to_string().contains("malformed response head"), "{e}");
            // A new connection closed with no answer is not retried.
            let e = c.post("/p", &[], ready(&[b"{}"])).await.err().expect("no answer");
            assert!(e.to_string().contains("closed before a response"), "{e}");
            // Nothing listens there any more.
            let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
            let e = client(&format!("http://127.0.0.1:{port}")).post("/p", &[], ready(&[b"{}"])).await.err().expect("refused");
            assert!(matches!(e, Error::Connect(_)), "{e}");
            assert!(Client::for_url("https://example.com", Duration::from_secs(1)).is_none(), "https goes through reqwest");
        })
        .await;
    }

    #[tokio::test]
    async fn a_body_built_later_is_sent_chunked_after_the_head() {
        within(async {
            let ok: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"];
            let (url, seen, _) = server(vec![vec![Act::Reply(ok)]]).await;
            let c = client(&url);
            let body = Body::Later(Box::pin(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(vec![Bytes::from_static(b"{\"a\":"), Bytes::new(), Bytes::from(vec![b'7'; 70_000]), Bytes::from_static(b"}")])
            }));
            let mut r = c.post("/p", &[], body).await.unwrap();
            assert!(r.data().await.unwrap().is_none(), "an empty body");
            let seen = seen.lock().unwrap();
            assert!(seen[0].0.contains("transfer-encoding: chunked\r\n"), "{}", seen[0].0);
            assert_eq!(seen[0].1.len(), 5 + 70_000 + 1);
            assert!(seen[0].1.starts_with(b"{\"a\":7777") && seen[0].1.ends_with(b"77}"));
        })
        .await;
    }
}
