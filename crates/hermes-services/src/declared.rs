//! Services an operator declares under `services:` in the root's `config.yaml`, as PID 1 and
//! `hermes up` both run them.
//!
//! Words: a *declared service* is one entry of that mapping (format: `docs/services.md`).
//!
//! Rules shared by both supervisors:
//! * a bad entry is reported (service name, key, hint) and the valid ones still run; the
//!   entries left out are returned typed ([`Invalid`]), so `hermes service status`, `service
//!   start`, `dump` and `doctor` show them from this one parser, not only `up`'s stderr;
//! * names beginning with `gateway-` belong to the profiles' gateway services: an entry with
//!   such a name is reported and left out, so it can never replace a gateway or make the
//!   supervisor refuse to start over a duplicate name;
//! * a built-in service (the dashboard, the scheduled backups) an operator declared a service
//!   of the same name in place of is left out, theirs runs ([`add_unless_declared`]);
//! * under PID 1 (root), every declared service runs as the service user: `config.yaml` is on
//!   the volume, which the service user can write, so what it declares must never run with
//!   more rights than that user has.

use std::path::Path;

use hermes_home::config::Config;
use hermes_privilege::Identity;
use hermes_supervisor::ServiceSpec;
use hermes_supervisor::config::{ConfigError, SERVICE_KEYS, parse_service};
use serde_json::Value;

/// Adds the built-in service `spec` to `specs` unless a service of its name is already there
/// (one the operator declared under `services:`): theirs runs, and the returned note says ours,
/// `what` (`the built-in dashboard`), was left out.
pub fn add_unless_declared(
    specs: &mut Vec<ServiceSpec>,
    spec: ServiceSpec,
    what: &str,
) -> Option<String> {
    if specs.iter().any(|s| s.name == spec.name) {
        return Some(format!(
            "`{}` is declared in config.yaml; it runs instead of {what}",
            spec.name
        ));
    }
    specs.push(spec);
    None
}

use crate::gateway::{GATEWAY_PREFIX, run_as_identity};

/// The most edits between a mistyped key and the key it is taken for (`comand`, `restrat`).
const TYPO_DISTANCE: usize = 2;

/// The declared services, and what was wrong with the entries left out.
#[derive(Debug, Default)]
pub struct Declared {
    /// Valid entries, ready to supervise.
    pub specs: Vec<ServiceSpec>,
    /// The entries left out, each with every reason.
    pub invalid: Vec<Invalid>,
    /// What is wrong with the section itself (then none of its services runs).
    pub section: Option<Flaw>,
    /// Every flaw as a message and hint, for `up` and PID 1 to print.
    pub problems: Vec<Problem>,
}

/// One entry of `services:` left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The entry's name.
    pub name: String,
    /// What is wrong with it, at least one thing.
    pub flaws: Vec<Flaw>,
}

impl Invalid {
    /// What is wrong, in one line: `unknown key `comand`; the command is missing`.
    pub fn reason(&self) -> String {
        join(self.flaws.iter().map(|f| &f.problem))
    }

    /// What to do, in one line, each fix naming its key.
    pub fn fix(&self) -> String {
        join(self.flaws.iter().map(Flaw::fix_for_key))
    }
}

/// One thing wrong with an entry (or with the section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flaw {
    /// The offending key, when the problem is with one key.
    pub key: Option<String>,
    /// What is wrong, lowercase, no trailing period.
    pub problem: String,
    /// What to do about it: what the key allows, `did you mean …?` for a close typo.
    pub fix: String,
}

impl Flaw {
    /// The fix led by its key: ``restart`: use one of …`.
    pub fn fix_for_key(&self) -> String {
        match &self.key {
            Some(key) => format!("`{key}`: {}", self.fix),
            None => self.fix.clone(),
        }
    }

    /// A problem of the supervisor's parser, with its hint (and, for an unknown key close to
    /// a known one, the key it was taken for).
    fn from_config(error: ConfigError) -> Self {
        let hint = error
            .hint()
            .unwrap_or_else(|| "see `docs/services.md` for the keys of an entry".into());
        let fix = match error.key.as_deref() {
            Some(key) if !SERVICE_KEYS.contains(&key) => match closest_key(key) {
                Some(meant) => format!("did you mean `{meant}`? {hint}"),
                None => hint,
            },
            _ => hint,
        };
        Flaw {
            key: error.key,
            problem: error.problem,
            fix,
        }
    }
}

/// One line of `up`'s (and PID 1's) warnings: what is wrong, naming the service and key.
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
    let mut declared = Declared::default();
    // The parser works on JSON values. YAML maps onto them except for what JSON cannot hold
    // (a non-string key, a NaN): then no service of the section runs, and the caller says why.
    match serde_json::to_value(config.services()) {
        Ok(Value::Object(entries)) => {
            for (name, entry) in &entries {
                match check_entry(name, entry) {
                    Ok(mut spec) => {
                        if let Some(id) = identity {
                            run_as_identity(&mut spec, id);
                        }
                        declared.specs.push(spec);
                    }
                    Err(flaws) => declared.invalid.push(Invalid {
                        name: name.clone(),
                        flaws,
                    }),
                }
            }
        }
        Ok(Value::Null) => {}
        Ok(_) => declared.section = Some(Flaw {
            key: None,
            problem: "`services` must be a mapping of name to service".into(),
            fix: "write `services:` as a mapping: a service name, then its keys indented under it"
                .into(),
        }),
        Err(e) => {
            declared.section = Some(Flaw {
                key: None,
                problem: format!("ignoring `services:`: {e}"),
                fix:
                    "service names and keys are strings, values plain YAML scalars, lists and maps"
                        .into(),
            })
        }
    }
    declared.problems = problems(&declared);
    declared
}

