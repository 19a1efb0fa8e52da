//! Just enough PEP 440 to answer "does the installed version satisfy this spec?".
//!
//! A *version* is `[N!]N(.N)*[{a|b|rc}N][.postN][.devN][+local]`; a
//! *specifier* is a comma-separated list of clauses (`>=1.0,<2`, `==1.*`,
//! `~=2.2`). Comparison follows PEP 440 ordering (dev < pre < final < post,
//! trailing zeros ignored). Anything this module cannot parse yields `None`,
//! and callers treat that as satisfied: like the original, we would rather not
//! churn a working environment over a version string we do not understand.

use std::cmp::Ordering;

/// A parsed version, comparable with PEP 440 ordering.
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u64,
    release: Vec<u64>,
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    local: String,
}

fn take_num(s: &str) -> (Option<u64>, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return (None, s);
    }
    (s[..end].parse().ok(), &s[end..])
}

fn strip_sep(s: &str) -> &str {
    s.strip_prefix(['.', '-', '_']).unwrap_or(s)
}

impl Version {
    /// Parses a version; `None` when it is not PEP 440-shaped.
    pub fn parse(input: &str) -> Option<Version> {
        let lower = input.trim().to_ascii_lowercase();
        let (public, local) = match lower.split_once('+') {
            Some((p, l)) => (p.to_string(), l.to_string()),
            None => (lower.clone(), String::new()),
        };
        let mut s = public.strip_prefix('v').unwrap_or(&public);
        let mut epoch = 0;
        if let Some((e, rest)) = s.split_once('!') {
            epoch = e.parse().ok()?;
            s = rest;
        }
        let mut release = Vec::new();
        loop {
            let (n, rest) = take_num(s);
            release.push(n?);
            s = rest;
            match s.strip_prefix('.') {
                Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => s = r,
                _ => break,
            }
        }
        let mut pre = None;
        let t = strip_sep(s);
        for (word, level) in [
            ("alpha", 0),
            ("beta", 1),
            ("preview", 2),
            ("pre", 2),
            ("rc", 2),
            ("a", 0),
            ("b", 1),
            ("c", 2),
        ] {
            if let Some(rest) = t.strip_prefix(word) {
                let (n, rest) = take_num(strip_sep(rest));
                pre = Some((level, n.unwrap_or(0)));
                s = rest;
                break;
            }
        }
        let mut post = None;
        let t = strip_sep(s);
        if let Some(rest) = t.strip_prefix("post").or_else(|| t.strip_prefix("rev")) {
            let (n, rest) = take_num(strip_sep(rest));
            post = Some(n.unwrap_or(0));
            s = rest;
        } else if let Some(rest) = s.strip_prefix('-') {
            let (n, rest) = take_num(rest);
            post = Some(n?);
            s = rest;
        }
        let mut dev = None;
        let t = strip_sep(s);
        if let Some(rest) = t.strip_prefix("dev") {
            let (n, rest) = take_num(strip_sep(rest));
            dev = Some(n.unwrap_or(0));
            s = rest;
        }
        if !s.is_empty() {
            return None;
        }
        Some(Version {
            epoch,
            release,
            pre,
            post,
            dev,
            local,
        })
    }

    /// True for dev and pre-releases.
    pub fn is_prerelease(&self) -> bool {
        self.pre.is_some() || self.dev.is_some()
    }

    fn key(&self) -> (u64, Vec<u64>, (i8, u64), i128, i128) {
        let mut release = self.release.clone();
        while release.len() > 1 && release.last() == Some(&0) {
            release.pop();
        }
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (-1, 0),
            (None, _, _) => (3, 0),
            (Some((l, n)), _, _) => (l as i8, n),
        };
        let post = self.post.map_or(-1, i128::from);
        let dev = self.dev.map_or(i128::MAX, i128::from);
        (self.epoch, release, pre, post, dev)
    }

    fn public_only(&self) -> Version {
        Version {
            local: String::new(),
            ..self.clone()
        }
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key()
            .cmp(&other.key())
            .then_with(|| self.local.cmp(&other.local))
    }
}

