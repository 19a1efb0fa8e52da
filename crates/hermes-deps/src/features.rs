//! The feature registry: optional features installed at run time, as data.
//!
//! A *feature* is a `namespace.backend` key (`memory.honcho`,
//! `platform.matrix`) with a description and a list of pip specs; its first
//! spec is the *anchor*. The registry ships in `features.yaml` next to this
//! crate's manifest (compiled in with `include_str!`) and is validated by a
//! test: every key has a dot, every spec passes the safety check. Crates above
//! this one add the features whose pins they own with
//! [`FeatureRegistry::with_feature`] (hermes-plugins adds `memory.<name>` from
//! each bundled plugin's manifest, so those pins are written once). This module
//! answers `hermes deps status` ([`feature_status`]) and
//! `hermes deps ensure FEATURE` ([`ensure_feature`]).

use std::collections::BTreeMap;
use std::io::Write;

use serde::Deserialize;

use crate::Error;
use crate::install::{InstallOptions, InstallOutcome, install_specs};
use crate::python::spec_satisfied;
use crate::spec::{check_spec, package_name};

/// The shipped registry file.
pub const BUNDLED_FEATURES: &str = include_str!("../features.yaml");

/// Registry format version this build understands.
pub const REGISTRY_VERSION: u32 = 1;

/// One optional feature.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Feature {
    /// What it enables.
    pub description: String,
    /// Pip specs; the first is the anchor.
    pub specs: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryFile {
    version: u32,
    features: BTreeMap<String, Feature>,
}

/// The validated registry, keyed by feature name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureRegistry {
    features: BTreeMap<String, Feature>,
}

impl FeatureRegistry {
    /// Parses and validates a registry text.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let file: RegistryFile = yaml_serde::from_str(text).map_err(|e| Error::Registry {
            detail: e.to_string(),
        })?;
        if file.version != REGISTRY_VERSION {
            return Err(Error::Registry {
                detail: format!(
                    "version {} found, version {REGISTRY_VERSION} supported",
                    file.version
                ),
            });
        }
        for (name, f) in &file.features {
            validate(name, f)?;
        }
        Ok(Self {
            features: file.features,
        })
    }

    /// The registry in `features.yaml`. The complete list of what `hermes deps` can install
    /// adds the bundled plugins' features: `hermes_plugins::feature_registry`.
    pub fn bundled() -> Result<Self, Error> {
        Self::parse(BUNDLED_FEATURES)
    }

    /// This registry plus `name`, checked like a feature of `features.yaml`; a name already
    /// present is an error (each feature has one definition).
    pub fn with_feature(mut self, name: &str, feature: Feature) -> Result<Self, Error> {
        validate(name, &feature)?;
        if self.features.contains_key(name) {
            return Err(Error::Registry {
                detail: format!("feature `{name}` is defined twice"),
            });
        }
        self.features.insert(name.to_string(), feature);
        Ok(self)
    }

    /// One feature.
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.get(name)
    }

    /// All features, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Feature)> {
        self.features.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// The rules every feature follows: a `namespace.backend` name, at least one spec, every spec
/// safe.
fn validate(name: &str, f: &Feature) -> Result<(), Error> {
    if !name.contains('.') {
        return Err(Error::Registry {
            detail: format!("feature `{name}` is not `namespace.backend`"),
        });
    }
    if f.specs.is_empty() {
        return Err(Error::Registry {
            detail: format!("feature `{name}` has no specs"),
        });
    }
    for s in &f.specs {
        check_spec(s).map_err(|why| Error::Registry {
            detail: format!("feature `{name}`: spec `{s}`: {why}"),
        })?;
    }
    Ok(())
}

/// State of one feature for `hermes deps status`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FeatureStatus {
    /// Feature name.
    pub name: String,
    /// Description.
    pub description: String,
    /// True when every spec is satisfied.
    pub installed: bool,
    /// The unsatisfied specs.
    pub missing: Vec<String>,
}

/// Installed/missing for every feature, with ONE fresh interpreter run. When
/// the core venv does not exist yet, everything is missing.
pub fn feature_status(
    registry: &FeatureRegistry,
    options: &InstallOptions,
) -> Result<Vec<FeatureStatus>, Error> {
    let mut names: Vec<&str> = registry
        .iter()
        .flat_map(|(_, f)| f.specs.iter().filter_map(|s| package_name(s)))
        .collect();
    names.sort_unstable();
    names.dedup();
    let versions = match options.interpreter() {
        Some(i) => i.installed_versions(&names)?,
        None => BTreeMap::new(),
    };
    Ok(registry
        .iter()
        .map(|(name, f)| {
            let missing: Vec<String> = f
                .specs
                .iter()
                .filter(|s| !spec_satisfied(s, &versions))
                .cloned()
                .collect();
            FeatureStatus {
                name: name.to_string(),
                description: f.description.clone(),
                installed: missing.is_empty(),
                missing,
            }
        })
        .collect())
}

