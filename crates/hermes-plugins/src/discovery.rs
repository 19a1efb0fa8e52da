//! Finding plugins: bundled manifests, then `$HERMES_HOME/plugins/<name>/`.
//!
//! *Bundled* plugins ship inside the binary (`bundled/<name>/plugin.yaml`,
//! compiled in). *User* plugins are folders under the user plugin directory
//! holding a `plugin.yaml`. A bundled plugin wins a name clash (the user copy
//! is reported as *shadowed*), so a stray folder can never replace a provider
//! Hermes ships. A folder whose manifest is unreadable or invalid is skipped
//! and reported in [`Discovery::problems`]; discovery itself never fails.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::manifest::{Manifest, PluginKind, bundled_origin};

// `BUNDLED`: every `bundled/<name>/plugin.yaml`, listed by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// Where a plugin came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "path", rename_all = "lowercase")]
pub enum Source {
    /// Shipped with Hermes.
    Bundled,
    /// A folder under the user plugin directory.
    User(PathBuf),
}

/// A discovered plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plugin {
    /// Its manifest.
    pub manifest: Manifest,
    /// Where it came from.
    pub source: Source,
}

/// Result of [`discover`].
#[derive(Debug, Default)]
pub struct Discovery {
    /// Plugins, sorted by name, one per name.
    pub plugins: Vec<Plugin>,
    /// User plugins hidden by a bundled plugin of the same name.
    pub shadowed: Vec<PathBuf>,
    /// Folders skipped because their manifest is unreadable or invalid.
    pub problems: Vec<Error>,
}

impl Discovery {
    /// The plugin with this name.
    pub fn get(&self, name: &str) -> Option<&Plugin> {
        self.plugins.iter().find(|p| p.manifest.name == name)
    }

    /// The memory providers.
    pub fn memory_providers(&self) -> impl Iterator<Item = &Plugin> {
        self.plugins
            .iter()
            .filter(|p| p.manifest.kind == PluginKind::Memory)
    }
}

/// The bundled plugins (a manifest that fails validation is reported, not used).
pub fn bundled() -> (Vec<Plugin>, Vec<Error>) {
    let mut plugins = Vec::new();
    let mut problems = Vec::new();
    for &(name, text) in BUNDLED {
        match Manifest::parse(text, &bundled_origin(name)) {
            Ok(manifest) => plugins.push(Plugin {
                manifest,
                source: Source::Bundled,
            }),
            Err(e) => problems.push(e),
        }
    }
    (plugins, problems)
}

/// Bundled plugins plus user plugins from `user_dir` (usually
/// `$HERMES_HOME/plugins`; a missing directory is simply empty).
pub fn discover(user_dir: Option<&Path>) -> Discovery {
    let (mut plugins, mut problems) = bundled();
    let mut shadowed = Vec::new();
    let mut dirs: Vec<PathBuf> = user_dir
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.')
                && !name.starts_with('_')
                && e.path().join("plugin.yaml").is_file()
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        match Manifest::load(&dir) {
            Ok(manifest) => {
                if plugins.iter().any(|p| p.manifest.name == manifest.name) {
                    shadowed.push(dir);
                } else {
                    plugins.push(Plugin {
                        manifest,
                        source: Source::User(dir),
                    });
                }
            }
            Err(e) => problems.push(e),
        }
    }
    plugins.sort_by(|a, b| a.manifest.name.cmp(&b.manifest.name));
    Discovery {
        plugins,
        shadowed,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every folder under `bundled/` is compiled in, under its own name, valid, and a memory
    /// provider with a secret setting: a new bundled plugin is checked without being listed.
    #[test]
    fn bundled_manifests_are_valid() {
        let (plugins, problems) = bundled();
        assert!(problems.is_empty(), "{problems:?}");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bundled");
        let mut folders: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        folders.sort();
        let names: Vec<&str> = plugins.iter().map(|p| p.manifest.name.as_str()).collect();
        assert_eq!(
            names, folders,
            "one bundled plugin per folder, named after it"
        );
        for name in ["honcho", "mem0", "hindsight", "supermemory"] {
            assert!(names.contains(&name), "{name}");
        }
        for p in &plugins {
            assert_eq!(p.manifest.kind, PluginKind::Memory);
            assert!(
                p.manifest
                    .settings
                    .iter()
                    .any(|s| s.secret && s.env_var.is_some())
            );
        }
    }

    /// The pins that were reviewed as exact (or, for mem0, as a deliberate range).
    #[test]
    fn bundled_pins() {
        let (plugins, _) = bundled();
        let deps = |name: &str| {
            plugins
                .iter()
                .find(|p| p.manifest.name == name)
                .map(|p| p.manifest.pip_dependencies.clone())
                .unwrap()
        };
        assert_eq!(deps("mem0"), ["mem0ai>=2.0.10,<3"]);
        assert_eq!(deps("honcho"), ["honcho-ai==2.2.0"]);
    }

    #[test]
    fn user_plugins_and_clashes() {
        let d = tempfile::tempdir().unwrap();
        let write = |dir: &str, text: &str| {
            std::fs::create_dir_all(d.path().join(dir)).unwrap();
            std::fs::write(d.path().join(dir).join("plugin.yaml"), text).unwrap();
        };
        write("mine", "name: mine\ndescription: user plugin\n");
        write("honcho", "name: honcho\ndescription: impostor\n");
        write("broken", "name: [\n");
        write(".hidden", "name: hidden\n");
        std::fs::create_dir_all(d.path().join("no-manifest")).unwrap();
        let found = discover(Some(d.path()));
        assert_eq!(
            found.get("honcho").unwrap().source,
            Source::Bundled,
            "bundled wins"
        );
        assert_eq!(found.shadowed, vec![d.path().join("honcho")]);
        assert!(matches!(found.get("mine").unwrap().source, Source::User(_)));
        assert!(found.get("hidden").is_none());
        assert_eq!(found.problems.len(), 1);
        assert!(found.problems[0].to_string().contains("broken"));
        assert_eq!(found.plugins.len(), 5);
        assert!(
            discover(Some(Path::new("/nonexistent/plugins")))
                .problems
                .is_empty()
        );
    }
}
