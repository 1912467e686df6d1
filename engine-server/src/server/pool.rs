//! Tokenizer worker threads (`--tokenizer-worker-num`): CPU-heavy encoding runs here,
//! never on the async event loop.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads taking jobs from one queue.
pub struct Pool {
    tx: mpsc::Sender<Job>,
}

impl Pool {
    pub fn new(threads: usize) -> Pool {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("tokenizer-{i}"))
                .spawn(move || {
                    loop {
                        // Hold the lock only to take a job, not while running it.
                        let job = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .expect("spawn tokenizer worker");
        }
        Pool { tx }
    }

    /// Runs `f` on a worker; `None` if the pool is gone or `f` panicked.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            if let Ok(v) = r {
                let _ = tx.send(v);
            }
        });
        self.tx.send(job).ok()?;
        rx.await.ok()
    }
}
