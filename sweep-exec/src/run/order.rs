//! Plan order across worker threads: each point's [`Turn`] to submit, in the order points were
//! taken from the queue.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Plan order across worker threads. A batch scheduler starts jobs in submission order, so a
/// runner that submits waits for its [`Turn`]: every point taken from the queue before it has
/// been submitted or has given up its turn. Otherwise the threads race to `sbatch` and a
/// low-concurrency point (or the one whose failure fail-fast is waiting for) can queue behind
/// points that hold the cluster for hours.
#[derive(Default)]
pub struct StartOrder {
    issued: AtomicU64,
    /// The next sequence number whose turn it is, and later ones already released out of order.
    state: Mutex<(u64, BTreeSet<u64>)>,
    cv: Condvar,
}

impl StartOrder {
    /// The next turn; taken in the same critical section as the point it orders.
    pub fn take(self: &Arc<Self>) -> Turn {
        Turn { order: self.clone(), seq: self.issued.fetch_add(1, Ordering::Relaxed), released: AtomicBool::new(false) }
    }
}

/// A point's place in a [`StartOrder`]; released when dropped if not before.
pub struct Turn {
    order: Arc<StartOrder>,
    seq: u64,
    released: AtomicBool,
}

impl Turn {
    /// Blocks until every earlier turn has been released.
    pub fn wait(&self) {
        let mut g = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        while g.0 < self.seq {
            g = self.order.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets the next point go (once submitted, or when this one never will be).
    pub fn release(&self) {
        if self.released.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut g = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        g.1.insert(self.seq);
        loop {
            let next = g.0;
            if !g.1.remove(&next) {
                break;
            }
            g.0 += 1;
        }
        self.order.cv.notify_all();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.release();
    }
}
