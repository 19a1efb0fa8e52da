//! Input the user got wrong is refused before anything is sent or created: an empty chat
//! message, a `--session` that names no conversation (with the close matches), a `-p` that
//! names no profile — whatever the command.

use std::fs;
use std::io::ErrorKind;
use std::net::TcpListener;

use crate::util::{TestContext, render};

/// A seeded home whose model is served at a loopback port nobody answers on: the listener
/// tells whether `hermes chat` tried to send anything (a connection waits in its backlog).
fn with_silent_provider(t: &TestContext) -> TcpListener {
    t.ok(&["profile", "list"]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:{port}/v1\n  timeout: 1\nagent:\n  api_max_retries: 0\n"
        ),
    )
    .unwrap();
    listener
}

fn contacted(listener: &TcpListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

#[test]
fn an_empty_chat_message_is_refused_and_nothing_is_sent() {
    let t = TestContext::new();
    let provider = with_silent_provider(&t);
    for empty in ["", "  \n\t "] {
        let out = t.run(&["chat", "-q", empty]);
        let text = render(&out);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            text.contains("error: the message is empty: nothing was sent")
                && text.contains("hint: write the question after `-q`"),
            "{text}"
        );
        assert!(!contacted(&provider), "no request for {empty:?}");
    }
}

#[test]
fn a_mistyped_session_is_refused_with_its_close_matches() {
    let t = TestContext::new();
    let provider = with_silent_provider(&t);
    let store = hermes_sessions::SessionStore::open(&t.root().join("state.db")).unwrap();
    let hello = serde_json::json!({"role": "user", "content": "hello"});
    for id in ["chat-0123456789abcdef", "chat-fedcba9876543210"] {
        store
            .append(id, "default", std::slice::from_ref(&hello))
            .unwrap();
    }
    drop(store);

    let out = t.run(&["chat", "-q", "hi", "--session", "chat-0123456789abcdff"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: no conversation `chat-0123456789abcdff`")
            && text.contains("hint: did you mean `--session chat-0123456789abcdef`?"),
        "{text}"
    );
    assert!(
        !contacted(&provider),
        "nothing is sent for an unknown session"
    );

    // Nothing close: the hint says how to start a new conversation instead.
    let out = t.run(&["chat", "-q", "hi", "--session", "work-notes"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("leave `--session` out to start a new one"),
        "{text}"
    );

    // The right id goes on to the provider (which never answers: a timeout, after sending).
    let out = t.run(&["chat", "-q", "hi", "--session", "chat-0123456789abcdef"]);
    let text = render(&out);
    assert!(!text.contains("no conversation"), "{text}");
    assert!(
        contacted(&provider),
        "the known session is continued: {text}"
    );
}

#[test]
fn a_profile_flag_naming_no_profile_is_an_error_for_every_command() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    for args in [
        &["-p", "nope", "gateway", "status"][..],
        &["-p", "nope", "gateway", "list"],
        &["dump", "-p", "nope"],
        &["chat", "-p", "nope", "-q", "hi"],
        &["-p", "nope", "service", "status"],
        &["-p", "nope", "profile", "list"],
        &["-p", "nope", "version"],
        &["-p", "nope", "health"],
    ] {
        let out = t.run(args);
        let text = render(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
        assert!(
            text.contains("error: profile `nope` does not exist") && text.contains("\nhint: "),
            "{args:?}: {text}"
        );
        assert!(
            !t.root().join("profiles/nope").exists(),
            "{args:?} created the profile"
        );
    }
    // An existing one is accepted where it does not matter.
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.ok(&["-p", "work", "profile", "list"]);
    t.ok(&["-p", "default", "gateway", "list"]);
}

/// `model.api_key: ${VAR}` with `VAR` unset used to go out as `Bearer ${VAR}`: now the chat
/// is refused with the reason, and nothing is sent.
#[test]
fn a_key_naming_an_unset_variable_is_never_sent() {
    let t = TestContext::new();
    let provider = with_silent_provider(&t);
    let config = t.root().join("config.yaml");
    let text = fs::read_to_string(&config).unwrap();
    fs::write(
        &config,
        text.replace("  timeout: 1\n", "  timeout: 1\n  api_key: ${UNSET_VAR}\n"),
    )
    .unwrap();
    let out = t.run(&["chat", "-q", "hi"]);
    let text = render(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("error: invalid `model.api_key` value `${UNSET_VAR}`")
            && text.contains("set `UNSET_VAR` in the profile's `.env`")
            && text.contains("\nhint: "),
        "{text}"
    );
    assert!(!contacted(&provider), "nothing is sent");
}
