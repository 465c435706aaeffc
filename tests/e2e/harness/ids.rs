//! Names that are unique per test and valid as Kubernetes names and label values.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// `bytes` random bytes from the kernel, hex encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0_u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .expect("read /dev/urandom");
    buf.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// A run id for one test: a DNS-1123 label derived from `test` plus a random suffix, at most 30
/// characters, so that `<run id>-<suffix>` still fits the 63-character limits of names and labels.
pub fn run_id(test: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut stem: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    stem.truncate(20);
    let stem = stem.trim_matches('-');
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{stem}-{n}{}", random_hex(3))
}
