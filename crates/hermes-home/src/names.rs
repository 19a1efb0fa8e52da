//! Profile names: the `default` profile, the rule for the others, and [`ProfileRef`], which
//! says which of them a command acts on.
//!
//! This module depends on nothing else in the crate except [`Error`]; [`crate::layout`]
//! (paths, selecting a profile) and [`crate::profile`] (creating, listing, deleting) both
//! build on it, and `profile` builds on `layout`, so dependencies inside the crate point one
//! way.

use std::fmt;

use crate::Error;

/// The name of the root profile (the one that lives directly in `HERMES_HOME`).
pub const DEFAULT_PROFILE: &str = "default";

/// Names that can never be given to a profile.
pub const RESERVED_NAMES: &[&str] = &["default", "hermes", "root", "sudo", "test", "tmp"];

/// A valid profile name: `^[a-z0-9][a-z0-9_-]{0,63}$`, not reserved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProfileName(String);

impl ProfileName {
    /// Validates a name (surrounding whitespace is ignored).
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let name = raw.trim();
        let invalid = |reason| {
            Err(Error::InvalidProfileName {
                name: name.to_string(),
                reason,
            })
        };
        let Some(first) = name.chars().next() else {
            return invalid("the name is empty");
        };
        if name.len() > 64 {
            return invalid("the name is longer than 64 characters");
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return invalid("it must start with a lowercase letter or a digit");
        }
        if !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        {
            return invalid("only lowercase letters, digits, `_` and `-` are allowed");
        }
        if RESERVED_NAMES.contains(&name) {
            return Err(Error::ReservedProfileName {
                name: name.to_string(),
            });
        }
        Ok(ProfileName(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which profile a command acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileRef {
    /// The root itself.
    Default,
    /// `profiles/<name>`.
    Named(ProfileName),
}

impl ProfileRef {
    /// The profile's name as users write it (`default` for the root).
    pub fn name(&self) -> &str {
        match self {
            ProfileRef::Default => DEFAULT_PROFILE,
            ProfileRef::Named(name) => name.as_str(),
        }
    }

    /// Parses a user-given name; `default` (any case) selects the root.
    pub fn parse(name: &str) -> Result<Self, Error> {
        if name.trim().eq_ignore_ascii_case(DEFAULT_PROFILE) {
            Ok(ProfileRef::Default)
        } else {
            ProfileName::parse(name).map(ProfileRef::Named)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_in_any_case_is_the_root_and_every_other_name_is_checked() {
        for raw in ["default", " Default ", "DEFAULT"] {
            assert_eq!(ProfileRef::parse(raw).unwrap(), ProfileRef::Default);
        }
        assert_eq!(ProfileRef::Default.name(), DEFAULT_PROFILE);
        assert_eq!(ProfileRef::parse("work").unwrap().name(), "work");
        assert!(matches!(
            ProfileRef::parse("Work"),
            Err(Error::InvalidProfileName { .. })
        ));
        assert!(matches!(
            ProfileName::parse(DEFAULT_PROFILE),
            Err(Error::ReservedProfileName { .. })
        ));
    }
}
