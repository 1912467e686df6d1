//! One HTTP/1.1 connection: hyper serves the axum router on it, each request body gets a
//! deadline, and a watchdog closes the connection once it has been idle for the keep-alive
//! timeout, when a request head takes longer than the header read timeout from its first byte,
//! when the server drains, or when it closes.

use std::convert::Infallible;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::listen::Phase;

/// The connection timeouts (`--header-read-timeout`, `--body-read-timeout`, `--keep-alive-timeout`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub header_read: Duration,
    pub body_read: Duration,
    pub keep_alive: Duration,
}

/// After the watchdog asked hyper to close, how long a connection with nothing in flight may
/// take to flush and close before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A request body that did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?} (--body-read-timeout)")]
pub(crate) struct BodyTimeout(pub Duration);

/// Whether `e` (or an error it wraps) is a [`BodyTimeout`].
pub(crate) fn is_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if x.is::<BodyTimeout>() {
            return true;
        }
        cur = x.source();
    }
    false
}

/// What the watchdog knows of a connection: when it last moved bytes or ended a response, how
/// many requests it has in flight (head read, response not yet sent in full), and when the head
/// being read began.
struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` plus one of the first byte of a head not yet complete; 0: none.
    head_since: AtomicU64,
    /// Wakes the watchdog when a head begins (its deadline is then the nearest).
    head_began: tokio::sync::Notify,
}

impl Activity {
    fn touch(&self) {
        self.last.store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Bytes came in: with nothing in flight they begin the next request's head.
    fn read_some(&self) {
        self.touch();
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let now = self.start.elapsed().as_millis() as u64 + 1;
            if self.head_since.compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                self.head_began.notify_one();
            }
        }
    }

    /// How long the head being read has taken so far.
    fn head_for(&self) -> Option<Duration> {
        let since = self.head_since.load(Ordering::Acquire);
        if since == 0 || self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.start.elapsed().saturating_sub(Duration::from_millis(since - 1)))
    }

    /// How long nothing has happened, when nothing is in flight.
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        Some(self.start.elapsed().saturating_sub(last))
    }
}

/// Ends a request's time in flight when its response body is done (or dropped unsent).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(a: &Arc<Activity>) -> InFlight {
        a.in_flight.fetch_add(1, Ordering::AcqRel);
        a.head_since.store(0, Ordering::Release);
        InFlight(a.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The socket, noting every byte moved: a client dripping a request head is not idle (the header
/// read timeout bounds it), and neither is one still reading its response.
struct Tracked {
    io: TcpStream,
    act: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.act.read_some();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.act.touch();
        }
        r
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.act.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// A request body that fails with [`BodyTimeout`] once its deadline (counted from the head)
/// passes: a client that announces a body and never finishes it gets 408 instead of holding the
/// connection.
struct DeadlineBody {
    inner: Body,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(f) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(f);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimeout(self.limit)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that keeps its request in flight until it is done.
struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serves `app` on one accepted connection until the client closes it, a timeout closes it, or
/// the server's phase says to let it go (draining: after its requests; closed: at once).
pub(crate) async fn serve(tcp: TcpStream, app: Router, t: Timeouts, mut phase: watch::Receiver<Phase>) {
    let act = Arc::new(Activity {
        start: Instant::now(),
        last: AtomicU64::new(0),
        in_flight: AtomicUsize::new(0),
        head_since: AtomicU64::new(0),
        head_began: tokio::sync::Notify::new(),
    });
    let io = TokioIo::new(Tracked { io: tcp, act: act.clone() });
    let tower = TowerToHyperService::new(app);
    let a = act.clone();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = InFlight::begin(&a);
        let deadline = Box::pin(tokio::time::sleep(t.body_read));
        let req = req.map(|b| Body::new(DeadlineBody { inner: Body::new(b), deadline, limit: t.body_read }));
        let fut = hyper::service::Service::call(&tower, req);
        async move {
            let resp: Response<Body> = fut.await.unwrap_or_else(|e: Infallible| match e {});
            Ok::<_, Infallible>(resp.map(|b| Body::new(TrackedBody { inner: b, _in_flight: in_flight })))
        }
    });
    let mut builder = http1::Builder::new();
    // hyper's own header timer also runs while a kept-alive connection waits for its next head,
    // which would cap the keep-alive at the header timeout (uvicorn has no such cap: recipes keep
    // connections 900 s through SGLANG_TIMEOUT_KEEP_ALIVE). The watchdog times heads from their
    // first byte instead.
    builder.timer(TokioTimer::new()).header_read_timeout(None).keep_alive(true);
    let mut conn = pin!(builder.serve_connection(io, svc));
    let mut closing: Option<Instant> = None;
    loop {
        let wait = next_check(&act, &t, closing);
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = tokio::time::sleep(wait) => {}
            _ = act.head_began.notified() => {}
            r = phase.changed() => if r.is_err() { return },
        }
        let p = *phase.borrow();
        if p >= Phase::Closed {
            return;
        }
        if act.head_for().is_some_and(|h| h >= t.header_read) {
            // A head dripping in for longer than the header read timeout (slow loris).
            return;
        }
        let idle = act.idle_for();
        if closing.is_none() && (p >= Phase::Draining || idle.is_some_and(|d| d >= t.keep_alive)) {
            // Closes at once when idle between requests; otherwise after the request in flight.
            conn.as_mut().graceful_shutdown();
            closing = Some(Instant::now());
        }
        // A connection that never sent a complete head is not idle in hyper's sense and would
        // wait for one: with nothing in flight it is dropped once the grace has passed.
        if closing.is_some_and(|c| c.elapsed() >= CLOSE_GRACE) && idle.is_some() {
            return;
        }
    }
}

/// When the watchdog should look again: the nearest of the keep-alive, the close grace and the
/// deadline of a head being read.
fn next_check(act: &Activity, t: &Timeouts, closing: Option<Instant>) -> Duration {
    let floor = Duration::from_millis(20);
    let head = act.head_for().map_or(Duration::MAX, |h| t.header_read.saturating_sub(h).max(floor));
    head.min(match (closing, act.idle_for()) {
        (Some(c), Some(_)) => CLOSE_GRACE.saturating_sub(c.elapsed()).max(floor),
        // Closing after the response in flight: hyper ends the connection itself then.
        (Some(_), None) => CLOSE_GRACE,
        (None, Some(idle)) => t.keep_alive.saturating_sub(idle).max(floor),
        // A request in flight: its end touches the activity; look again a keep-alive later.
        (None, None) => t.keep_alive.max(floor),
    })
}
