//! PID 1 links no HTTP stack: the normal (non-dev, non-build) dependency closure of
//! `hermes-init`, and of `hermes-deps` (which the boot's installer uses), holds no HTTP server,
//! HTTP client, async runtime, TLS or SQLite, and stays small. Read from `cargo metadata` for
//! this host, so a new arrow anywhere in the workspace that drags one in fails here, naming the
//! path of crates it came by.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    reason = "test code, helpers included: a failed unwrap is a failed test; the sizes are printed"
)]

use std::collections::{BTreeMap, VecDeque};
use std::process::Command;

use serde_json::Value;

/// What PID 1's code must never link.
const FORBIDDEN: &[&str] = &[
    "axum",
    "hyper",
    "hyper-util",
    "reqwest",
    "tokio",
    "rusqlite",
    "libsqlite3-sys",
    "h2",
    "rustls",
];

/// The resolved graph for this host: package id → (name, normal dependencies' ids).
struct Graph {
    nodes: BTreeMap<String, (String, Vec<String>)>,
    members: Vec<String>,
}

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo {args:?}: {e}"));
    assert!(
        out.status.success(),
        "cargo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn graph() -> Graph {
    // Only this host's packages: another platform's (windows-sys, …) are never downloaded, so
    // an offline query of every platform fails, and none of them is linked here anyway.
    let version = cargo(&["-vV"]);
    let host = version
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("`cargo -vV` names the host");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let text = cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--locked",
        "--offline",
        "--filter-platform",
        host,
        "--manifest-path",
        manifest,
    ]);
    let meta: Value = serde_json::from_str(&text).unwrap();
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let id = node["id"].as_str().unwrap();
            let normal = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dep| {
                    dep["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|dep| dep["pkg"].as_str().unwrap().to_string())
                .collect();
            (id.to_string(), (names[id].to_string(), normal))
        })
        .collect();
    let members = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    Graph { nodes, members }
}

impl Graph {
    /// Every package `root` (a workspace member's name) links, itself included, each with the
    /// package it was first reached from.
    fn closure(&self, root: &str) -> BTreeMap<String, Option<String>> {
        let start = self
            .members
            .iter()
            .find(|id| self.nodes[*id].0 == root)
            .unwrap_or_else(|| panic!("no workspace member `{root}`"));
        let mut parent = BTreeMap::from([(start.clone(), None)]);
        let mut queue = VecDeque::from([start.clone()]);
        while let Some(id) = queue.pop_front() {
            for dep in &self.nodes[&id].1 {
                if !parent.contains_key(dep) {
                    parent.insert(dep.clone(), Some(id.clone()));
                    queue.push_back(dep.clone());
                }
            }
        }
        parent
    }

    /// `a → b → c`: how the closure reached `id`.
    fn path(&self, closure: &BTreeMap<String, Option<String>>, id: &str) -> String {
        let mut names = vec![self.nodes[id].0.clone()];
        let mut at = id.to_string();
        while let Some(Some(up)) = closure.get(&at) {
            names.push(self.nodes[up].0.clone());
            at = up.clone();
        }
        names.reverse();
        names.join(" → ")
    }

    /// The paths to every forbidden package in `root`'s closure, and the closure's size.
    fn check(&self, root: &str) -> (Vec<String>, usize) {
        let closure = self.closure(root);
        let found = closure
            .keys()
            .filter(|id| FORBIDDEN.contains(&self.nodes[*id].0.as_str()))
            .map(|id| self.path(&closure, id))
            .collect();
        (found, closure.len())
    }
}

/// (crate, most packages its normal closure may hold, itself included). Measured when PID 1
/// stopped linking the gateway: hermes-init 40, hermes-deps 34 (152 and 154 before).
const BOUNDS: &[(&str, usize)] = &[("hermes-init", 48), ("hermes-deps", 40)];

#[test]
fn pid_1_and_the_installer_link_no_http_stack_and_stay_small() {
    let graph = graph();
    let mut failures = Vec::new();
    for &(root, bound) in BOUNDS {
        let (found, size) = graph.check(root);
        eprintln!("{root}: {size} packages in its normal dependency closure (bound {bound})");
        failures.extend(found.into_iter().map(|path| format!("{root} links {path}")));
        if size > bound {
            failures.push(format!(
                "{root} links {size} packages, more than {bound}: see `cargo tree -p {root} -e normal`"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