fn release_prefix_matches(version: &Version, prefix: &str) -> Option<bool> {
    let want = Version::parse(prefix)?;
    if want.epoch != version.epoch {
        return Some(false);
    }
    let n = want.release.len();
    let mut have = version.release.clone();
    have.resize(have.len().max(n), 0);
    Some(have[..n] == want.release[..])
}

fn clause_matches(version: &Version, clause: &str) -> Option<bool> {
    let clause = clause.trim();
    let ops = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"];
    let op = ops.iter().find(|op| clause.starts_with(**op))?;
    let value = clause[op.len()..].trim();
    if *op == "===" {
        return Some(value.eq_ignore_ascii_case(&version.to_string_lossy()));
    }
    if let Some(prefix) = value.strip_suffix(".*") {
        let m = release_prefix_matches(version, prefix)?;
        return match *op {
            "==" => Some(m),
            "!=" => Some(!m),
            _ => None,
        };
    }
    let want = Version::parse(value)?;
    let v = if want.local.is_empty() {
        version.public_only()
    } else {
        version.clone()
    };
    Some(match *op {
        "==" => v == want,
        "!=" => v != want,
        "<=" => v <= want,
        ">=" => v >= want,
        "<" => v < want && !(v.is_prerelease() && !want.is_prerelease() && same_release(&v, &want)),
        ">" => v > want && !(v.post.is_some() && want.post.is_none() && same_release(&v, &want)),
        "~=" => {
            if want.release.len() < 2 {
                return None;
            }
            let prefix: Vec<String> = want.release[..want.release.len() - 1]
                .iter()
                .map(u64::to_string)
                .collect();
            v >= want && release_prefix_matches(&v, &prefix.join("."))?
        }
        _ => return None,
    })
}

fn same_release(a: &Version, b: &Version) -> bool {
    a.epoch == b.epoch && a.public_only().key().1 == b.public_only().key().1
}

impl Version {
    fn to_string_lossy(&self) -> String {
        let rel: Vec<String> = self.release.iter().map(u64::to_string).collect();
        rel.join(".")
    }
}

/// Does `version` satisfy `specifier` (e.g. `>=1.0,<2`)? An empty specifier
/// accepts any version. `None` when either side cannot be parsed.
pub fn satisfies(version: &str, specifier: &str) -> Option<bool> {
    if specifier.trim().is_empty() {
        return Some(true);
    }
    let v = Version::parse(version)?;
    let mut all = true;
    for clause in specifier.split(',') {
        all &= clause_matches(&v, clause)?;
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|| panic!("parse {s}"))
    }

    #[test]
    fn orders_like_pep440() {
        assert!(v("1.0.dev1") < v("1.0a1"));
        assert!(v("1.0a1") < v("1.0b2"));
        assert!(v("1.0b2") < v("1.0rc1"));
        assert!(v("1.0rc1") < v("1.0"));
        assert!(v("1.0") < v("1.0.post1"));
        assert!(v("1.0") == v("1.0.0"));
        assert!(v("1.10") > v("1.9"));
        assert!(v("1!0.1") > v("2.0"));
    }

    #[test]
    fn evaluates_specifiers() {
        assert_eq!(satisfies("2.2.0", "==2.2.0"), Some(true));
        assert_eq!(satisfies("2.2.1", "==2.2.0"), Some(false));
        assert_eq!(satisfies("2.5", ">=2.0.10,<3"), Some(true));
        assert_eq!(satisfies("3.0", ">=2.0.10,<3"), Some(false));
        assert_eq!(satisfies("2.0.9", ">=2.0.10,<3"), Some(false));
        assert_eq!(satisfies("1.4", "==1.*"), Some(true));
        assert_eq!(satisfies("2.0", "==1.*"), Some(false));
        assert_eq!(satisfies("2.3", "~=2.2"), Some(true));
        assert_eq!(satisfies("3.0", "~=2.2"), Some(false));
        assert_eq!(satisfies("1.0+local", "==1.0"), Some(true));
        assert_eq!(satisfies("3.0rc1", "<3"), Some(false));
        assert_eq!(satisfies("anything", ""), Some(true));
        assert_eq!(satisfies("not a version", ">=1"), None);
        assert_eq!(satisfies("1.0", "=>1"), None);
    }
}
