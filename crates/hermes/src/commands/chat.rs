//! `hermes chat -q TEXT [--session ID]`: one question to the profile's model, answered with
//! the profile's gateway settings (`hermes_gateway::chat_once`) and stored as a conversation
//! that `--session` continues.

use std::io::{IsTerminal, Write};
use std::path::Path;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// `hermes chat -q TEXT`.
pub fn run(ctx: &Context, query: &str, session: Option<&str>) -> CommandResult {
    // Checked before anything is read or sent: an empty message is a mistake (an unset shell
    // variable in `-q "$Q"`), not a question for the model.
    if query.trim().is_empty() {
        return Err(Failure::new(
            "the message is empty: nothing was sent",
            Some("write the question after `-q`, e.g. `hermes chat -q \"hello\"`".into()),
        ));
    }
    let home = ctx.home()?;
    let profile = super::gateway::settings::resolve(&home)?;
    if let Some(id) = session {
        existing_session(&profile.settings.state_db, id)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let streaming = std::io::stdout().is_terminal();
    // Every conversation is stored, so it can be continued with `--session`.
    let session = session.map_or_else(new_session_id, str::to_string);
    let answer = runtime.block_on(hermes_gateway::chat_once(
        &profile,
        query,
        Some(&session),
        |delta| {
            if streaming {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(delta.as_bytes());
                let _ = out.flush();
            }
        },
    ))?;
    if streaming {
        output::stdout("\n")?;
    } else {
        output::stdout(&format!("{}\n", answer.text))?;
    }
    output::stderr(&format!(
        "session: {session} (continue with `--session {session}`)\n"
    ));
    let _ = answer;
    Ok(ExitStatus::Success)
}

/// `--session ID` continues a conversation, so `ID` must name a stored one: a mistyped id
/// would otherwise start a new conversation without its history, unnoticed. As the
/// original's `--resume`, which says "Session not found"; a new conversation is `chat`
/// without `--session` (its id is printed afterwards).
fn existing_session(state_db: &Path, id: &str) -> Result<(), Failure> {
    use hermes_sessions::browse::{MAX_LIMIT, Reader};
    hermes_sessions::validate_session_id(id)?;
    let reader = Reader::open(state_db)?;
    let known = match &reader {
        Some(reader) if reader.session(id)?.is_some() => return Ok(()),
        Some(reader) => reader.list(MAX_LIMIT, None)?,
        None => Vec::new(),
    };
    let close = close_matches(id, known.iter().map(|s| s.id.as_str()));
    let hint = match close.as_slice() {
        [] => "list conversations on the dashboard's Sessions page, or leave `--session` out to \
               start a new one"
            .to_string(),
        [one] => format!("did you mean `--session {one}`?"),
        many => format!(
            "did you mean one of: {}?",
            many.iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(Failure::new(
        format!("no conversation `{id}` in `{}`", state_db.display()),
        Some(hint),
    ))
}

/// The ids in `known` that `typed` may have meant: one is a prefix of the other, or they are
/// at most two edits apart. At most five, the closest first.
fn close_matches<'a>(typed: &str, known: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    use hermes_errors::suggest::{self, Within};
    let mut close = suggest::close_matches(typed, known, Within::EditsOrPrefix(2));
    close.truncate(5);
    close
}

/// `chat-` and 16 random hex digits.
fn new_session_id() -> String {
    let hex = hermes_home::random::random_hex(8).unwrap_or_else(|_| {
        // No /dev/urandom: time and pid are unique enough for a conversation id.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "{:016x}",
            (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
        )
    });
    format!("chat-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_matches_are_prefixes_or_near_misses_closest_first() {
        let known = [
            "chat-0123456789abcdef",
            "chat-0123456789abcdeg",
            "chat-ffff",
            "other",
        ];
        assert_eq!(
            close_matches("chat-0123456789abcdfe", known.into_iter()),
            ["chat-0123456789abcdef", "chat-0123456789abcdeg"]
        );
        assert_eq!(close_matches("chat-ff", known.into_iter()), ["chat-ffff"]);
        assert!(close_matches("nothing-alike", known.into_iter()).is_empty());
        let many: Vec<String> = (0..9).map(|i| format!("chat-{i}")).collect();
        assert_eq!(
            close_matches("chat-", many.iter().map(String::as_str)).len(),
            5
        );
    }
}
