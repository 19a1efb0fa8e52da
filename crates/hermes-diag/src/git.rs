//! Reading a git checkout's HEAD commit straight from `.git`, without running `git`.
//!
//! Handles a `.git` directory or a `gitdir:` pointer file (worktrees and submodules, with
//! `commondir`), a detached HEAD, loose refs and `packed-refs`. Object ids of 40 (SHA-1) and
//! 64 (SHA-256) hex characters are accepted. Shared with `build.rs` through `#[path]`, so it
//! depends on `std` only.

use std::fs;
use std::path::{Path, PathBuf};

/// A located git repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The directory holding the work tree's `.git` entry.
    pub work_tree: PathBuf,
    /// The git dir (`.git`, or where a `gitdir:` file points).
    pub git_dir: PathBuf,
    /// The common dir (differs from `git_dir` in a linked worktree).
    pub common_dir: PathBuf,
}

/// Finds the repository containing `start` (walking up).
pub fn find_repo(start: &Path) -> Option<Repo> {
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        let git_dir = if dot_git.is_dir() {
            dot_git
        } else if dot_git.is_file() {
            let text = fs::read_to_string(&dot_git).ok()?;
            let pointer = text.trim().strip_prefix("gitdir:")?.trim();
            let path = Path::new(pointer);
            if path.is_absolute() {
                path.to_path_buf()
            } else {
                dir.join(path)
            }
        } else {
            continue;
        };
        let common_dir = match fs::read_to_string(git_dir.join("commondir")) {
            Ok(text) => {
                let path = Path::new(text.trim());
                if path.is_absolute() {
                    path.to_path_buf()
                } else {
                    git_dir.join(path)
                }
            }
            Err(_) => git_dir.clone(),
        };
        return Some(Repo {
            work_tree: dir.to_path_buf(),
            git_dir,
            common_dir,
        });
    }
    None
}

/// Whether `s` is a full object id.
pub fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Repo {
    /// The commit HEAD points at, if it can be resolved.
    pub fn head_commit(&self) -> Option<String> {
        let head = fs::read_to_string(self.git_dir.join("HEAD")).ok()?;
        let head = head.trim();
        match head.strip_prefix("ref:") {
            None => is_object_id(head).then(|| head.to_ascii_lowercase()),
            Some(reference) => self.resolve_ref(reference.trim()),
        }
    }

    fn resolve_ref(&self, reference: &str) -> Option<String> {
        for dir in [&self.git_dir, &self.common_dir] {
            if let Ok(text) = fs::read_to_string(dir.join(reference)) {
                let id = text.trim();
                if is_object_id(id) {
                    return Some(id.to_ascii_lowercase());
                }
            }
        }
        let packed = fs::read_to_string(self.common_dir.join("packed-refs")).ok()?;
        packed
            .lines()
            .filter(|line| !line.starts_with('#') && !line.starts_with('^'))
            .filter_map(|line| line.split_once(' '))
            .find(|(_, name)| name.trim() == reference)
            .map(|(id, _)| id.to_ascii_lowercase())
            .filter(|id| is_object_id(id))
    }

    /// Files whose change means HEAD may have moved (for `cargo:rerun-if-changed`).
    pub fn watch_paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![
            self.git_dir.join("HEAD"),
            self.common_dir.join("packed-refs"),
        ];
        if let Ok(head) = fs::read_to_string(self.git_dir.join("HEAD"))
            && let Some(reference) = head.trim().strip_prefix("ref:")
        {
            paths.push(self.common_dir.join(reference.trim()));
        }
        // A missing file would make cargo rerun the build script on every build.
        paths.retain(|p| p.exists());
        paths
    }
}
