//! The original, as its own image runs it (`hermes-runtime.md` §4.2): real `s6-supervise` on a
//! gateway slot with the original's `run` (`hermes gateway run --replace`, marked as a
//! supervised child) and its newest `finish` (a clean exit or EX_CONFIG parks the slot;
//! anything else is restarted at once — s6's one-second pause, no backoff). The events, as that
//! image does them: a restart is `s6-svc -t` (its `gateway restart`); a container stop is
//! s6-overlay's stage 3 (SIGTERM, then SIGKILL after `S6_KILL_GRACETIME`, 3 s); a killed
//! container SIGKILLs the supervisor and the gateway's session at once; a backup is its own
//! `hermes backup`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_test_support::{OriginalAgent, poll};

use super::{Deployment, kill};
use crate::util::TestContext;

/// s6-overlay's default `S6_KILL_GRACETIME`: how long a stopping container's processes have
/// between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);

pub(crate) struct OriginalUnderS6 {
    name: String,
    slot: PathBuf,
    supervise: Option<Child>,
    agent: OriginalAgent,
    env: Vec<(&'static str, String)>,
    backups: PathBuf,
    taken: usize,
    log: PathBuf,
}

impl OriginalUnderS6 {
    /// The slot written beside `t`'s volume, and `s6-supervise` started on it.
    pub(crate) fn start(
        t: &TestContext,
        agent: &OriginalAgent,
        overlay: &Path,
        version: &str,
    ) -> Self {
        let slot = t.dir.path().join("service/gateway-default");
        std::fs::create_dir_all(&slot).unwrap();
        std::fs::create_dir_all(t.home()).unwrap();
        let env = vec![
            ("HOME", t.home().to_string_lossy().into_owned()),
            ("HERMES_HOME", t.root().to_string_lossy().into_owned()),
            ("PYTHONPATH", overlay.to_string_lossy().into_owned()),
            ("HERMES_DISABLE_LAZY_INSTALLS", "1".to_owned()),
            ("PATH", "/usr/bin:/bin".to_owned()),
        ];
        let exports: String = env
            .iter()
            .map(|(k, v)| format!("export {k}='{v}'\n"))
            .collect();
        let log = t.dir.path().join("gateway.log");
        script(
            &slot.join("run"),
            &format!(
                "#!/bin/sh\nset -e\nexec >>'{}' 2>&1\n{exports}\
                 export HERMES_S6_SUPERVISED_CHILD=1\nexport HERMES_SUPERVISED_CHILD=1\n\
                 cd \"$HERMES_HOME\"\nexec '{}' gateway run --replace\n",
                log.display(),
                agent.hermes.display()
            ),
        );
        script(
            &slot.join("finish"),
            "#!/bin/sh\ncase \"$1\" in 0|78) exit 125 ;; esac\nexit 0\n",
        );
        let mut original = OriginalUnderS6 {
            name: format!("original-s6-{version}"),
            slot,
            supervise: None,
            agent: agent.clone(),
            env,
            backups: t.root().join("backups"),
            taken: 0,
            log,
        };
        original.supervise();
        original
    }

    fn supervise(&mut self) {
        let child = Command::new("s6-supervise")
            .arg(&self.slot)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run s6-supervise");
        self.supervise = Some(child);
        poll::until_true("s6-supervise up", Duration::from_secs(10), || {
            self.svstat().is_some()
        });
    }

    /// `s6-svstat`: whether the service is up, and its pid.
    fn svstat(&self) -> Option<(bool, i32)> {
        let said = self.svstat_fields("up,pid")?;
        let mut words = said.split_whitespace();
        let up = words.next()? == "true";
        let pid = words.next()?.parse().ok()?;
        Some((up, pid))
    }

    /// `s6-svstat -o fields`, as it prints them.
    fn svstat_fields(&self, fields: &str) -> Option<String> {
        let out = Command::new("s6-svstat")
            .args(["-o", fields])
            .arg(&self.slot)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn svc(&self, flag: &str) {
        let _ = Command::new("s6-svc").arg(flag).arg(&self.slot).status();
    }

    /// The gateway's whole session (s6-supervise makes each run a session leader) and the
    /// supervisor, SIGKILLed; returns when the gateway is gone.
    fn kill_all(&mut self) {
        let gateway = self.svstat().map(|(_, pid)| pid).filter(|p| *p > 0);
        if let Some(mut supervise) = self.supervise.take() {
            let _ = supervise.kill();
            let _ = supervise.wait();
        }
        if let Some(pid) = gateway {
            kill(-pid);
            kill(pid);
            poll::until_true("the gateway gone", Duration::from_secs(30), || {
                !crate::background::alive(pid)
            });
        }
    }

    /// s6-overlay's stage 3: SIGTERM, `KILL_GRACE`, then SIGKILL of whatever is left.
    fn container_stop(&mut self) {
        self.svc("-d");
        let stopped = poll::within(KILL_GRACE, || self.svstat().is_some_and(|(up, _)| !up));
        if !stopped {
            self.kill_all();
        } else if let Some(mut supervise) = self.supervise.take() {
            let _ = supervise.kill();
            let _ = supervise.wait();
        }
    }
}

fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Deployment for OriginalUnderS6 {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn gateway_pid(&self) -> Option<i32> {
        self.svstat()
            .and_then(|(up, pid)| (up && pid > 0).then_some(pid))
    }

    fn gateway_state(&self) -> String {
        let said = Command::new("s6-svstat").arg(&self.slot).output();
        said.map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_else(|e| e.to_string())
    }

    fn kill_everything(&mut self, mid_restart: Option<Duration>) {
        if let Some(after) = mid_restart {
            self.svc("-t");
            std::thread::sleep(after);
        }
        self.kill_all();
        self.supervise();
    }

    fn restart(&mut self) {
        self.svc("-t");
    }

    fn stop_and_start(&mut self) {
        self.container_stop();
        self.supervise();
    }

    fn backup(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(&self.backups).map_err(|e| e.to_string())?;
        self.taken += 1;
        let archive = self.backups.join(format!("torture-{:05}.zip", self.taken));
        let out = Command::new(&self.agent.hermes)
            .arg("backup")
            .arg("-o")
            .arg(&archive)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        // Two archives kept, as ours keeps with `--keep 2`.
        if self.taken > 2 {
            let old = self
                .backups
                .join(format!("torture-{:05}.zip", self.taken - 2));
            let _ = std::fs::remove_file(old);
        }
        if out.status.success() {
            Ok(())
        } else {
            let _ = std::fs::remove_file(&archive);
            Err(String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout))
        }
    }

    fn revive(&mut self) {
        if self.supervise.is_none() {
            self.supervise();
        }
        self.svc("-u");
    }

    fn shut_down(&mut self) {
        self.container_stop();
    }

    fn given_up(&self) -> bool {
        // Parked by `finish` (exit 125): down, and no longer wanted up.
        self.svstat_fields("up,wantedup")
            .is_some_and(|said| said.split_whitespace().eq(["false", "false"]))
    }

    fn start_deadline(&self) -> Duration {
        Duration::from_secs(120)
    }
}

impl Drop for OriginalUnderS6 {
    fn drop(&mut self) {
        self.kill_all();
        // The gateway's output, kept where `HERMES_TORTURE_KEEP_LOG` says (the test's directory
        // goes with it).
        if let Some(keep) = std::env::var_os("HERMES_TORTURE_KEEP_LOG") {
            let _ = std::fs::copy(&self.log, keep);
        }
    }
}
