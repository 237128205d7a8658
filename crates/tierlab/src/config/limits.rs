//! Bounded reads of the files tierlab is given: a scenario or preset larger than any real one
//! (or `/dev/zero`) is refused after `limit` bytes instead of filling the host's memory.

use std::io::Read;
use std::path::Path;

/// The most a scenario or machine preset may hold: the shipped ones are under 16 KiB, and a
/// generated scenario with a phase per page of a 16 TiB machine would still be smaller.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// Read `path` as UTF-8 text, failing once it exceeds `limit` bytes.
pub fn read_limited(path: &Path, limit: u64) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err("is a directory".into());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "larger than {} MiB, the most tierlab reads from a config file",
            limit >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_cut_off_at_the_limit() {
        let e = read_limited(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.contains("larger than 1 MiB"), "{e}");
    }

    #[test]
    fn a_directory_is_not_a_config() {
        assert_eq!(
            read_limited(Path::new("/"), 1 << 20).unwrap_err(),
            "is a directory"
        );
    }
}
