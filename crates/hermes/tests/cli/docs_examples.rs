//! The docs match the behaviour (issue 16, item 14): the shell examples of README.md and
//! docs/*.md run as written against the built `hermes`.
//!
//! The convention, for whoever writes the docs (the test enforces it, nothing is skipped
//! silently):
//!
//! * Every fenced block names what it holds (` ```sh `, ` ```console `, ` ```text `,
//!   ` ```yaml `, ...). A bare ` ``` ` fails the test, so a shell example cannot hide untagged.
//! * ` ```sh ` is a script: the whole block runs with `sh -e`, so every command in it must
//!   succeed.
//! * ` ```console ` is a transcript: each `$ CMD` line runs with `sh -c`; the lines after it, up
//!   to the next `$ `, are what it prints. Each of them must appear in its stdout or stderr, in
//!   that order (`…` inside a line stands for any text; a line that is only `...` or `…` for
//!   any lines). It must exit 0, or `N` when its output ends with the line `[exit N]`.
//! * ` ```sh no-run: REASON ` and ` ```console no-run: REASON ` are not run, for the reason
//!   given (Docker, the network, a server that stays in the foreground, a file's content, not a
//!   command). A `no-run` without a reason fails the test; each skipped block is listed on
//!   stderr with its reason.
//! * Any other language (`text`, `yaml`, `json`, ...) is not a shell example.
//!
//! Where they run: each block on a fresh home (an example must not depend on what another
//! left behind: `hash-password >> .env` would change what the next one prints). `HOME` is `/home/me` and `HERMES_HOME` `/home/me/.hermes`, both
//! under the test's temporary directory, whose path is removed from the output before it is
//! compared (so a doc can show `/home/me/.hermes/config.yaml`); the working directory is
//! `HOME`, `PATH` has the built `hermes` first, hermes-agent is not installed (the slim image),
//! there is no colour, no dashboard under `hermes up`, and standard input holds one line (a
//! password, for the examples that ask for one).
//!
//! Also here: `hermes up` saying that the default profile has no model (the quick start's
//! first surprise otherwise: every chat answered 503).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::util::TestContext;

/// Where a doc writer who fails this test reads what to do.
const CONVENTION: &str = "the header of crates/hermes/tests/cli/docs_examples.rs";

/// What the examples that ask for a password read on standard input.
const STDIN: &str = "docs-example-password\n";

/// The longest an example may run.
const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A fenced block of a document.
#[derive(Debug)]
struct Block {
    /// `README.md:15`, for messages.
    place: String,
    /// The info string after the fence (`sh`, `console no-run: needs Docker`).
    info: String,
    lines: Vec<String>,
}

/// How a block is treated, from its info string.
#[derive(Debug, PartialEq)]
enum Kind {
    Script,
    Transcript,
    NoRun(String),
    NotShell,
}

impl Block {
    fn kind(&self) -> Result<Kind, String> {
        let (language, rest) = self
            .info
            .split_once(char::is_whitespace)
            .unwrap_or((&self.info, ""));
        let rest = rest.trim();
        let kind = match language {
            "" => return Err(format!("{}: a fenced block without a language", self.place)),
            "sh" | "console" if rest.starts_with("no-run") => {
                match rest.strip_prefix("no-run:").map(str::trim) {
                    Some(reason) if !reason.is_empty() => Kind::NoRun(reason.to_string()),
                    _ => {
                        return Err(format!(
                            "{}: `no-run` without a reason (`{language} no-run: REASON`)",
                            self.place
                        ));
                    }
                }
            }
            "sh" if rest.is_empty() => Kind::Script,
            "console" if rest.is_empty() => Kind::Transcript,
            "sh" | "console" => {
                return Err(format!(
                    "{}: unknown words after `{language}`: `{rest}`",
                    self.place
                ));
            }
            _ => Kind::NotShell,
        };
        Ok(kind)
    }
}

/// README.md and docs/*.md, in a fixed order.
fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// The fenced blocks of `text` (fences may be indented, as inside a list item; the block's
/// lines lose the fence's indentation).
fn blocks(name: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(Block, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence = trimmed.strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                let block = Block {
                    place: format!("{name}:{}", index + 1),
                    info: info.trim().to_string(),
                    lines: Vec::new(),
                };
                open = Some((block, line.len() - trimmed.len()));
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                out.extend(open.take().map(|(block, _)| block));
            }
            (Some((block, indent)), _) => {
                let cut = (line.len() - trimmed.len()).min(*indent);
                block.lines.push(line[cut..].to_string());
            }
            (None, None) => {}
        }
    }
    out
}

