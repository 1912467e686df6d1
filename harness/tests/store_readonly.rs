//! A reader who cannot write the store's folder: another user reading a team's store. SQLite's
//! WAL mode wants a shared-memory file beside the store, which such a reader cannot create. The
//! real `sweep` binary runs as that user (`nobody` through `setpriv` when the tests run as root;
//! the folder's permissions do the rest otherwise).

mod common;
use common::*;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `sweep <args>` as a user without write access to the store's folder.
fn as_reader(args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_sweep");
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]).args(args).output();
        o.expect("running as root, this test needs `setpriv` (util-linux) to read the store as another user")
    } else {
        Command::new(bin).args(args).output().unwrap()
    }
}

#[test]
fn a_reader_without_write_access_reads_the_store_or_is_told_why_not() {
    let d = tempfile::tempdir().unwrap();
    let (folder, run) = (d.path().join("team"), d.path().join("run"));
    let store = folder.join("sweep.db");
    let root = workspace_root();
    let o = sweep(&run_args(run.to_str().unwrap(), "42", Some(store.to_str().unwrap())), &root);
    assert!(o.status.success(), "{}", text(&o).1);
    chmod(d.path(), 0o755);
    chmod(&store, 0o444);
    chmod(&folder, 0o555);
    let o = as_reader(&["history", "--store", store.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "a clean store reads without write access:\n{out}\n{err}");
    assert!(out.lines().any(|l| l.contains(" run ") && l.contains("predicted")), "{out}");

    // Writes still in the WAL file, and no shared-memory file to find them through: reading the
    // file alone would miss them, so the reader is told why and what to do.
    chmod(&folder, 0o755);
    chmod(&store, 0o644);
    let c = rusqlite::Connection::open(&store).unwrap();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute_batch("CREATE TABLE scratch(x); INSERT INTO scratch VALUES (1);").unwrap();
    // Left open, as a writer that was killed: the WAL is not folded into the file.
    std::mem::forget(c);
    let _ = std::fs::remove_file(folder.join("sweep.db-shm"));
    assert!(std::fs::metadata(folder.join("sweep.db-wal")).unwrap().len() > 0);
    chmod(&folder, 0o555);
    let o = as_reader(&["history", "--store", store.to_str().unwrap()]);
    let err = text(&o).1;
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("sweep.db-wal") && err.contains("sweep store check --store"), "{err}");
    chmod(&folder, 0o755);
}
