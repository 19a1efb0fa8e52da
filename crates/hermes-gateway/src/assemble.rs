//! How a request's messages are combined with the session history and the system prompt.
//!
//! Words:
//! * *history* — the session's stored messages, in insertion order ([`hermes_sessions`]).
//! * *new turn* — the request's non-system messages that are not already in the history.
//! * *upstream messages* — what the provider sees: the system prompt (`SOUL.md` first) with the
//!   client's own system messages, the history, then the new turn.

use serde_json::{Value, json};

/// The result of combining a request with the soul and the session history.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assembled {
    /// Messages to send upstream.
    pub(crate) upstream: Vec<Value>,
    /// Messages to append to the session once the answer is complete (the assistant's answer
    /// is added by the caller).
    pub(crate) new_turn: Vec<Value>,
}

fn is_system(m: &Value) -> bool {
    matches!(
        m.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

fn same_message(a: &Value, b: &Value) -> bool {
    a.get("role") == b.get("role") && a.get("content") == b.get("content")
}

/// Builds the upstream messages as the original's API server does: ONE system message — the
/// session's system prompt, then (after a blank line) the texts of the request's own system
/// messages joined with `\n` ([`crate::prompt::with_client_system`]) — then the history and
/// the new turn. Without a system prompt, the client's system messages go first as they are.
/// A client that resends the whole conversation (OpenAI style) is detected: when its
/// non-system messages start with the history, that prefix is not duplicated.
pub(crate) fn assemble(
    system_prompt: Option<&str>,
    history: &[Value],
    request: &[Value],
) -> Assembled {
    let mut upstream = Vec::with_capacity(history.len() + request.len() + 1);
    let client_system: Vec<&Value> = request.iter().filter(|m| is_system(m)).collect();
    match system_prompt.map(str::trim).filter(|s| !s.is_empty()) {
        Some(prompt) => {
            let texts: Vec<String> = client_system.iter().map(|m| text_of(m)).collect();
            let joined = texts.join("\n");
            let content = crate::prompt::with_client_system(prompt, Some(joined.as_str()));
            upstream.push(json!({"role": "system", "content": content}));
        }
        None => upstream.extend(client_system.into_iter().cloned()),
    }
    let rest: Vec<&Value> = request.iter().filter(|m| !is_system(m)).collect();
    let resent = !history.is_empty()
        && rest.len() >= history.len()
        && history.iter().zip(&rest).all(|(h, r)| same_message(h, r));
    let new_turn: Vec<Value> = if resent {
        rest[history.len()..].iter().map(|v| (*v).clone()).collect()
    } else {
        rest.into_iter().cloned().collect()
    };
    upstream.extend(history.iter().cloned());
    upstream.extend(new_turn.iter().cloned());
    Assembled { upstream, new_turn }
}

/// The text of a message's `content`: the string, or its text parts joined.
fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> Value {
        json!({"role": role, "content": content})
    }

    #[test]
    fn one_system_message_the_prompt_then_the_clients() {
        let a = assemble(
            Some("I am Hermes"),
            &[],
            &[
                msg("system", "be brief"),
                json!({"role": "system", "content": [{"type": "text", "text": "and kind"}]}),
                msg("user", "hi"),
            ],
        );
        assert_eq!(
            a.upstream[0],
            msg("system", "I am Hermes\n\nbe brief\nand kind")
        );
        assert_eq!(a.upstream[1], msg("user", "hi"));
        assert_eq!(a.upstream.len(), 2);
        assert_eq!(a.new_turn, vec![msg("user", "hi")]);
        // Without a prompt the client's system messages go as they are.
        let b = assemble(None, &[], &[msg("system", "be brief"), msg("user", "hi")]);
        assert_eq!(
            b.upstream,
            vec![msg("system", "be brief"), msg("user", "hi")]
        );
    }

    #[test]
    fn blank_soul_is_skipped() {
        let a = assemble(Some("  \n"), &[], &[msg("user", "hi")]);
        assert_eq!(a.upstream, vec![msg("user", "hi")]);
    }

    #[test]
    fn history_goes_before_the_new_turn() {
        let h = [msg("user", "q1"), msg("assistant", "a1")];
        let a = assemble(None, &h, &[msg("user", "q2")]);
        assert_eq!(
            a.upstream,
            vec![msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")]
        );
        assert_eq!(a.new_turn, vec![msg("user", "q2")]);
    }

    #[test]
    fn resent_history_is_not_duplicated() {
        let h = [msg("user", "q1"), msg("assistant", "a1")];
        let req = [msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")];
        let a = assemble(None, &h, &req);
        assert_eq!(a.upstream.len(), 3);
        assert_eq!(a.new_turn, vec![msg("user", "q2")]);
    }
}
