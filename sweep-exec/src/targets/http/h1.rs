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
    Later(Pin<Box<dyn Future<Output = Result<Vec<Bytes>, tokio::task::JoinError>> + Send>>),
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
mod tests;
