//! Whole-tree operations on a generation directory, none of which follows a symlink.
//!
//! A finished generation is *sealed*: every directory `r-x` and every file without write
//! bits, so neither installer can write into the active generation in place (the agent's
//! installer falls back to `pip install --target` when its `uv` fails; in a sealed tree that
//! fails instead of mixing two resolutions). The ABI stamp stays writable by its owner: the
//! agent's installer rewrites it (same content) before every install and gives up when it
//! cannot. Removing a sealed tree gives its directories their write bit back first.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::target::ABI_STAMP;

/// Every entry under `root` (not `root` itself), depth first, parents before children;
/// symlinks are listed, never entered.
fn walk(
    root: &Path,
    visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        visit(&path, &meta)?;
        if meta.is_dir() {
            walk(&path, visit)?;
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Seals a finished generation (see the module doc). Children are sealed before their
/// directory, so the walk never needs to write into a directory it already sealed.
pub fn seal(root: &Path) -> std::io::Result<()> {
    let mut dirs = vec![root.to_path_buf()];
    walk(root, &mut |path, meta| {
        let mode = meta.permissions().mode() & 0o7777;
        if meta.is_dir() {
            dirs.push(path.to_path_buf());
        } else if meta.is_file() {
            let keep_writable =
                path.parent() == Some(root) && path.file_name().is_some_and(|n| n == ABI_STAMP);
            let sealed = if keep_writable {
                mode | 0o200
            } else {
                mode & !0o222
            };
            if sealed != mode {
                set_mode(path, sealed)?;
            }
        }
        Ok(())
    })?;
    // Deepest first: a directory is sealed after everything in it.
    for dir in dirs.iter().rev() {
        set_mode(dir, 0o555)?;
    }
    Ok(())
}

/// Removes a generation tree, sealed or not. Symlinks inside are unlinked, never followed.
pub fn remove(root: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(m) if !m.is_dir() => return std::fs::remove_file(root),
        Ok(_) => {}
    }
    set_mode(root, 0o755)?;
    walk(root, &mut |path, meta| {
        if meta.is_dir() {
            set_mode(path, 0o755)?;
        }
        Ok(())
    })?;
    std::fs::remove_dir_all(root)
}

/// Total size in bytes of the regular files under `root`.
pub fn size(root: &Path) -> u64 {
    let mut total = 0;
    // A tree that cannot be read is reported as what could be counted.
    let _ = walk(root, &mut |_, meta| {
        if meta.is_file() {
            total += meta.len();
        }
        Ok(())
    });
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_tree_refuses_writes_except_the_stamp_and_removes_cleanly() {
        let d = tempfile::tempdir().unwrap();
        let g = d.path().join("0001");
        std::fs::create_dir_all(g.join("pkg/sub")).unwrap();
        std::fs::write(g.join("pkg/__init__.py"), "x = 1\n").unwrap();
        std::fs::write(g.join(ABI_STAMP), "3.13:.so").unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "").unwrap();
        std::os::unix::fs::symlink(&outside, g.join("link")).unwrap();
        seal(&g).unwrap();

        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&g), 0o555);
        assert_eq!(mode(&g.join("pkg/sub")), 0o555);
        assert_eq!(mode(&g.join("pkg/__init__.py")) & 0o222, 0);
        assert_ne!(
            mode(&g.join(ABI_STAMP)) & 0o200,
            0,
            "the agent rewrites the stamp"
        );
        assert_eq!(mode(&outside), 0o755, "a symlink is never followed");
        assert!(std::fs::metadata(outside.join("keep")).is_ok());

        remove(&g).unwrap();
        assert!(!g.exists());
        assert!(
            outside.join("keep").exists(),
            "removal never follows a symlink"
        );
        remove(&g).unwrap();
    }
}
