//! The optional features `hermes deps status` and `hermes deps ensure` know: hermes-deps's own
//! registry (`features.yaml`) plus `memory.<name>` for every bundled memory plugin that has pip
//! dependencies, whose specs are its manifest's `pip_dependencies`. The pins are written once,
//! in the manifest; this crate sits above hermes-deps, so it adds them rather than hermes-deps
//! reading plugin manifests.

use hermes_deps::{Feature, FeatureRegistry};

use crate::discovery::bundled;
use crate::manifest::PluginKind;

/// The feature a bundled memory plugin's dependencies install as (`memory.honcho`).
pub fn memory_feature_name(plugin: &str) -> String {
    format!("memory.{plugin}")
}

/// Every feature Hermes can install: [`FeatureRegistry::bundled`] plus the bundled memory
/// plugins'. A bundled manifest that fails validation adds nothing (discovery and `doctor`
/// report it).
///
/// # Errors
///
/// A `features.yaml` that does not parse, or a plugin feature that clashes with one of it
/// (`hermes_deps::Error::Registry`).
pub fn feature_registry() -> Result<FeatureRegistry, hermes_deps::Error> {
    let (plugins, _problems) = bundled();
    plugins
        .into_iter()
        .map(|p| p.manifest)
        .filter(|m| m.kind == PluginKind::Memory && !m.pip_dependencies.is_empty())
        .try_fold(FeatureRegistry::bundled()?, |registry, m| {
            let description = match m.description.trim() {
                "" => format!("{} memory provider", m.name),
                text => text.to_string(),
            };
            registry.with_feature(
                &memory_feature_name(&m.name),
                Feature {
                    description,
                    specs: m.pip_dependencies,
                },
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bundled_memory_plugin_is_a_feature_with_its_manifests_pins() {
        let registry = feature_registry().unwrap();
        let (plugins, problems) = bundled();
        assert!(problems.is_empty(), "{problems:?}");
        for p in plugins
            .iter()
            .filter(|p| !p.manifest.pip_dependencies.is_empty())
        {
            let feature = registry
                .get(&memory_feature_name(&p.manifest.name))
                .unwrap_or_else(|| panic!("no feature for {}", p.manifest.name));
            assert_eq!(feature.specs, p.manifest.pip_dependencies);
        }
        assert_eq!(
            registry.get("memory.mem0").unwrap().specs,
            ["mem0ai>=2.0.10,<3"]
        );
        // features.yaml's own features are all there too.
        let base = FeatureRegistry::bundled().unwrap();
        assert!(base.iter().all(|(name, f)| registry.get(name) == Some(f)));
        let with_deps = plugins
            .iter()
            .filter(|p| !p.manifest.pip_dependencies.is_empty())
            .count();
        assert_eq!(registry.iter().count(), base.iter().count() + with_deps);
    }
}
