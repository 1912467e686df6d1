//! Why a report, chart or point page was not written.

use plotters::prelude::{BitMapBackend, DrawingAreaErrorKind};
use std::path::PathBuf;

/// A drawing error of the PNG backend.
pub type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as plotters::backend::DrawingBackend>::ErrorType>;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Drawing a chart into its PNG.
    #[error(transparent)]
    Draw(#[from] DrawError),
    /// Writing the drawn PNG to `path`.
    #[error("{}: {source}", .path.display())]
    Present {
        path: PathBuf,
        #[source]
        source: DrawError,
    },
    /// Writing a report file (`path`); the message is the I/O error's, as before.
    #[error("{source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A point's records (for its page).
    #[error(transparent)]
    Records(#[from] crate::records::ReadJsonlError),
    #[error("a point page's thread panicked")]
    PageThreadPanicked,
}
