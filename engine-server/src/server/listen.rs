//! The accept loop: a cap on open connections (beyond it a connection gets a minimal 503 and is
//! closed; the open ones keep being served), one task per connection ([`super::conn`]), the
//! server's phase (serving, draining, cutting streams, closed), and giving the heap back once a
//! flood of connections is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

use super::api::ApiError;
use super::conn::{self, Timeouts};
use super::sys;

/// Where the server is in its life; each phase includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Serving,
    /// No new connections; connections close once their requests are answered.
    Draining,
    /// Open streams end now with an in-stream error.
    Cut,
    /// Connections still open are dropped.
    Closed,
}

/// Descriptors kept free under the default connection cap (listener, tokenizer files, the
/// engine's own): beyond the cap a client gets a 503 rather than `accept` failing with EMFILE.
const FD_RESERVE: u64 = 256;

/// The connection cap when `--max-connections` is not given: what the open-file limit allows.
pub(crate) fn default_max_connections(nofile: Option<u64>) -> usize {
    nofile.map_or(1024, |n| n.saturating_sub(FD_RESERVE).max(64)) as usize
}

/// Connections refused at the cap that may still be answering at once; beyond, a refused
/// connection is closed without its 503, so refusing cannot itself use up descriptors.
const MAX_REFUSING: usize = 1024;

/// Connections closed since the last trim that make a trim worth it.
const TRIM_AFTER_CLOSES: usize = 512;
/// At most one trim per this long (a trim walks the whole heap).
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// Open connections, and the closes that may leave freed heap behind.
#[derive(Default)]
pub(crate) struct Conns {
    open: AtomicUsize,
    refusing: AtomicUsize,
    closed_since_trim: AtomicUsize,
    trim: Notify,
}

impl Conns {
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// One open connection, counted until it is dropped.
struct Open(Arc<Conns>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        if self.0.closed_since_trim.fetch_add(1, Ordering::AcqRel) + 1 == TRIM_AFTER_CLOSES {
            self.0.trim.notify_one();
        }
    }
}

/// Accepts until the phase leaves `Serving`; then the listener is dropped (new connections are
/// refused by the OS) while the connection tasks drain on their own.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    app: Router,
    t: Timeouts,
    max: usize,
    conns: Arc<Conns>,
    mut phase: watch::Receiver<Phase>,
) {
    tokio::spawn(trimmer(conns.clone(), phase.clone()));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = phase.wait_for(|p| *p >= Phase::Draining) => return,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            // Errors of one connection (reset before accept, …) say nothing about the listener.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // EMFILE / ENFILE: out of descriptors until connections close; retry shortly
                // rather than spin.
                tracing::warn!("accept failed: {e}; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // No Nagle delay, as uvicorn (asyncio sets TCP_NODELAY on every TCP transport): a
        // streamed reply's first chunk would otherwise wait for the ACK of the response head,
        // which a client in delayed-ACK mode sends only after 40 ms.
        let _ = tcp.set_nodelay(true);
        if conns.open() >= max {
            refuse(tcp, max, &conns);
            continue;
        }
        conns.open.fetch_add(1, Ordering::AcqRel);
        let open = Open(conns.clone());
        let (app, phase) = (app.clone(), phase.clone());
        tokio::spawn(async move {
            conn::serve(tcp, app, t, phase).await;
            drop(open);
        });
    }
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// Over the cap: a minimal 503 with `Connection: close` and SGLang's error body, as uvicorn's
/// `limit_concurrency` answers, then the connection is closed.
fn refuse(mut tcp: TcpStream, max: usize, conns: &Arc<Conns>) {
    if conns.refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
        conns.refusing.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let conns = conns.clone();
    tokio::spawn(async move {
        let body = ApiError::status(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("Too many open connections (the server's limit is {max}, --max-connections); retry later."),
        )
        .body();
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            tcp.write_all(format!("{head}{body}").as_bytes()).await?;
            tcp.shutdown().await?;
            // Read what the client sent until it closes: closing with unread bytes would send a
            // reset, which can destroy the 503 before the client has read it.
            let mut sink = [0u8; 4096];
            while tcp.read(&mut sink).await? > 0 {}
            Ok::<_, std::io::Error>(())
        })
        .await;
        conns.refusing.fetch_sub(1, Ordering::AcqRel);
    });
}

/// Gives freed heap back once a burst of connections has closed: glibc keeps what the
/// connections' buffers used in its arenas, so the resident size would otherwise stay at the
/// burst's peak (measured in docs/PERFORMANCE.md).
async fn trimmer(conns: Arc<Conns>, mut phase: watch::Receiver<Phase>) {
    loop {
        tokio::select! {
            _ = conns.trim.notified() => {}
            _ = phase.wait_for(|p| *p >= Phase::Closed) => return,
        }
        // Let the burst end: trim once the open count has stopped falling for a second.
        let mut last = conns.open();
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = conns.open();
            if now >= last {
                break;
            }
            last = now;
        }
        conns.closed_since_trim.store(0, Ordering::Release);
        let before = sys::rss_bytes();
        let _ = tokio::task::spawn_blocking(sys::trim_heap).await;
        tracing::debug!("heap trimmed after a burst of connections: RSS {:?} -> {:?} bytes", before, sys::rss_bytes());
        tokio::time::sleep(TRIM_EVERY).await;
    }
}
