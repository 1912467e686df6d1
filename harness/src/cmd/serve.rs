//! `sweep serve`: the web dashboard over the results store (`dashboard/`).

use crate::dashboard::{self, Options};
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub at: super::store::StoreArg,
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Listen on an address other than loopback: everyone who can reach it can read every run.
    #[arg(long)]
    pub allow_remote: bool,
    /// Repository root whose serving recipes give each point's flag diff its base (default: the
    /// repository around the current directory, if any).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn run(a: &Args) -> anyhow::Result<ExitCode> {
    let listen: SocketAddr =
        a.listen.parse().with_context(|| format!("--listen {:?}: expected an address and port such as 127.0.0.1:8080", a.listen))?;
    if !listen.ip().is_loopback() {
        if !a.allow_remote {
            bail!(
                "--listen {listen} is not a loopback address: the dashboard would show every recorded run to anyone who can reach it; add --allow-remote to mean it"
            );
        }
        eprintln!(
            "warning: sweep serve listens on {listen}, not loopback: anyone who can reach it can read every run in the store (no authentication, no TLS)"
        );
    }
    let root = match &a.root {
        Some(r) => Some(r.clone()),
        None => crate::repo::Repo::discover(&std::env::current_dir().unwrap_or_default()).ok().map(|r| r.root),
    };
    let location = a.at.location(root.as_deref());
    let opts = Options { location: location.clone(), listen, repo_root: root };
    dashboard::serve(&opts, |addr| {
        let host = if addr.ip().is_unspecified() { "localhost".to_string() } else { addr.ip().to_string() };
        let host = if addr.is_ipv6() && !addr.ip().is_unspecified() { format!("[{host}]") } else { host };
        eprintln!("sweep serve: http://{host}:{}/ (store {location}, read-only; Ctrl-C stops)", addr.port());
    })?;
    Ok(ExitCode::SUCCESS)
}
