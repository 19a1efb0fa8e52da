//! `hermes gateway install|uninstall`: a profile's gateway as a systemd user unit
//! (`~/.config/systemd/user/hermes-gateway-<profile>.service`, its text from
//! [`systemd_user_unit`](crate::systemd_user_unit)). In the container gateways are the
//! container's, so nothing is written there.

use std::path::{Path, PathBuf};

use hermes_home::Home;
use hermes_home::profile::alias;

use crate::Error;

/// What [`install`] or [`uninstall`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitChange {
    /// In the container: every profile's gateway is managed there already; nothing done.
    InContainer,
    /// The unit was written.
    Written {
        /// The unit file.
        unit: PathBuf,
        /// Its name (`hermes-gateway-<profile>.service`).
        unit_name: String,
        /// The `hermes` it runs.
        exe: PathBuf,
        /// That `hermes` is a cargo build's only, which `cargo clean` removes.
        build_only: bool,
        /// The socket unit beside it that holds the API port (the native engine with its API
        /// server on), and its name.
        socket: Option<(PathBuf, String)>,
    },
    /// There was no unit to remove.
    Absent {
        /// Where it would be.
        unit: PathBuf,
    },
    /// The unit was removed.
    Removed {
        /// The unit file.
        unit: PathBuf,
        /// Its name.
        unit_name: String,
        /// The socket unit removed with it, if there was one.
        socket: Option<PathBuf>,
    },
}

/// The unit's name for `profile`.
pub fn unit_name(profile: &str) -> String {
    format!("hermes-gateway-{profile}.service")
}

/// The name of the socket unit beside it.
pub fn socket_unit_name(profile: &str) -> String {
    format!("hermes-gateway-{profile}.socket")
}

/// The user unit file of `profile`'s gateway: under `$XDG_CONFIG_HOME/systemd/user`, else
/// `$HOME/.config/systemd/user`.
///
/// # Errors
/// [`Error::NoUnitDir`] when neither variable is set.
pub fn unit_path(profile: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, Error> {
    let base = var("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or(Error::NoUnitDir)?;
    Ok(base.join("systemd/user").join(unit_name(profile)))
}

fn in_container() -> bool {
    hermes_privilege::image_marker_present(Path::new(hermes_privilege::IMAGE_MARKER))
}

/// Writes `home`'s gateway unit. It runs a `hermes` that outlives a cargo build (the one the
/// profile aliases run, [`alias::stable_hermes`] of `current_exe`); it is `Type=notify` only
/// for the native engine, which always says when it is ready (a profile that changes engine
/// later needs the unit written again).
///
/// # Errors
/// [`Error::NoUnitDir`], [`Error::UnitFile`] (its directory), [`Error::Home`] (the file).
pub fn install(
    home: &Home,
    current_exe: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<UnitChange, Error> {
    if in_container() {
        return Ok(UnitChange::InContainer);
    }
    let profile = home.profile().name();
    let unit = unit_path(profile, var)?;
    let hermes = alias::stable_hermes(current_exe, var("PATH").as_deref());
    let notify = crate::agent::engine_label(home.dir(), var) == "native";
    // The stop budget the supervisor would give this gateway.
    let read = hermes_settings::VolumeFiles::read(home.root(), &hermes_settings::process_env())
        .profiles()
        .iter()
        .find(|r| r.name == profile)
        .and_then(crate::gateway::stop_budget_of);
    let grace = read.map_or(crate::gateway::GATEWAY_STOP_GRACE, |b| b.grace);
    let contents = crate::systemd_user_unit(profile, home.root(), &hermes.path, notify, grace);
    let failed = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::UnitFile {
            action,
            path,
            source,
        }
    };
    if let Some(dir) = unit.parent() {
        std::fs::create_dir_all(dir).map_err(failed("create", dir))?;
    }
    hermes_home::atomic::write_atomic(&unit, contents.as_bytes(), 0o644)?;
    // The native engine serves a socket it is passed: systemd holds its port across restarts.
    let socket_path = unit.with_file_name(socket_unit_name(profile));
    let address = notify
        .then(|| crate::held_socket::native_address(profile, home.dir()))
        .flatten();
    let socket = match address {
        Some(address) => {
            let text = crate::systemd_socket_unit(profile, &address);
            hermes_home::atomic::write_atomic(&socket_path, text.as_bytes(), 0o644)?;
            Some((socket_path, socket_unit_name(profile)))
        }
        None => {
            // One written before (another engine then, or the API server on) would hand the
            // gateway a socket it no longer serves.
            remove_if_present(&socket_path)?;
            None
        }
    };
    Ok(UnitChange::Written {
        unit,
        unit_name: unit_name(profile),
        exe: hermes.path,
        build_only: hermes.build_only,
        socket,
    })
}

/// Removes `home`'s gateway unit. An enabled unit is kept ([`Error::UnitEnabled`]): after
/// the file is gone `systemctl disable` no longer finds it.
///
/// # Errors
/// [`Error::NoUnitDir`], [`Error::UnitEnabled`], [`Error::UnitFile`].
pub fn uninstall(home: &Home, var: &dyn Fn(&str) -> Option<String>) -> Result<UnitChange, Error> {
    if in_container() {
        return Ok(UnitChange::InContainer);
    }
    let profile = home.profile().name();
    let unit = unit_path(profile, var)?;
    let unit_name = unit_name(profile);
    if !unit.exists() {
        return Ok(UnitChange::Absent { unit });
    }
    let socket_name = socket_unit_name(profile);
    let socket_path = unit.with_file_name(&socket_name);
    if let Some(dir) = unit.parent() {
        for name in [&unit_name, &socket_name] {
            if let Some(wants) = enabled_by(dir, name) {
                return Err(Error::UnitEnabled {
                    unit_name: name.clone(),
                    wants,
                });
            }
        }
    }
    let socket = remove_if_present(&socket_path)?.then_some(socket_path);
    remove_if_present(&unit)?;
    Ok(UnitChange::Removed {
        unit,
        unit_name,
        socket,
    })
}

/// Removes `path` if it is there; whether it was.
fn remove_if_present(path: &Path) -> Result<bool, Error> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(Error::UnitFile {
            action: "remove",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The link that enables `unit_name` in the user unit directory `dir` (what `systemctl
/// --user enable` writes: `<target>.wants/<unit>` or `.requires/`), if there is one.
fn enabled_by(dir: &Path, unit_name: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".wants") || name.ends_with(".requires")
        })
        .map(|entry| entry.path().join(unit_name))
        .find(|link| link.symlink_metadata().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_lives_under_xdg_config_home_else_home() {
        let xdg = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/x".to_string()),
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        assert_eq!(
            unit_path("work", &xdg).unwrap(),
            Path::new("/x/systemd/user/hermes-gateway-work.service")
        );
        let home = |k: &str| (k == "HOME").then(|| "/h".to_string());
        assert_eq!(
            unit_path("work", &home).unwrap(),
            Path::new("/h/.config/systemd/user/hermes-gateway-work.service")
        );
        assert!(matches!(
            unit_path("work", &|_| None),
            Err(Error::NoUnitDir)
        ));
    }
}
