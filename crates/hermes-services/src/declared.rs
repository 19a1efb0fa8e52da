//! Services an operator declares under `services:` in the root's `config.yaml`, as PID 1 and
//! `hermes up` both run them.
//!
//! Words: a *declared service* is one entry of that mapping (format: `docs/services.md`).
//!
//! Rules shared by both supervisors:
//! * a bad entry is reported (service name, key, hint) and the valid ones still run;
//! * names beginning with `gateway-` belong to the profiles' gateway services: an entry with
//!   such a name is reported and left out, so it can never replace a gateway or make the
//!   supervisor refuse to start over a duplicate name;
//! * under PID 1 (root), every declared service runs as the service user: `config.yaml` is on
//!   the volume, which the service user can write, so what it declares must never run with
//!   more rights than that user has.

use hermes_home::config::Config;
use hermes_privilege::Identity;
use hermes_supervisor::ServiceSpec;

use crate::gateway::run_as_identity;

/// The prefix reserved for the gateway services.
const GATEWAY_PREFIX: &str = "gateway-";

/// The declared services, and what was wrong with the entries left out.
#[derive(Debug, Default)]
pub struct Declared {
    /// Valid entries, ready to supervise.
    pub specs: Vec<ServiceSpec>,
    /// What was wrong, for the caller to print.
    pub problems: Vec<Problem>,
}

/// One entry (or the whole section) left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, naming the service and key.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match &self.hint {
            Some(hint) => write!(f, "\n  hint: {hint}"),
            None => Ok(()),
        }
    }
}

/// The services of `config`'s `services:` mapping; with `identity`, each runs as that user.
pub fn declared_services(config: &Config, identity: Option<&Identity>) -> Declared {
    // The parser works on JSON values. YAML maps onto them except for what JSON cannot hold
    // (a non-string key, a NaN): then no service of the section runs, and the caller says why.
    let (specs, errors) = match serde_json::to_value(config.services()) {
        Ok(services) => hermes_supervisor::parse_services(&services),
        Err(e) => {
            return Declared {
                specs: Vec::new(),
                problems: vec![Problem {
                    message: format!("ignoring `services:`: {e}"),
                    hint: Some(
                        "service names and keys are strings, values plain YAML scalars, lists and maps"
                            .into(),
                    ),
                }],
            };
        }
    };
    let mut declared = Declared::default();
    for error in errors {
        declared.problems.push(Problem {
            message: error.to_string(),
            hint: error.hint(),
        });
    }
    for mut spec in specs {
        if spec.name.starts_with(GATEWAY_PREFIX) {
            declared.problems.push(Problem {
                message: format!(
                    "service `{}` is left out: names beginning with `{GATEWAY_PREFIX}` are the profiles' gateways",
                    spec.name
                ),
                hint: Some("rename it".into()),
            });
            continue;
        }
        if let Some(id) = identity {
            run_as_identity(&mut spec, id);
        }
        declared.specs.push(spec);
    }
    declared
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(yaml: &str) -> Config {
        Config::parse(Path::new("config.yaml"), yaml).unwrap()
    }

    #[test]
    fn valid_entries_run_bad_ones_are_reported_and_gateway_names_are_reserved() {
        let d = declared_services(
            &config(
                "services:\n  web:\n    command: [sleep, '60']\n  bad:\n    restart: sometimes\n    command: x\n  gateway-default:\n    command: [sleep, '1']\n",
            ),
            None,
        );
        let names: Vec<&str> = d.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["web"]);
        assert_eq!(d.problems.len(), 2, "{:?}", d.problems);
        let text: Vec<String> = d.problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|p| p.contains("restart") && p.contains("\n  hint: ")),
            "{text:?}"
        );
        assert!(
            text.iter().any(|p| p.contains("gateway-default")),
            "{text:?}"
        );
        assert!(
            d.specs[0].run_as.is_none(),
            "no identity: the supervisor's own user"
        );
    }

    #[test]
    fn under_an_identity_every_declared_service_runs_as_it() {
        let id = Identity {
            name: "hermes".into(),
            uid: 10000,
            gid: 10000,
            groups: vec![10000],
            home: "/opt/data/home".into(),
            shell: "/bin/sh".into(),
        };
        let d = declared_services(
            &config("services:\n  web:\n    command: [sleep, '60']\n"),
            Some(&id),
        );
        let run_as = d.specs[0].run_as.as_ref().expect("confined");
        assert_eq!((run_as.uid, run_as.gid), (10000, 10000));
        assert_eq!(
            d.specs[0].env.get("HOME").map(String::as_str),
            Some("/opt/data/home")
        );
    }
}