/// The temporary machine an example runs on: `/home/me` under a temp dir.
struct Machine {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Machine {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hermes"), bin.join("hermes")).unwrap();
        let machine = Machine { dir, bin };
        std::fs::create_dir_all(machine.home()).unwrap();
        machine
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home/me")
    }

    /// `sh` with `args`, in this machine's environment, standard input holding [`STDIN`];
    /// an example still running after [`LIMIT`] (a server in the foreground that should have
    /// been `no-run`) is killed with its process group and reported by its exit status.
    fn sh(&self, args: &[&str]) -> Output {
        use std::io::{Read, Write};
        use std::os::unix::process::CommandExt;
        let home = self.home();
        let mut child = Command::new("/bin/sh")
            .args(args)
            .env_clear()
            .env("HOME", &home)
            .env("HERMES_HOME", home.join(".hermes"))
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("NO_COLOR", "1")
            .env("HERMES_AGENT_CLI", "")
            .env("HERMES_DASHBOARD", "0")
            .current_dir(&home)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A program that never reads its input is no failure.
        let _ = child.stdin.take().unwrap().write_all(STDIN.as_bytes());
        let read = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                bytes
            })
        };
        let stdout = read(Box::new(child.stdout.take().unwrap()));
        let stderr = read(Box::new(child.stderr.take().unwrap()));
        let deadline = std::time::Instant::now() + LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
                let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
                break child.wait().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    }

    /// Stdout and stderr, with the temp dir's path removed (`/home/me/...` as the docs show).
    fn printed(&self, out: &Output) -> String {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        text.replace(&*self.dir.path().to_string_lossy(), "")
    }
}

/// Runs a ` ```sh ` block; the problem, if any.
fn run_script(machine: &Machine, block: &Block) -> Option<String> {
    let script = block.lines.join("\n");
    let out = machine.sh(&["-e", "-c", &script]);
    (!out.status.success()).then(|| {
        format!(
            "{}: the script exited {:?}:\n{script}\n--- it printed ---\n{}",
            block.place,
            out.status.code(),
            machine.printed(&out)
        )
    })
}

/// One command of a transcript: the command, what it must print, its exit code.
struct Step {
    command: String,
    expected: Vec<String>,
    exit: i32,
}

/// The `$ ` commands of a ` ```console ` block with their output and exit codes.
fn steps(block: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for line in &block.lines {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_string(),
                expected: Vec::new(),
                exit: 0,
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(line.trim_end().to_string());
        } else if !line.trim().is_empty() {
            return Err(format!(
                "{}: output before the first `$ ` command",
                block.place
            ));
        }
    }
    for step in &mut steps {
        while step.expected.last().is_some_and(|l| l.is_empty()) {
            step.expected.pop();
        }
        let code = step
            .expected
            .last()
            .and_then(|l| l.strip_prefix("[exit ")?.strip_suffix(']')?.parse().ok());
        if let Some(code) = code {
            step.exit = code;
            step.expected.pop();
        }
    }
    Ok(steps)
}

/// Whether `expected` (lines, `…` for any text, `...` alone for any lines) appears in
/// `printed` in order; the first line not found.
fn missing_line(printed: &str, expected: &[String]) -> Option<String> {
    let mut lines = printed.lines();
    for want in expected {
        let want = want.trim();
        if want.is_empty() || want == "..." || want == "…" {
            continue;
        }
        if !lines.any(|line| matches_line(line, want)) {
            return Some(want.to_string());
        }
    }
    None
}

