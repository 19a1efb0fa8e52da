//! A tiny driver for the supervisor library, used by the integration tests and the benchmark
//! scripts until the `hermes` CLI wires it up.
//!
//! ```text
//! supervise run <runtime-dir> <log-dir> <config.yaml> [--main NAME] [--settle-ms N]
//!           [--backoff-ms N] [--rotate-bytes N] [--archives N] [--max-line N]
//!           [--client-deadline-ms N] [--allow-uid N]
//! supervise client <runtime-dir> '<json request line>'   # prints the response line
//! supervise status <runtime-dir>                          # prints the status table
//! supervise notify READY=1                                # sends to $NOTIFY_SOCKET
//! supervise serve [--ready-after-ms N] [--drain-ms N]     # a service on its held socket
//! ```
//!
//! `serve` is a service on the socket its supervisor holds (fd 3, systemd's protocol; exit 3
//! without one): each connection is answered `<pid> <LISTEN_FDNAMES>\n`; `READY=1` after the
//! delay; on SIGTERM it stops accepting, waits `--drain-ms`, and exits 0.

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hermes_supervisor::{
    Client, Desired, Hooks, Options, ServiceSpec, Supervisor, parse_config_yaml,
    render_status_table,
};

/// Prints operator intent changes, so tests can see the hook fire.
struct PrintHooks;
impl Hooks for PrintHooks {
    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        let _ = writeln!(
            std::io::stdout(),
            "[hook] {} desired={desired:?}",
            service.name
        );
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(msg) => {
            let _ = writeln!(std::io::stderr(), "error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    match args.first().map(String::as_str) {
        Some("run") if args.len() >= 4 => supervise(&args[1..]),
        Some("client") if args.len() == 3 => {
            let line: serde_json::Value =
                serde_json::from_str(&args[2]).map_err(|e| e.to_string())?;
            let req = serde_json::from_value(line).map_err(|e| e.to_string())?;
            let mut c = Client::connect(&PathBuf::from(&args[1]), Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            let resp = c.request(&req).map_err(|e| e.to_string())?;
            let text = serde_json::to_string(&resp).map_err(|e| e.to_string())?;
            let _ = writeln!(std::io::stdout(), "{text}");
            Ok(ExitCode::SUCCESS)
        }
        Some("status") if args.len() == 2 => {
            let mut c = Client::connect(&PathBuf::from(&args[1]), Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            let rows = c.status(None).map_err(|e| e.to_string())?;
            let _ = write!(std::io::stdout(), "{}", render_status_table(&rows));
            Ok(ExitCode::SUCCESS)
        }
        Some("notify") if args.len() == 2 => {
            let path = std::env::var("NOTIFY_SOCKET").map_err(|_| "NOTIFY_SOCKET is not set")?;
            let sock = UnixDatagram::unbound().map_err(|e| e.to_string())?;
            sock.send_to(args[1].as_bytes(), &path)
                .map_err(|e| format!("{path}: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Some("serve") => serve(&args[1..]),
        _ => Err("usage: supervise run|client|status|notify|serve ...".into()),
    }
}

fn supervise(args: &[String]) -> Result<ExitCode, String> {
    let mut opts = Options::new(&args[0], &args[1]);
    let text = std::fs::read_to_string(&args[2]).map_err(|e| format!("{}: {e}", args[2]))?;
    let doc: yaml_serde::Value = yaml_serde::from_str(&text).map_err(|e| e.to_string())?;
    let (specs, errors) = parse_config_yaml(&doc);
    for e in &errors {
        let _ = writeln!(std::io::stderr(), "error: {e}");
    }
    let mut rest = args[3..].iter();
    while let Some(flag) = rest.next() {
        let val = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = || val.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--main" => opts.main = Some(val.clone()),
            "--settle-ms" => opts.timing.settle = Duration::from_millis(num()?),
            "--backoff-ms" => opts.timing.backoff_first = Duration::from_millis(num()?),
            "--rotate-bytes" => opts.rotation.max_bytes = num()?,
            "--archives" => opts.rotation.archives = num()? as u32,
            "--max-line" => opts.max_line = num()? as usize,
            "--client-deadline-ms" => opts.client_deadline = Duration::from_millis(num()?),
            "--allow-uid" => opts.allowed_uids.push(num()? as u32),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let sup = Supervisor::new(opts, specs).map_err(|e| match e.hint() {
        Some(h) => format!("{e}\nhint: {h}"),
        None => e.to_string(),
    })?;
    let mut out = std::io::stdout();
    let outcome = sup
        .run(&mut PrintHooks, &mut out)
        .map_err(|e| e.to_string())?;
    Ok(ExitCode::from(outcome.exit_code().clamp(0, 255) as u8))
}

fn serve(args: &[String]) -> Result<ExitCode, String> {
    use std::io::Write as _;
    use std::os::fd::FromRawFd;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let mut ready_after = Duration::ZERO;
    let mut drain = Duration::ZERO;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let ms = rest
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("{flag} needs milliseconds"))?;
        match flag.as_str() {
            "--ready-after-ms" => ready_after = Duration::from_millis(ms),
            "--drain-ms" => drain = Duration::from_millis(ms),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("LISTEN_PID") != std::process::id().to_string() || var("LISTEN_FDS") != "1" {
        let _ = writeln!(
            std::io::stderr(),
            "no held socket: LISTEN_PID={} LISTEN_FDS={} (pid {})",
            var("LISTEN_PID"),
            var("LISTEN_FDS"),
            std::process::id()
        );
        return Ok(ExitCode::from(3));
    }
    let mut term = nix::sys::signal::SigSet::empty();
    term.add(nix::sys::signal::Signal::SIGTERM);
    term.thread_block().map_err(|e| e.to_string())?;
    #[allow(unsafe_code)]
    // SAFETY: fd 3 is the held socket the supervisor passed, owned by nobody else here.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(3) };
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let answer = format!("{} {}\n", std::process::id(), var("LISTEN_FDNAMES"));
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let acceptor = std::thread::spawn(move || {
        while !stopping.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.write_all(answer.as_bytes());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        // Only this process's copy is closed: the supervisor's stays open.
        drop(listener);
    });
    std::thread::sleep(ready_after);
    if let Ok(path) = std::env::var("NOTIFY_SOCKET") {
        let sock = UnixDatagram::unbound().map_err(|e| e.to_string())?;
        let _ = sock.send_to(b"READY=1", path);
    }
    term.wait().map_err(|e| e.to_string())?;
    stop.store(true, Ordering::SeqCst);
    let _ = acceptor.join();
    std::thread::sleep(drain);
    Ok(ExitCode::SUCCESS)
}
