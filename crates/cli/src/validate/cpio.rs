//! A writer (and, for tests and debugging, a reader) of the "newc" cpio format the kernel
//! unpacks as an initramfs (Documentation/driver-api/early-userspace/buffer-format.rst).
//!
//! Each entry is a 110-byte ASCII header — the magic `070701` and thirteen 8-digit hex fields —
//! then the NUL-terminated name, padded to 4 bytes, then the data, padded to 4 bytes. The
//! archive ends with an entry named `TRAILER!!!`. Every mtime is 0 and inode numbers count
//! up from 1, so the same inputs give the same bytes.

use std::collections::BTreeSet;

pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFCHR: u32 = 0o020000;

const MAGIC: &[u8; 6] = b"070701";
const TRAILER: &str = "TRAILER!!!";

/// A newc archive being built in memory. Paths are relative to the archive's root (a leading
/// `/` is dropped); a file's missing parent directories are added (mode 0755) before it.
#[derive(Default)]
pub struct Cpio {
    buf: Vec<u8>,
    next_ino: u32,
    dirs: BTreeSet<String>,
    names: BTreeSet<String>,
}

impl Cpio {
    pub fn new() -> Cpio {
        Cpio {
            next_ino: 1,
            ..Cpio::default()
        }
    }

    /// A directory (and its parents).
    pub fn dir(&mut self, path: &str, perm: u32) -> Result<(), String> {
        let path = clean(path)?;
        self.parents(&path)?;
        if self.dirs.contains(&path) {
            return Ok(());
        }
        self.dirs.insert(path.clone());
        self.entry(&path, S_IFDIR | (perm & 0o7777), 2, (0, 0), &[])
    }

    /// A regular file.
    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) -> Result<(), String> {
        let path = clean(path)?;
        self.parents(&path)?;
        self.entry(&path, S_IFREG | (perm & 0o7777), 1, (0, 0), data)
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), String> {
        let path = clean(path)?;
        self.parents(&path)?;
        self.entry(&path, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes())
    }

    /// A character device node.
    pub fn char_dev(
        &mut self,
        path: &str,
        perm: u32,
        major: u32,
        minor: u32,
    ) -> Result<(), String> {
        let path = clean(path)?;
        self.parents(&path)?;
        self.entry(&path, S_IFCHR | (perm & 0o7777), 1, (major, minor), &[])
    }

    /// Whether an entry (of any kind) has this path.
    pub fn contains(&self, path: &str) -> bool {
        clean(path).is_ok_and(|p| self.names.contains(&p))
    }

    /// The archive, trailer included.
    pub fn finish(mut self) -> Vec<u8> {
        self.header(TRAILER, 0, 0, 1, (0, 0), 0);
        self.buf
    }

    fn parents(&mut self, path: &str) -> Result<(), String> {
        let mut prefix = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if !self.dirs.contains(&prefix) {
                self.dirs.insert(prefix.clone());
                self.entry(&prefix.clone(), S_IFDIR | 0o755, 2, (0, 0), &[])?;
            }
        }
        Ok(())
    }

    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> Result<(), String> {
        if !self.names.insert(name.to_string()) {
            return Err(format!("initramfs: '{name}' added twice"));
        }
        let size = u32::try_from(data.len())
            .map_err(|_| format!("initramfs: '{name}' is larger than 4 GiB"))?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.header(name, ino, mode, nlink, rdev, size);
        self.buf.extend_from_slice(data);
        self.pad();
        Ok(())
    }

    fn header(&mut self, name: &str, ino: u32, mode: u32, nlink: u32, rdev: (u32, u32), size: u32) {
        let namesize = name.len() as u32 + 1;
        // ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check
        let fields = [
            ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, namesize, 0,
        ];
        self.buf.extend_from_slice(MAGIC);
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }
}

/// A path inside the archive: no leading `/`, no empty, `.` or `..` components.
fn clean(path: &str) -> Result<String, String> {
    let p = path.trim_start_matches('/');
    if p.is_empty() || p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!("initramfs: bad path '{path}'"));
    }
    if p.contains('\0') || p.contains('\n') {
        return Err(format!("initramfs: bad character in path '{path}'"));
    }
    Ok(p.to_string())
}

