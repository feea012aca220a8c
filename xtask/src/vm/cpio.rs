//! A writer for the `newc` cpio format, the format Linux unpacks an initramfs from.
//!
//! Entries are kept sorted by path and every missing parent directory is added, so the
//! archive lists a directory before anything inside it, as the kernel's unpacker expects.
//! Files are stored uncompressed; the kernel accepts that without any decompressor.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

/// Errors while building or writing an archive.
#[derive(Debug, thiserror::Error)]
pub enum CpioError {
    /// A path in the archive was empty, absolute, or contained `.`/`..` components or NUL.
    #[error("invalid archive path {path:?}: {reason}")]
    InvalidPath {
        /// The rejected path.
        path: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The same path was added twice with different contents or kinds.
    #[error("archive path {path:?} added twice with different contents")]
    Conflict {
        /// The path added twice.
        path: String,
    },
    /// A file was larger than the format's 32-bit size field.
    #[error("{path:?} is {len} bytes, over the newc limit of 4 GiB")]
    TooLarge {
        /// The file's archive path.
        path: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Reading a host file to add failed.
    #[error("reading {path} for the archive")]
    ReadHost {
        /// The host path.
        path: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Writing the archive failed.
    #[error("writing the cpio archive")]
    Write(#[source] io::Error),
}

/// What an archive entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
    CharDev(u32, u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: Kind,
    mode: u32,
}

/// An in-memory `newc` archive under construction.
#[derive(Debug, Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;
const TRAILER: &str = "TRAILER!!!";

/// Checks an archive path (relative, `/`-separated, no `.`/`..`) and returns it without a
/// leading `/`.
fn normalize(path: &str) -> Result<String, CpioError> {
    let invalid = |reason| CpioError::InvalidPath { path: path.to_owned(), reason };
    let trimmed = path.trim_start_matches('/').trim_end_matches('/');
    if trimmed.is_empty() {
        return Err(invalid("empty path"));
    }
    if trimmed.contains('\0') {
        return Err(invalid("contains NUL"));
    }
    if trimmed.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(invalid("empty, `.` or `..` component"));
    }
    if trimmed == TRAILER {
        return Err(invalid("reserved trailer name"));
    }
    Ok(trimmed.to_owned())
}

impl Archive {
    /// Creates an empty archive.
    pub fn new() -> Self {
        Self::default()
    }

    fn insert(&mut self, path: &str, entry: Entry) -> Result<(), CpioError> {
        let path = normalize(path)?;
        // Add every missing parent directory first.
        let mut parent = String::new();
        let components: Vec<&str> = path.split('/').collect();
        for component in &components[..components.len() - 1] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(component);
            match self.entries.get(&parent) {
                None => {
                    self.entries.insert(parent.clone(), Entry { kind: Kind::Dir, mode: 0o755 });
                }
                Some(Entry { kind: Kind::Dir, .. }) => {}
                Some(_) => return Err(CpioError::Conflict { path: parent }),
            }
        }
        match self.entries.get(&path) {
            Some(existing) if *existing == entry => Ok(()),
            // An explicitly added directory may restate an implied one with another mode.
            Some(Entry { kind: Kind::Dir, .. }) if entry.kind == Kind::Dir => {
                self.entries.insert(path, entry);
                Ok(())
            }
            Some(_) => Err(CpioError::Conflict { path }),
            None => {
                self.entries.insert(path, entry);
                Ok(())
            }
        }
    }

    /// Adds a directory with permission bits `perm` (e.g. `0o755`).
    pub fn dir(&mut self, path: &str, perm: u32) -> Result<(), CpioError> {
        self.insert(path, Entry { kind: Kind::Dir, mode: perm & 0o7777 })
    }

    /// Adds a regular file holding `data` with permission bits `perm`.
    pub fn file(&mut self, path: &str, data: Vec<u8>, perm: u32) -> Result<(), CpioError> {
        if u32::try_from(data.len()).is_err() {
            return Err(CpioError::TooLarge { path: path.to_owned(), len: data.len() });
        }
        self.insert(path, Entry { kind: Kind::File(data), mode: perm & 0o7777 })
    }

    /// Adds a copy of the host file `host` (its contents, not a link) at `path`.
    pub fn host_file(&mut self, path: &str, host: &Path, perm: u32) -> Result<(), CpioError> {
        let data = std::fs::read(host)
            .map_err(|source| CpioError::ReadHost { path: host.display().to_string(), source })?;
        self.file(path, data, perm)
    }

    /// Adds a symbolic link at `path` pointing to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), CpioError> {
        self.insert(path, Entry { kind: Kind::Symlink(target.to_owned()), mode: 0o777 })
    }

    /// Adds a character device node (e.g. `dev/console`, 5:1).
    pub fn char_device(&mut self, path: &str, major: u32, minor: u32, perm: u32) -> Result<(), CpioError> {
        self.insert(path, Entry { kind: Kind::CharDev(major, minor), mode: perm & 0o7777 })
    }

    /// Whether `path` is in the archive (explicitly or as an implied parent directory).
    pub fn contains(&self, path: &str) -> bool {
        normalize(path).map(|p| self.entries.contains_key(&p)).unwrap_or(false)
    }

    /// Writes the archive in `newc` format, ending with the `TRAILER!!!` record.
    pub fn write_to<W: Write>(&self, mut out: W) -> Result<(), CpioError> {
        for (ino, (path, entry)) in (1u32..).zip(&self.entries) {
            let mut rdev = (0, 0);
            let (mode, data): (u32, &[u8]) = match &entry.kind {
                Kind::Dir => (S_IFDIR | entry.mode, &[]),
                Kind::File(data) => (S_IFREG | entry.mode, data),
                Kind::Symlink(target) => (S_IFLNK | entry.mode, target.as_bytes()),
                Kind::CharDev(major, minor) => {
                    rdev = (*major, *minor);
                    (S_IFCHR | entry.mode, &[])
                }
            };
            let nlink = if entry.kind == Kind::Dir { 2 } else { 1 };
            let record = Record { ino, mode, nlink, rdev, name: path, data };
            record.write(&mut out).map_err(CpioError::Write)?;
        }
        let trailer = Record { ino: 0, mode: 0, nlink: 1, rdev: (0, 0), name: TRAILER, data: &[] };
        trailer.write(&mut out).map_err(CpioError::Write)?;
        out.flush().map_err(CpioError::Write)
    }
}

fn pad4<W: Write>(out: &mut W, written: usize) -> io::Result<()> {
    let pad = (4 - written % 4) % 4;
    out.write_all(&[0u8; 3][..pad])
}

/// One `newc` record: a header, the NUL-terminated name and the data, each padded to 4 bytes.
struct Record<'a> {
    ino: u32,
    mode: u32,
    nlink: u32,
    rdev: (u32, u32),
    name: &'a str,
    data: &'a [u8],
}