/// The services declared in the `config.yaml` of `root` (the home's root): what `service
/// status`, `dump` and `doctor` show of the entries left out.
pub fn declared_in(root: &Path) -> Result<Declared, hermes_home::Error> {
    Ok(declared_services(&hermes_settings::config_of(root)?, None))
}

/// One entry as a spec, or everything wrong with it (a reserved name included).
fn check_entry(name: &str, entry: &Value) -> Result<ServiceSpec, Vec<Flaw>> {
    let mut flaws = Vec::new();
    if name.starts_with(GATEWAY_PREFIX) {
        flaws.push(Flaw {
            key: None,
            problem: format!(
                "names beginning with `{GATEWAY_PREFIX}` are the profiles' gateways: the entry is left out"
            ),
            fix: format!("rename it (a name not beginning with `{GATEWAY_PREFIX}`)"),
        });
    }
    match parse_service(name, entry) {
        Ok(spec) if flaws.is_empty() => Ok(spec),
        Ok(_) => Err(flaws),
        Err(errors) => {
            flaws.extend(errors.into_iter().map(Flaw::from_config));
            Err(flaws)
        }
    }
}

/// `up`'s warnings: one per flaw, naming the service (`service `bad`: unknown key `colour``).
fn problems(declared: &Declared) -> Vec<Problem> {
    let section = declared.section.iter().map(|flaw| Problem {
        message: flaw.problem.clone(),
        hint: Some(flaw.fix.clone()),
    });
    let entries = declared.invalid.iter().flat_map(|entry| {
        entry.flaws.iter().map(|flaw| Problem {
            message: format!("service `{}`: {}", entry.name, flaw.problem),
            hint: Some(flaw.fix.clone()),
        })
    });
    section.chain(entries).collect()
}

/// The known key `key` was probably meant as, if one is close enough.
fn closest_key(key: &str) -> Option<&'static str> {
    use hermes_errors::suggest::{Within, close_matches};
    close_matches(
        key,
        SERVICE_KEYS.iter().copied(),
        Within::Edits(TYPO_DISTANCE),
    )
    .first()
    .copied()
}

/// Parts of one line, `; `-separated.
fn join(parts: impl Iterator<Item = impl AsRef<str>>) -> String {
    let parts: Vec<String> = parts.map(|p| p.as_ref().to_owned()).collect();
    parts.join("; ")
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
    fn entries_left_out_are_typed_with_their_keys_and_fixes() {
        let d = declared_services(
            &config(
                "services:\n  typo:\n    comand: [sleep, '60']\n  loose:\n    restart: sometimes\n    command: x\n  gateway-x:\n    command: y\n  web:\n    command: z\n",
            ),
            None,
        );
        assert_eq!(d.specs.len(), 1);
        assert_eq!(d.section, None);
        let entry = |name: &str| {
            d.invalid
                .iter()
                .find(|i| i.name == name)
                .unwrap_or_else(|| panic!("{name} in {:?}", d.invalid))
        };
        let typo = entry("typo");
        assert_eq!(
            typo.reason(),
            "unknown key `comand`; the command is missing"
        );
        let comand = &typo.flaws[0];
        assert_eq!(comand.key.as_deref(), Some("comand"));
        assert!(
            comand
                .fix_for_key()
                .starts_with("`comand`: did you mean `command`? valid keys are: command, env"),
            "{comand:?}"
        );
        let loose = entry("loose");
        assert_eq!(loose.flaws.len(), 1);
        assert!(loose.reason().contains("sometimes"), "{loose:?}");
        assert_eq!(
            loose.fix(),
            "`restart`: use one of `always`, `on-failure`, `never`"
        );
        assert!(
            entry("gateway-x").reason().contains("profiles' gateways"),
            "{:?}",
            d.invalid
        );
        // `up`'s warnings say the same, one per flaw.
        assert_eq!(d.problems.len(), 4, "{:?}", d.problems);
        assert!(
            d.problems.iter().any(|p| p.message
                == "service `gateway-x`: names beginning with `gateway-` are the profiles' \
                    gateways: the entry is left out"),
            "{:?}",
            d.problems
        );
    }

    #[test]
    fn a_section_that_is_no_mapping_is_said_once() {
        let d = declared_services(&config("services: [a, b]\n"), None);
        assert!(d.specs.is_empty() && d.invalid.is_empty());
        let section = d.section.expect("the section's flaw");
        assert!(section.problem.contains("mapping"), "{section:?}");
        assert_eq!(d.problems.len(), 1);
        // An absent or empty section is no problem.
        assert!(
            declared_services(&config("model: x\n"), None)
                .problems
                .is_empty()
        );
        assert!(
            declared_services(&config("services:\n"), None)
                .problems
                .is_empty()
        );
    }

    #[test]
    fn a_far_off_key_gets_no_guess() {
        let d = declared_services(
            &config("services:\n  w:\n    command: x\n    colour: red\n"),
            None,
        );
        let fix = d.invalid[0].fix();
        assert!(!fix.contains("did you mean"), "{fix}");
        assert!(fix.starts_with("`colour`: valid keys are: "), "{fix}");
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
