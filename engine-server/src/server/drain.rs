//! Stopping the server: on SIGTERM or SIGINT it stops accepting, lets open requests finish for
//! the drain timeout (10 s), then ends the remaining streams with SGLang's in-stream error
//! event and `data: [DONE]`, and closes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Server;
use super::listen::Phase;

/// How a drain went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Chat requests open when the drain began.
    pub open_at_start: usize,
    /// Of those, ended by the drain timeout (an in-stream error, or 503 for a non-streaming one).
    pub cut: usize,
    /// Connections still open at the end, dropped.
    pub dropped_connections: usize,
}

/// How long cut streams get to send their last events before their connections are dropped.
const CUT_GRACE: Duration = Duration::from_secs(2);

/// Takes over SIGTERM and SIGINT now (their default action would end the process without a
/// drain); the future resolves with the name of the first to arrive.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = &'static str>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

impl Server {
    /// Chat requests being answered now (streaming or not).
    pub fn open_streams(&self) -> usize {
        self.state.active.load(Ordering::Acquire)
    }

    /// The drain timeout (`--drain-timeout`, 10 s by default).
    pub fn drain_timeout(&self) -> Duration {
        self.state.cfg.drain_timeout
    }

    /// Stops accepting, lets open requests finish for up to `grace`, cuts the rest, closes the
    /// remaining connections and stops the engine.
    pub async fn drain(mut self, grace: Duration) -> DrainReport {
        let st = self.state.clone();
        st.ready.store(false, Ordering::Release);
        let mut report = DrainReport { open_at_start: self.open_streams(), ..DrainReport::default() };
        st.phase.send_replace(Phase::Draining);
        // The listener closes with the accept loop.
        let _ = (&mut self.task).await;
        if !wait_until(grace, || self.open_streams() == 0).await {
            report.cut = self.open_streams();
            st.phase.send_replace(Phase::Cut);
            wait_until(CUT_GRACE, || self.open_streams() == 0).await;
        }
        // Connections answer their last bytes and close on their own once drained.
        wait_until(CUT_GRACE, || st.conns.open() == 0).await;
        report.dropped_connections = st.conns.open();
        st.phase.send_replace(Phase::Closed);
        st.driver.stop();
        report
    }
}

/// Polls `done` until it holds or `limit` passes; whether it held.
async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while !done() {
        if t0.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}
