//! Standard output that survives a reader going away.
//!
//! `println!` panics when stdout is a closed pipe (`sweep run … | head -n 3`), which would end a
//! run before it records its results. Commands print through [`outln!`](crate::outln) and
//! [`out!`](crate::out) instead: a closed stdout is remembered and further output dropped, so the
//! work finishes, is recorded, and the command exits as it would have.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout; after a broken pipe, nothing more is written. Other write errors (a full
/// disk behind a redirection) are reported once on stderr.
pub fn write(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|_| o.flush())
        && !CLOSED.swap(true, Ordering::Relaxed)
        && e.kind() != ErrorKind::BrokenPipe
    {
        eprintln!("warning: standard output failed ({e}); the rest of the output is dropped, the work goes on");
    }
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` that survives a closed stdout.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::out::write(format_args!($($t)*)) };
}
