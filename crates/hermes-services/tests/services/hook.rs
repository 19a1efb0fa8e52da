//! The socket hook in a bare venv of the system's `python3` (no agent, no network): the image
//! script installs exactly what the binary checks; without `LISTEN_FDS`, or with another
//! process's, the module is not even imported or does nothing; an inherited socket named `api`
//! is kept from children and from the environment they see; anything else is left alone with
//! one line on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

use hermes_services::agent::Agent;
use hermes_services::agent_hook::{self, MODULE, MODULE_FILE, PTH, PTH_FILE};

use std::net::TcpListener;

use crate::support::{listener, service, socket_inode};

/// A venv of the system's `python3` without pip, with the agent's dist-info and a console
/// script so that it is an [`Agent`]; `None` (after a skip) without `python3`.
fn bare_agent(dir: &Path) -> Option<Agent> {
    let Some(python3) = hermes_test_support::find_on_path("python3") else {
        hermes_test_support::skip("`python3` is not on PATH: the hook's tests need a Python");
        return None;
    };
    let venv = dir.join("venv");
    let out = Command::new(python3)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let site = python(
        &venv.join("bin/python"),
        "import sysconfig; print(sysconfig.get_path('purelib'))",
        &[],
        None,
    );
    std::fs::create_dir_all(Path::new(site.stdout.trim()).join("hermes_agent-0.20.1.dist-info"))
        .unwrap();
    std::fs::write(venv.join("bin/hermes"), "#!/bin/sh\n").unwrap();
    Agent::at(&venv.join("bin/hermes"))
}

struct Ran {
    stdout: String,
    stderr: String,
}

/// `python -c code` with only `env` ([`service_env`]), the way a gateway would start, and
/// `listener` passed to it when given.
fn python(
    python: &Path,
    code: &str,
    env: &[(&str, &str)],
    listener: Option<(&TcpListener, &str)>,
) -> Ran {
    let argv = [
        python.to_string_lossy().into_owned(),
        "-c".into(),
        code.into(),
    ];
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let out = service(&argv, &env, listener).output().unwrap();
    let ran = Ran {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(out.status.success(), "{}{}", ran.stdout, ran.stderr);
    ran
}

fn site(agent: &Agent) -> PathBuf {
    agent_hook::site_packages(agent).unwrap()
}

#[test]
fn the_image_script_installs_what_the_binary_checks() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = bare_agent(dir.path()) else {
        return;
    };
    assert!(!agent_hook::is_installed(&agent));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docker/agent-site.sh");
    let out = Command::new("sh")
        .arg(script)
        .arg(agent.cli.parent().unwrap().parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        agent_hook::is_installed(&agent),
        "docker/agent-site.sh writes the binary's text"
    );
    assert_eq!(
        std::fs::read_to_string(site(&agent).join(MODULE_FILE)).unwrap(),
        MODULE
    );
    assert_eq!(
        std::fs::read_to_string(site(&agent).join(PTH_FILE)).unwrap(),
        PTH
    );
}

#[test]
fn without_its_variables_the_hook_is_not_even_imported() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = bare_agent(dir.path()) else {
        return;
    };
    agent_hook::install(&site(&agent)).unwrap();
    let check = "import os, sys\n\
                 m = sys.modules.get('hermes_listen')\n\
                 print(m is not None, m is not None and m.SHARED is not None, os.environ.get('LISTEN_FDS'))";
    let plain = python(&agent.python, check, &[], None);
    assert_eq!(plain.stdout.trim(), "False False None", "{}", plain.stderr);
    assert_eq!(plain.stderr, "");

    // Variables meant for another process (a child that inherited them) are not ours: the
    // module looks, then leaves them and every fd alone.
    let other = python(
        &agent.python,
        check,
        &[
            ("LISTEN_FDS", "1"),
            ("LISTEN_PID", "1"),
            ("LISTEN_FDNAMES", "api"),
        ],
        None,
    );
    assert_eq!(other.stdout.trim(), "True False 1", "{}", other.stderr);
    assert_eq!(other.stderr, "");
}

#[test]
fn an_inherited_api_socket_is_kept_from_children_and_their_environment() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = bare_agent(dir.path()) else {
        return;
    };
    agent_hook::install(&site(&agent)).unwrap();
    let listener = listener();
    let inode = socket_inode(&listener);
    // The process reports what it adopted, then starts a child that may inherit every fd it
    // can (`close_fds=False`) and says what its fd 3 is.
    let script = "import os, subprocess, sys, hermes_listen\n\
        child = subprocess.run([sys.executable, '-c', \
          'import os; print(os.readlink(\"/proc/self/fd/3\") if os.path.exists(\"/proc/self/fd/3\") else \"none\")'], \
          close_fds=False, capture_output=True, text=True).stdout.strip()\n\
        print(hermes_listen.SHARED.address, os.get_inheritable(3), \
          sorted(k for k in os.environ if k.startswith('LISTEN_')), child)";
    let out = python(&agent.python, script, &[], Some((&listener, "api")));
    let port = listener.local_addr().unwrap().port();
    let child_fd3 = out.stdout.trim().rsplit(' ').next().unwrap().to_owned();
    assert_eq!(
        out.stdout.trim(),
        format!("127.0.0.1:{port} False [] {child_fd3}"),
        "{}",
        out.stderr
    );
    assert_ne!(
        child_fd3,
        format!("socket:[{inode}]"),
        "the child has no copy of the socket"
    );
    // Serving it is the API server's start (the agents' tests); nothing is said before that.
    assert_eq!(out.stderr, "");
}

#[test]
fn a_socket_not_named_api_or_not_listening_is_left_alone_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = bare_agent(dir.path()) else {
        return;
    };
    agent_hook::install(&site(&agent)).unwrap();
    let script = "import os, hermes_listen\nprint(hermes_listen.SHARED, os.get_inheritable(3))";
    let listener = listener();
    let out = python(&agent.python, script, &[], Some((&listener, "metrics")));
    assert_eq!(
        out.stdout.trim(),
        "None False",
        "still kept from children: {}",
        out.stderr
    );
    assert_eq!(
        out.stderr.trim(),
        "hermes: no socket named api among metrics; the API server binds its own port"
    );

    // A TCP socket that does not listen (bound, never listen()ed) is no listener.
    let socket = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Inet,
        nix::sys::socket::SockType::Stream,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    let not_listening = std::net::TcpListener::from(socket);
    let out = python(&agent.python, script, &[], Some((&not_listening, "api")));
    assert_eq!(out.stdout.trim(), "None False", "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        "hermes: fd 3 named api is not a listening TCP socket; the API server binds its own port"
    );
}
