//! Where a path of the volume really leads, so the report reads only what moves with the volume.
//!
//! A volume written by the original may hold symlinks (an operator's `skills -> /srv/skills`,
//! or something planted). What such a link points at outside the volume does not come along
//! when the volume is mounted into another container, and reading it would report files that
//! are not the volume's: the report names the link and reads nothing behind it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where one path of the volume leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// Nothing there (a dangling link counts as missing: there is nothing to carry over).
    Missing,
    /// Inside the volume: the resolved path, safe to read.
    Inside(PathBuf),
    /// A symlink on the way leads out of the volume, to `target`.
    Outside {
        /// Where it leads.
        target: PathBuf,
    },
    /// It could not be looked at (permission denied, ...): the reason, one line.
    Unreadable(String),
}

/// The volume, resolved once.
#[derive(Debug, Clone)]
pub struct Volume {
    root: PathBuf,
}

impl Volume {
    /// The volume at `root` (resolved through its own symlinks: an operator's
    /// `/opt/data -> /srv/data` is the volume itself).
    ///
    /// # Errors
    ///
    /// When `root` cannot be resolved (missing, unreadable).
    pub fn open(root: &Path) -> io::Result<Volume> {
        Ok(Volume {
            root: fs::canonicalize(root)?,
        })
    }

    /// The resolved root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `path` (under the volume) leads.
    pub fn locate(&self, path: &Path) -> Located {
        match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A parent may be a link out of the volume: that is still not ours.
                return match path.parent().map(|p| self.locate(p)) {
                    Some(outside @ Located::Outside { .. }) => outside,
                    _ => Located::Missing,
                };
            }
            Err(e) => return Located::Unreadable(e.to_string()),
            Ok(_) => {}
        }
        match fs::canonicalize(path) {
            Ok(real) if real.starts_with(&self.root) => Located::Inside(real),
            Ok(real) => Located::Outside { target: real },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Located::Missing,
            Err(e) => Located::Unreadable(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_inside_are_followed_links_out_are_not() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "x").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let volume = Volume::open(dir.path()).unwrap();
        let root = volume.root().to_path_buf();
        fs::write(root.join("a"), "a").unwrap();
        symlink(root.join("a"), root.join("to-a")).unwrap();
        symlink(outside.path().join("secret"), root.join("out")).unwrap();
        symlink(outside.path(), root.join("outdir")).unwrap();
        symlink(root.join("nothing"), root.join("dangling")).unwrap();

        assert_eq!(
            volume.locate(&root.join("a")),
            Located::Inside(root.join("a"))
        );
        assert_eq!(
            volume.locate(&root.join("to-a")),
            Located::Inside(root.join("a"))
        );
        assert!(matches!(
            volume.locate(&root.join("out")),
            Located::Outside { .. }
        ));
        // Through a directory link, and a missing file behind one, are outside too.
        assert!(matches!(
            volume.locate(&root.join("outdir").join("secret")),
            Located::Outside { .. }
        ));
        assert!(matches!(
            volume.locate(&root.join("outdir").join("none")),
            Located::Outside { .. }
        ));
        assert_eq!(volume.locate(&root.join("dangling")), Located::Missing);
        assert_eq!(volume.locate(&root.join("none")), Located::Missing);
    }
}
