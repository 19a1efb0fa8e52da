//! A stand-in for hermes-agent whose probe answers the config schema a test chooses: its
//! `bin/python` prints the runtime's probe answer, its `bin/hermes` exits 0. Point
//! `HERMES_AGENT_CLI` at the returned `hermes`. (`tests/init/agent_versions.rs` has a fuller
//! one that also migrates and serves.)

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Makes the stand-in under `dir/agent/bin` and returns its `hermes`.
///
/// # Panics
/// When the files cannot be written (a test's temporary directory).
#[allow(
    clippy::expect_used,
    reason = "test support: a set-up failure is the test's failure"
)]
pub fn with_schema(dir: &Path, schema: u64) -> PathBuf {
    let bin = dir.join("agent/bin");
    fs::create_dir_all(&bin).expect("create the stand-in agent's bin/");
    let python = format!(
        "#!/bin/sh\necho \"HERMES_ANSWER {{\\\"config_version\\\": {schema}, \\\"multiplex_default\\\": false}}\"\n"
    );
    for (name, text) in [
        ("python", python.as_str()),
        ("hermes", "#!/bin/sh\nexit 0\n"),
    ] {
        fs::write(bin.join(name), text).expect("write the stand-in agent");
        fs::set_permissions(bin.join(name), fs::Permissions::from_mode(0o755))
            .expect("make the stand-in agent executable");
    }
    bin.join("hermes")
}