/// One entry read back from an archive (the tests check what was written).
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub mode: u32,
    pub rdev: (u32, u32),
    pub data: Vec<u8>,
}

/// Read a newc archive (up to its trailer) back into entries.
#[cfg(test)]
pub fn parse(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    let align = |x: usize| (x + 3) & !3;
    loop {
        let h = bytes
            .get(pos..pos + 110)
            .ok_or_else(|| format!("truncated header at {pos}"))?;
        if &h[..6] != MAGIC {
            return Err(format!("bad magic at {pos}"));
        }
        let field = |i: usize| -> Result<u32, String> {
            let s = std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).map_err(|e| e.to_string())?;
            u32::from_str_radix(s, 16).map_err(|e| format!("field {i} at {pos}: {e}"))
        };
        let (mode, size, rmaj, rmin, namesize) = (
            field(1)?,
            field(6)? as usize,
            field(9)?,
            field(10)?,
            field(11)? as usize,
        );
        let name_start = pos + 110;
        let name_bytes = bytes
            .get(name_start..name_start + namesize)
            .ok_or("truncated name")?;
        if name_bytes.last() != Some(&0) {
            return Err(format!("name at {pos} is not NUL-terminated"));
        }
        let name =
            String::from_utf8(name_bytes[..namesize - 1].to_vec()).map_err(|e| e.to_string())?;
        let data_start = align(name_start + namesize);
        let data = bytes
            .get(data_start..data_start + size)
            .ok_or("truncated data")?
            .to_vec();
        pos = align(data_start + size);
        if name == TRAILER {
            return Ok(out);
        }
        out.push(Entry {
            name,
            mode,
            rdev: (rmaj, rmin),
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut c = Cpio::new();
        c.dir("/dev", 0o755).unwrap();
        c.char_dev("/dev/console", 0o600, 5, 1).unwrap();
        c.file("/init", 0o755, b"#!/bin/sh\necho hi\n").unwrap();
        c.file("/a/b/c.txt", 0o644, b"x").unwrap();
        c.symlink("/bin/sh", "/bin/busybox").unwrap();
        c.finish()
    }

    /// The entries of `sample()`, in archive order.
    const SAMPLE_NAMES: [&str; 8] = [
        "dev",
        "dev/console",
        "init",
        "a",
        "a/b",
        "a/b/c.txt",
        "bin",
        "bin/sh",
    ];

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert!(bytes.len().is_multiple_of(4));
        let e = parse(&bytes).unwrap();
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, SAMPLE_NAMES);
        assert_eq!(e[1].mode, S_IFCHR | 0o600);
        assert_eq!(e[1].rdev, (5, 1));
        assert_eq!(e[2].mode, S_IFREG | 0o755);
        assert_eq!(e[2].data, b"#!/bin/sh\necho hi\n");
        assert_eq!(e[3].mode, S_IFDIR | 0o755);
        assert_eq!(e[5].data, b"x");
        assert_eq!(e[7].mode, S_IFLNK | 0o777);
        assert_eq!(e[7].data, b"/bin/busybox");
        // Deterministic: the same inputs give the same bytes.
        assert_eq!(bytes, sample());
    }

    #[test]
    fn rejects_bad_paths_and_duplicates() {
        let mut c = Cpio::new();
        assert!(c.file("/", 0o644, b"").is_err());
        assert!(c.file("/a/../b", 0o644, b"").is_err());
        c.file("/x", 0o644, b"").unwrap();
        assert!(c.file("/x", 0o644, b"").is_err());
        assert!(c.contains("/x") && !c.contains("/y"));
    }

    /// GNU cpio, where installed, lists what we wrote.
    #[test]
    fn gnu_cpio_lists_it() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let Ok(mut child) = Command::new("cpio")
            .args(["-t", "--quiet"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            eprintln!("skipped: no cpio binary to cross-check the archive with");
            return;
        };
        child.stdin.take().unwrap().write_all(&sample()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let listing = String::from_utf8(out.stdout).unwrap();
        let names: Vec<&str> = listing.lines().collect();
        assert_eq!(names, SAMPLE_NAMES);
    }
}
