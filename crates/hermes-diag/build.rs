//! Embeds the commit this binary is built from as `HERMES_BUILD_SHA` (empty when unknown).
//!
//! Source, in order: the git checkout the crate lives in (read from `.git` directly, no `git`
//! process), then the `HERMES_GIT_SHA` variable (a Docker build has no `.git`: the image passes
//! the commit as a build argument). The runtime falls back further to a baked file; see
//! `src/identity.rs`.

#[path = "src/git.rs"]
#[allow(dead_code)]
mod git;

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=HERMES_GIT_SHA");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let mut sha = String::new();
    if let Some(repo) = git::find_repo(Path::new(&manifest)) {
        for watched in repo.watch_paths() {
            println!("cargo:rerun-if-changed={}", watched.display());
        }
        if let Some(head) = repo.head_commit() {
            sha = head;
        }
    } else {
        // No checkout (an export, a Docker context): watch where the workspace's `.git` would
        // be. It is missing, so cargo runs this script again on every build, and an empty
        // identity never sticks to a target directory the checkout later shares.
        println!("cargo:rerun-if-changed={manifest}/../../.git");
    }
    if sha.is_empty() {
        sha = std::env::var("HERMES_GIT_SHA")
            .unwrap_or_default()
            .trim()
            .to_string();
    }
    println!("cargo:rustc-env=HERMES_BUILD_SHA={sha}");
}
