//! The pip-index bridge: the index pip would use, so uv uses it too.
//!
//! pip reads `index-url` from its config files and `PIP_INDEX_URL`; uv reads
//! neither. An operator who configured a mirror for pip must not be surprised
//! by uv going to the public index, so [`pip_index_url`] finds the URL pip would
//! use and the installer passes it to uv as `UV_INDEX_URL` (unless one of uv's
//! own index variables is already set). Files are read in pip's precedence
//! order, later files overriding earlier ones: global (`$XDG_CONFIG_DIRS/pip/pip.conf`,
//! `/etc/pip.conf`), user (`~/.pip/pip.conf`, `$XDG_CONFIG_HOME/pip/pip.conf`;
//! skipped when `PIP_CONFIG_FILE` names an existing file), site
//! (`<sys.prefix>/pip.conf`), then `PIP_CONFIG_FILE`. `PIP_CONFIG_FILE=/dev/null`
//! disables every file.

use std::path::{Path, PathBuf};

use crate::Environment;

/// uv's own index variables; when any is set, no bridging happens.
pub const UV_INDEX_VARS: [&str; 3] = ["UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX"];

/// Reads `index-url` from the `[global]` or `[install]` section of one ini text
/// (`[install]` wins, as it does for `pip install`).
pub fn index_url_from_ini(text: &str) -> Option<String> {
    let mut section = String::new();
    let mut global = None;
    let mut install = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_ascii_lowercase();
            continue;
        }
        let Some((key, value)) = line.split_once(['=', ':']) else {
            continue;
        };
        let key = key.trim().replace('_', "-").to_ascii_lowercase();
        if key != "index-url" {
            continue;
        }
        let value = value.trim().to_string();
        match section.as_str() {
            "global" => global = Some(value),
            "install" => install = Some(value),
            _ => {}
        }
    }
    install.or(global).filter(|v| !v.is_empty())
}

/// The config files pip would read, in precedence order (last wins).
pub fn pip_config_files(env: &Environment, sys_prefix: Option<&Path>) -> Vec<PathBuf> {
    let explicit = env.get_nonempty("PIP_CONFIG_FILE").map(PathBuf::from);
    if explicit.as_deref() == Some(Path::new("/dev/null")) {
        return Vec::new();
    }
    let mut files = Vec::new();
    let xdg_dirs = env.get_nonempty("XDG_CONFIG_DIRS").unwrap_or("/etc/xdg");
    for dir in xdg_dirs.split(':').filter(|d| !d.is_empty()) {
        files.push(Path::new(dir).join("pip").join("pip.conf"));
    }
    files.push(PathBuf::from("/etc/pip.conf"));
    let explicit_exists = explicit.as_deref().is_some_and(Path::is_file);
    if !explicit_exists {
        if let Some(home) = env.get_nonempty("HOME") {
            files.push(Path::new(home).join(".pip").join("pip.conf"));
        }
        let xdg_home = env
            .get_nonempty("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| {
                env.get_nonempty("HOME")
                    .map(|h| Path::new(h).join(".config"))
            });
        if let Some(dir) = xdg_home {
            files.push(dir.join("pip").join("pip.conf"));
        }
    }
    if let Some(prefix) = sys_prefix {
        files.push(prefix.join("pip.conf"));
    }
    if let Some(p) = explicit {
        files.push(p);
    }
    files
}

/// The index URL pip would use: `PIP_INDEX_URL`, else the last config file that sets one.
pub fn pip_index_url(env: &Environment, sys_prefix: Option<&Path>) -> Option<String> {
    if let Some(url) = env.get_nonempty("PIP_INDEX_URL") {
        return Some(url.to_string());
    }
    pip_config_files(env, sys_prefix)
        .iter()
        .rev()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .find_map(|t| index_url_from_ini(&t))
}

/// The index URL to export to uv as `UV_INDEX_URL`, or `None` when uv already
/// has its own index configuration or pip has none.
pub fn uv_index_bridge(env: &Environment, sys_prefix: Option<&Path>) -> Option<String> {
    if UV_INDEX_VARS.iter().any(|v| env.get_nonempty(v).is_some()) {
        return None;
    }
    pip_index_url(env, sys_prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ini_sections() {
        let t = "[global]\nindex-url = https://mirror/simple\n";
        assert_eq!(
            index_url_from_ini(t).as_deref(),
            Some("https://mirror/simple")
        );
        let t = "[global]\nindex_url: https://a\n[install]\nindex-url=https://b\n";
        assert_eq!(index_url_from_ini(t).as_deref(), Some("https://b"));
        assert_eq!(index_url_from_ini("[other]\nindex-url=x\n"), None);
    }

    #[test]
    fn env_var_wins_and_uv_vars_disable_bridge() {
        let e = Environment::default()
            .with("PIP_INDEX_URL", "https://m/simple")
            .with("PIP_CONFIG_FILE", "/dev/null");
        assert_eq!(
            uv_index_bridge(&e, None).as_deref(),
            Some("https://m/simple")
        );
        let e = e.with("UV_DEFAULT_INDEX", "https://uv");
        assert_eq!(uv_index_bridge(&e, None), None);
    }

    #[test]
    fn config_file_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("prefix");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(site.join("pip.conf"), "[global]\nindex-url=https://site\n").unwrap();
        let explicit = dir.path().join("explicit.conf");
        let e = Environment::default()
            .with("HOME", &dir.path().join("home").to_string_lossy())
            .with("XDG_CONFIG_DIRS", &dir.path().join("xdg").to_string_lossy());
        assert_eq!(
            pip_index_url(&e, Some(&site)).as_deref(),
            Some("https://site")
        );
        std::fs::write(&explicit, "[global]\nindex-url=https://explicit\n").unwrap();
        let e = e.with("PIP_CONFIG_FILE", &explicit.to_string_lossy());
        assert_eq!(
            pip_index_url(&e, Some(&site)).as_deref(),
            Some("https://explicit")
        );
        let e = e.with("PIP_CONFIG_FILE", "/dev/null");
        assert_eq!(pip_index_url(&e, Some(&site)), None);
    }
}
