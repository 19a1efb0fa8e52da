//! A snapshot of environment variables, passed to the pure decision functions.
//!
//! Decisions (`shim_decision`, `IdRequest::from_env`) read the environment through [`Env`]
//! instead of `std::env`, so tests give them any environment without touching the
//! process's own. Words: the *process environment* is `std::env::vars_os`; an [`Env`] is a
//! copy of it (or of any list of pairs).

use std::collections::BTreeMap;

/// Environment variables by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// A copy of the process environment. Variables whose name or value is not UTF-8 are
    /// left out: none of the variables this crate reads can be meaningful in that case.
    pub fn from_process() -> Self {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    /// The value of `key`, if set (possibly empty).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// Every variable, by name.
    pub fn vars(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.vars.iter().map(|(k, v)| (k.clone(), v.clone()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Env {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Env {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_distinguishes_unset_from_empty() {
        let env: Env = [("A", ""), ("B", "x")].into_iter().collect();
        assert_eq!(env.get("A"), Some(""));
        assert_eq!(env.get("B"), Some("x"));
        assert_eq!(env.get("C"), None);
    }

    #[test]
    fn process_snapshot_sees_path() {
        // PATH is set for every test runner we know of; the point is that the snapshot is
        // not empty and holds real values.
        let env = Env::from_process();
        let expected = std::env::var("PATH").ok();
        assert_eq!(env.get("PATH").map(str::to_owned), expected);
    }
}
