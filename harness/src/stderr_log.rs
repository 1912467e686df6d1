//! How library events show on stderr: warnings as `warning: …`, errors as `error: …`, progress
//! lines (`sweep_exec::PROGRESS`) and other notes as the bare message, so what the library
//! reports reads like the binary's own lines. `RUST_LOG` chooses what shows (default: warnings
//! and progress; `RUST_LOG=warn` drops progress, `RUST_LOG=harness=debug` asks for more).

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => w.write_str("error: ")?,
            Level::WARN => w.write_str("warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// Installs the stderr subscriber for the process.
pub fn init() {
    let default = format!("warn,{}=info", sweep_exec::PROGRESS);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).event_format(Plain).init();
}