/// Plain-text table for `hermes deps status`.
pub fn render_status(rows: &[FeatureStatus], out: &mut dyn Write) -> std::io::Result<()> {
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(7).max(7);
    writeln!(out, "{:<width$}  {:<9}  DESCRIPTION", "FEATURE", "STATE")?;
    for r in rows {
        let state = if r.installed { "installed" } else { "missing" };
        writeln!(out, "{:<width$}  {:<9}  {}", r.name, state, r.description)?;
    }
    Ok(())
}

/// Result of [`ensure_feature`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EnsureOutcome {
    /// The feature.
    pub feature: String,
    /// Everything was already satisfied; nothing ran.
    pub already_satisfied: bool,
    /// The install (empty/ok when already satisfied).
    pub install: InstallOutcome,
}

/// Installs whatever a feature is missing. Unknown features are an error; a
/// blocked or failed install is reported inside the outcome.
pub fn ensure_feature(
    registry: &FeatureRegistry,
    name: &str,
    options: &InstallOptions,
) -> Result<EnsureOutcome, Error> {
    let feature = registry.get(name).ok_or_else(|| Error::UnknownFeature {
        name: name.to_string(),
    })?;
    let missing = match options.interpreter() {
        Some(i) => i.missing(&feature.specs)?,
        None => feature.specs.clone(),
    };
    if missing.is_empty() {
        return Ok(EnsureOutcome {
            feature: name.to_string(),
            already_satisfied: true,
            install: InstallOutcome {
                ok: true,
                ..InstallOutcome::default()
            },
        });
    }
    let install = install_specs(&missing, options);
    Ok(EnsureOutcome {
        feature: name.to_string(),
        already_satisfied: false,
        install,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_registry_parses_and_validates() {
        let r = FeatureRegistry::bundled().unwrap();
        assert!(r.iter().count() > 30);
        assert_eq!(
            package_name(&r.get("platform.matrix").unwrap().specs[0]),
            Some("mautrix")
        );
        // Memory providers' pins live in their plugin manifests (hermes-plugins adds them).
        assert!(r.iter().all(|(name, _)| !name.starts_with("memory.")));
        for (name, f) in r.iter() {
            assert!(name.contains('.'));
            assert!(f.specs.iter().all(|s| check_spec(s).is_ok()));
        }
    }

    #[test]
    fn rejects_bad_registries() {
        let bad = [
            "version: 2\nfeatures: {}\n",
            "version: 1\nfeatures:\n  nodot:\n    description: x\n    specs: [a]\n",
            "version: 1\nfeatures:\n  a.b:\n    description: x\n    specs: ['a; rm -rf /']\n",
            "version: 1\nfeatures:\n  a.b:\n    description: x\n    specs: []\n",
            "version: 1\nfeatures:\n  a.b:\n    description: x\n    specs: [a]\n    typo: 1\n",
        ];
        for t in bad {
            assert!(
                matches!(FeatureRegistry::parse(t), Err(Error::Registry { .. })),
                "{t}"
            );
        }
    }

    #[test]
    fn added_features_are_checked_and_defined_once() {
        let feature = |spec: &str| Feature {
            description: "d".into(),
            specs: vec![spec.into()],
        };
        let r = FeatureRegistry::parse(
            "version: 1\nfeatures:\n  a.b:\n    description: d\n    specs: [a==1]\n",
        )
        .unwrap()
        .with_feature("memory.x", feature("x-sdk==1"))
        .unwrap();
        assert_eq!(r.get("memory.x").unwrap().specs, ["x-sdk==1"]);
        for (name, spec) in [("a.b", "a==2"), ("nodot", "x==1"), ("m.y", "y; rm -rf /")] {
            assert!(
                matches!(
                    r.clone().with_feature(name, feature(spec)),
                    Err(Error::Registry { .. })
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn status_without_core_venv_is_all_missing() {
        let r = FeatureRegistry::parse(
            "version: 1\nfeatures:\n  a.b:\n    description: d\n    specs: [a==1]\n",
        )
        .unwrap();
        let o = InstallOptions::new("/nonexistent/home", true, crate::Environment::default());
        let rows = feature_status(&r, &o).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(!rows[0].installed);
        let mut buf = Vec::new();
        render_status(&rows, &mut buf).unwrap();
        assert!(String::from_utf8(buf).unwrap().contains("a.b      missing"));
        assert!(matches!(
            ensure_feature(&r, "x.y", &o),
            Err(Error::UnknownFeature { .. })
        ));
    }
}
