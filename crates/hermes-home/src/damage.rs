//! Damaged files: the two rules every reader and writer in this crate shares.
//!
//! * **Decoding.** Every text file is strict UTF-8 (a leading byte-order mark is tolerated).
//!   Bytes that do not decode are damage, never "replaced": a lossy decode would turn a token
//!   into different characters, and the next write would store them for good.
//! * **Preserving.** Before a writer replaces a file that does not decode or parse (only
//!   `auth.json` and `gateway_state.json` are ever replaced; `.env` and `config.yaml` are left
//!   for the operator to fix), it *copies* the bytes to `<name>.corrupt.<timestamp>` — a copy,
//!   never a rename, so the original stays in place in case the parse error is ours — and a
//!   file whose copy fails is not replaced.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::Error;

/// Where bytes stop being UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotUtf8 {
    /// 1-based line of the first invalid byte.
    pub line: usize,
    /// 0-based offset of the first invalid byte in the file.
    pub offset: usize,
}

impl fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "not valid UTF-8 (line {}, byte {})",
            self.line, self.offset
        )
    }
}

/// Decodes a file's bytes as UTF-8 without a leading byte-order mark.
pub(crate) fn decode(bytes: &[u8]) -> Result<&str, NotUtf8> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.strip_prefix('\u{feff}').unwrap_or(text)),
        Err(e) => {
            let offset = e.valid_up_to();
            let line = 1 + bytes[..offset].iter().filter(|b| **b == b'\n').count();
            Err(NotUtf8 { line, offset })
        }
    }
}

/// [`decode`] for a file that is reported, not replaced, when damaged (`.env`,
/// `config.yaml`): bytes that are not UTF-8 are [`Error::NotUtf8`].
pub(crate) fn decode_text<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str, Error> {
    decode(bytes).map_err(|bad| Error::NotUtf8 {
        path: path.to_path_buf(),
        line: bad.line,
        offset: bad.offset,
    })
}

/// Copies the damaged file at `path` to a new `<name>.corrupt.<timestamp>` beside it (with
/// the original's permission bits, so a copy of `auth.json` is as private as the file) and
/// returns the copy's path. The copy is created exclusively: an existing file of that name,
/// or a symlink planted there, is never written through.
pub(crate) fn preserve(path: &Path) -> Result<PathBuf, Error> {
    let fail = |e| Error::io("preserve", path, e);
    let mut source = File::open(path).map_err(fail)?;
    let mode = source.metadata().map_err(fail)?.permissions().mode() & 0o777;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stamp = crate::time::compact_utc_now();
    // Two damaged versions in the same second get distinct copies.
    for n in 0..100 {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!(".{n}")
        };
        let dest = path.with_file_name(format!("{name}.corrupt.{stamp}{suffix}"));
        let mut copy = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&dest)
        {
            Ok(copy) => copy,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(fail(e)),
        };
        let copied = io::copy(&mut source, &mut copy)
            .and_then(|_| copy.set_permissions(fs::Permissions::from_mode(mode)))
            .and_then(|()| copy.sync_all());
        return match copied {
            Ok(()) => Ok(dest),
            Err(e) => {
                let _ = fs::remove_file(&dest);
                Err(fail(e))
            }
        };
    }
    Err(fail(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "too many corrupt copies with the same timestamp",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_strips_a_bom_and_locates_bad_bytes() {
        assert_eq!(decode("\u{feff}a=1".as_bytes()), Ok("a=1"));
        assert_eq!(
            decode(b"a=1\nb=\xff\n"),
            Err(NotUtf8 { line: 2, offset: 6 })
        );
        assert_eq!(
            NotUtf8 { line: 2, offset: 6 }.to_string(),
            "not valid UTF-8 (line 2, byte 6)"
        );
    }

    #[test]
    fn preserve_copies_with_the_mode_and_never_overwrites_a_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        fs::write(&path, b"\xffdamaged").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let first = preserve(&path).unwrap();
        fs::write(&path, b"damaged again").unwrap();
        let second = preserve(&path).unwrap();
        assert_ne!(first, second);
        assert_eq!(fs::read(&first).unwrap(), b"\xffdamaged");
        assert_eq!(fs::read(&second).unwrap(), b"damaged again");
        assert_eq!(
            fs::metadata(&first).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(
            first
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("auth.json.corrupt.")
        );
        assert_eq!(
            fs::read(&path).unwrap(),
            b"damaged again",
            "copy, not rename"
        );
    }

    #[test]
    fn preserve_of_a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = preserve(&dir.path().join("gone")).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Io {
                    action: "preserve",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