/// `want`'s pieces between `…` appear in `line` in order.
fn matches_line(line: &str, want: &str) -> bool {
    let mut rest = line;
    for piece in want.split('…').filter(|p| !p.is_empty()) {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Runs a ` ```console ` block; the problems found.
fn run_transcript(machine: &Machine, block: &Block) -> Vec<String> {
    let steps = match steps(block) {
        Ok(steps) if steps.is_empty() => {
            return vec![format!("{}: a console block without `$ `", block.place)];
        }
        Ok(steps) => steps,
        Err(problem) => return vec![problem],
    };
    let mut problems = Vec::new();
    for step in steps {
        let out = machine.sh(&["-c", &step.command]);
        let printed = machine.printed(&out);
        if out.status.code() != Some(step.exit) {
            problems.push(format!(
                "{}: `{}` exited {:?}, the docs say {}:\n{printed}",
                block.place,
                step.command,
                out.status.code(),
                step.exit
            ));
        }
        if let Some(line) = missing_line(&printed, &step.expected) {
            problems.push(format!(
                "{}: `{}` did not print (in this order) `{line}`; it printed:\n{printed}",
                block.place, step.command
            ));
        }
    }
    problems
}

/// The convention itself: every block names its language, every `no-run` its reason.
#[test]
fn every_fenced_block_says_what_it_holds() {
    let mut problems = Vec::new();
    for doc in documents() {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&doc).unwrap();
        for block in blocks(&name, &text) {
            if let Err(problem) = block.kind() {
                problems.push(problem);
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n(the convention: {CONVENTION})",
        problems.join("\n")
    );
}

/// Every runnable shell example of README.md and docs/*.md runs as written.
#[test]
fn shell_examples_run_as_written() {
    let mut problems = Vec::new();
    let mut ran = 0;
    for doc in documents() {
        let name = doc.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&doc).unwrap();
        for block in blocks(&name, &text) {
            let machine = Machine::new();
            match block.kind() {
                Ok(Kind::Script) => problems.extend(run_script(&machine, &block)),
                Ok(Kind::Transcript) => problems.extend(run_transcript(&machine, &block)),
                Ok(Kind::NoRun(reason)) => {
                    eprintln!("not run: {} ({reason})", block.place);
                    continue;
                }
                // Reported by `every_fenced_block_says_what_it_holds`.
                Ok(Kind::NotShell) | Err(_) => continue,
            }
            ran += 1;
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n(the convention: {CONVENTION})",
        problems.join("\n\n")
    );
    // The docs have runnable examples; none found means the parsing broke, not that all pass.
    assert!(ran >= 5, "only {ran} examples ran");
}

/// The runner itself: a transcript's wrong output, wrong exit code and a script's failing
/// command are each reported (so a green run means the examples really passed).
#[test]
fn the_runner_reports_what_differs() {
    let machine = Machine::new();
    let transcript = |body: &str| Block {
        place: "test.md:1".into(),
        info: "console".into(),
        lines: body.lines().map(str::to_string).collect(),
    };
    assert!(
        run_transcript(
            &machine,
            &transcript("$ hermes completions bash\n_hermes()")
        )
        .is_empty()
    );
    assert!(run_transcript(&machine, &transcript("$ echo a…b c\na…c\n[exit 0]")).is_empty());
    let wrong_output = run_transcript(&machine, &transcript("$ echo one\ntwo"));
    assert!(
        wrong_output[0].contains("did not print"),
        "{wrong_output:?}"
    );
    let out_of_order = run_transcript(&machine, &transcript("$ printf 'b\\na\\n'\na\nb"));
    assert_eq!(out_of_order.len(), 1, "{out_of_order:?}");
    let wrong_exit = run_transcript(&machine, &transcript("$ hermes nosuchcommand\n[exit 0]"));
    assert!(wrong_exit[0].contains("exited Some(2)"), "{wrong_exit:?}");
    let script = Block {
        place: "test.md:1".into(),
        info: "sh".into(),
        lines: vec!["false".into(), "true".into()],
    };
    assert!(
        run_script(&machine, &script).is_some(),
        "sh -e stops at `false`"
    );
    let untagged = Block {
        place: "test.md:1".into(),
        info: String::new(),
        lines: Vec::new(),
    };
    assert!(untagged.kind().is_err());
    let no_reason = Block {
        info: "sh no-run".into(),
        ..untagged
    };
    assert!(no_reason.kind().is_err());
}

/// A fresh `hermes up` says that the default profile has no model and how to set one (chat
/// would answer 503 without a word on the terminal), and says nothing of it once one is set.
#[test]
fn hermes_up_says_when_the_default_profile_has_no_model() {
    let notice = "hermes up: the default profile has no model";
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    t.free_ports(&[]);
    let stderr = up_stderr(&t);
    let line = stderr
        .lines()
        .find(|line| line.starts_with(notice))
        .unwrap_or_else(|| panic!("no notice: {stderr}"));
    assert!(
        line.contains("`hermes config set model.default MODEL`"),
        "{line}"
    );
    t.ok(&["config", "set", "model.default", "openai/gpt-4o-mini"]);
    let stderr = up_stderr(&t);
    assert!(!stderr.contains(notice), "{stderr}");
    assert!(stderr.contains("hermes up: supervising"), "{stderr}");
}

/// Starts `hermes up`, stops it, and returns what it printed on stderr.
fn up_stderr(t: &TestContext) -> String {
    use std::io::Read;
    let mut up = t.start_up();
    assert_eq!(up.stop(), Some(0));
    let mut stderr = String::new();
    up.0.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    stderr
}
