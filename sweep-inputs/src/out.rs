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
/// Text from a store or a file as a terminal should show it: control characters (ESC, BEL,
/// newlines) escaped, so a stored name cannot move the cursor, ring or forge lines.
pub fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect())
}

pub fn write(args: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|_| o.flush())
        && !CLOSED.swap(true, Ordering::Relaxed)
        && e.kind() != ErrorKind::BrokenPipe
    {
        tracing::warn!("standard output failed ({e}); the rest of the output is dropped, the work goes on");
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