impl Record<'_> {
    fn write<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let namesize = self.name.len() + 1;
        let (ino, mode, nlink, filesize) = (self.ino, self.mode, self.nlink, self.data.len());
        let (rmaj, rmin) = self.rdev;
        // magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor,
        // rdevmajor, rdevminor, namesize, check
        let header = format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{filesize:08x}{:08x}{:08x}\
             {rmaj:08x}{rmin:08x}{namesize:08x}{:08x}",
            0, 0, 0, 0, 0, 0
        );
        debug_assert_eq!(header.len(), 110);
        out.write_all(header.as_bytes())?;
        out.write_all(self.name.as_bytes())?;
        out.write_all(&[0])?;
        pad4(out, 110 + namesize)?;
        out.write_all(self.data)?;
        pad4(out, self.data.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record decoded from a `newc` stream.
    #[derive(Debug, PartialEq)]
    struct Decoded {
        name: String,
        mode: u32,
        data: Vec<u8>,
    }

    /// A strict reader of the format, used to check what the writer produced.
    fn decode(mut bytes: &[u8]) -> Vec<Decoded> {
        let total = bytes.len();
        let mut out = Vec::new();
        loop {
            assert_eq!((total - bytes.len()) % 4, 0, "record not 4-byte aligned");
            assert_eq!(&bytes[..6], b"070701", "bad magic");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&bytes[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap()
            };
            let mode = field(1);
            let filesize = field(6) as usize;
            let namesize = field(11) as usize;
            let name = std::str::from_utf8(&bytes[110..110 + namesize - 1]).unwrap().to_owned();
            assert_eq!(bytes[110 + namesize - 1], 0, "name not NUL-terminated");
            let data_start = (110 + namesize).div_ceil(4) * 4;
            let data = bytes[data_start..data_start + filesize].to_vec();
            let next = (data_start + filesize).div_ceil(4) * 4;
            bytes = &bytes[next..];
            if name == TRAILER {
                assert!(bytes.is_empty(), "bytes after the trailer");
                return out;
            }
            out.push(Decoded { name, mode, data });
        }
    }

    #[test]
    fn parents_come_before_children_and_trailer_ends() {
        let mut a = Archive::new();
        a.file("usr/lib/x/libc.so.6", b"abc".to_vec(), 0o755).unwrap();
        a.symlink("/bin/sh", "busybox").unwrap();
        a.dir("tmp", 0o1777).unwrap();
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        let recs = decode(&buf);
        let names: Vec<&str> = recs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["bin", "bin/sh", "tmp", "usr", "usr/lib", "usr/lib/x", "usr/lib/x/libc.so.6"]);
        assert_eq!(recs[0].mode, S_IFDIR | 0o755);
        assert_eq!(recs[1], Decoded { name: "bin/sh".into(), mode: S_IFLNK | 0o777, data: b"busybox".to_vec() });
        assert_eq!(recs[2].mode, S_IFDIR | 0o1777);
        assert_eq!(recs[6].data, b"abc");
    }

    #[test]
    fn every_name_and_data_length_is_padded() {
        // Names of length 1..=8 and data of length 0..=8 cover every padding case.
        let mut a = Archive::new();
        for n in 1..=8usize {
            let name = "n".repeat(n);
            a.file(&name, vec![n as u8; n], 0o644).unwrap();
        }
        a.file("empty", Vec::new(), 0o644).unwrap();
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        let recs = decode(&buf);
        assert_eq!(recs.len(), 9);
        for r in recs.iter().filter(|r| r.name.starts_with('n')) {
            assert_eq!(r.data, vec![r.name.len() as u8; r.name.len()]);
        }
    }

    #[test]
    fn bad_paths_and_conflicts_are_rejected() {
        let mut a = Archive::new();
        assert!(matches!(a.dir("", 0o755), Err(CpioError::InvalidPath { .. })));
        assert!(matches!(a.dir("a/../b", 0o755), Err(CpioError::InvalidPath { .. })));
        assert!(matches!(a.dir("a/./b", 0o755), Err(CpioError::InvalidPath { .. })));
        a.file("f", b"1".to_vec(), 0o644).unwrap();
        a.file("f", b"1".to_vec(), 0o644).unwrap();
        assert!(matches!(a.file("f", b"2".to_vec(), 0o644), Err(CpioError::Conflict { .. })));
        assert!(matches!(a.file("f/g", b"2".to_vec(), 0o644), Err(CpioError::Conflict { .. })));
    }

    /// GNU cpio (a dependency of `cargo xtask deps`) unpacks the archive to the same tree.
    #[test]
    fn gnu_cpio_unpacks_the_archive() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Archive::new();
        a.file("bin/tool", b"#!/bin/sh\necho hi\n".to_vec(), 0o755).unwrap();
        a.symlink("bin/alias", "tool").unwrap();
        a.dir("proc", 0o555).unwrap();
        a.char_device("dev/null", 1, 3, 0o666).unwrap();
        let mut buf = Vec::new();
        a.write_to(&mut buf).unwrap();
        let mut child = std::process::Command::new("cpio")
            .args(["-i", "-d", "--quiet", "--no-absolute-filenames"])
            .current_dir(dir.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("cpio is installed by `cargo xtask deps`");
        child.stdin.take().unwrap().write_all(&buf).unwrap();
        assert!(child.wait().unwrap().success());
        let tool = dir.path().join("bin/tool");
        assert_eq!(std::fs::read(&tool).unwrap(), b"#!/bin/sh\necho hi\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&tool).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::read_link(dir.path().join("bin/alias")).unwrap(), Path::new("tool"));
        assert!(dir.path().join("proc").is_dir());
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let null = std::fs::symlink_metadata(dir.path().join("dev/null")).unwrap();
        assert!(null.file_type().is_char_device());
        assert_eq!(null.rdev(), libc::makedev(1, 3));
    }
}
