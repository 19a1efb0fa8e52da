//! Ours: `hermes up -d` supervising the default profile's gateway (the native engine, or the
//! original agent's gateway as our engine), stopped with `hermes down`, restarted with `hermes
//! gateway restart`, backed up with `hermes backup create --keep 2`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hermes_test_support::{OriginalAgent, poll};

use super::{Deployment, kill};
use crate::util::{Detached, TestContext};

/// What `hermes up` needs to run `agent`'s gateway: its console script, its API server's
/// `aiohttp` from `overlay`, and no lazy installs into the venv other tests share.
pub(crate) fn agent_env(agent: &OriginalAgent, overlay: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "HERMES_AGENT_CLI",
            agent.hermes.to_string_lossy().into_owned(),
        ),
        ("PYTHONPATH", overlay.to_string_lossy().into_owned()),
        ("HERMES_DISABLE_LAZY_INSTALLS", "1".to_owned()),
    ]
}

/// The socket hook the full image installs in the agent's venv (`docker/agent-site.sh`), so
/// PID 1 holds the agent's API port across its restarts as it does in the image. Inert in any
/// process the supervisor did not hand a socket to (the original's own runs share the venv).
pub(crate) fn install_listen_hook(agent: &OriginalAgent) {
    let agent = hermes_services::agent::Agent::at(&agent.hermes).expect("the agent's venv");
    let site = hermes_services::agent_hook::site_packages(&agent).expect("its site-packages");
    hermes_services::agent_hook::install(&site).expect("install the hook");
    assert!(hermes_services::agent_hook::is_installed(&agent));
}

pub(crate) struct Ours<'a> {
    t: &'a TestContext,
    name: String,
    env: Vec<(&'static str, String)>,
    up: Detached,
}

impl<'a> Ours<'a> {
    /// `hermes up -d` on `t`'s volume, with `env` for it and every command.
    pub(crate) fn start(t: &'a TestContext, name: &str, env: Vec<(&'static str, String)>) -> Self {
        let up = Self::up(t, &env);
        Ours {
            t,
            name: name.to_owned(),
            env,
            up,
        }
    }

    fn up(t: &TestContext, env: &[(&'static str, String)]) -> Detached {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        t.up_detached(&env).0
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = self.t.cmd(args);
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args).output().expect("run hermes")
    }
}

impl Deployment for Ours<'_> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn gateway_pid(&self) -> Option<i32> {
        let row = self.t.service("gateway-default");
        (row["state"] == "up")
            .then(|| row["pid"].as_i64())
            .flatten()
            .map(|p| p as i32)
    }

    fn gateway_state(&self) -> String {
        self.t.service("gateway-default").to_string()
    }

    fn kill_everything(&mut self, mid_restart: Option<Duration>) {
        if let Some(after) = mid_restart {
            let _ = self.run(&["gateway", "restart", "--no-wait"]);
            std::thread::sleep(after);
        }
        let out = self.run(&["service", "status", "--json"]);
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        kill(self.up.pid());
        for row in rows.as_array().into_iter().flatten() {
            if let Some(pid) = row["pid"].as_i64() {
                kill(pid as i32);
            }
        }
        self.up.stopped();
        // Until the kernel has let go of the supervisor's lock.
        poll::until_true("the supervisor gone", Duration::from_secs(30), || {
            !self.run(&["service", "status"]).status.success()
        });
        self.up = Self::up(self.t, &self.env);
    }

    fn restart(&mut self) {
        let _ = self.run(&["gateway", "restart"]);
    }

    fn stop_and_start(&mut self) {
        let _ = self.run(&["down"]);
        self.up.stopped();
        self.up = Self::up(self.t, &self.env);
    }

    fn backup(&mut self) -> Result<(), String> {
        let out = self.run(&["backup", "create", "--keep", "2"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn revive(&mut self) {
        let _ = self.run(&["gateway", "start"]);
    }

    fn shut_down(&mut self) {
        let _ = self.run(&["down"]);
        self.up.stopped();
    }

    fn given_up(&self) -> bool {
        // Ours never gives up on a gateway meant to run: a crash loop backs off and retries.
        false
    }

    fn start_deadline(&self) -> Duration {
        Duration::from_secs(if self.env.is_empty() { 60 } else { 120 })
    }
}
