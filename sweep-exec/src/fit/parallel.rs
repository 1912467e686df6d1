//! Running indexed work on scoped threads with results in index order.

use std::sync::Mutex;

/// `f(0..n)` on `jobs` scoped threads taking indices from a shared counter; results in index order.
pub(super) fn parallel_map<R: Send>(jobs: usize, n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if jobs <= 1 || n <= 1 {
        return (0..n).map(f).collect();
    }
    let slots: Vec<Mutex<Option<R>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    *slots[i].lock().expect("lock") = Some(f(i));
                }
            });
        }
    });
    slots.into_iter().map(|m| m.into_inner().expect("lock").expect("every index ran")).collect()
}
