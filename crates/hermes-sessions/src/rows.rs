//! OpenAI chat messages to and from rows of the original's `messages` and `sessions` tables,
//! in the formats the original's `SessionDB` writes and reads:
//!
//! * `content` is the text as is; structured content (a list of parts, or any other non-text
//!   JSON) is stored as `"\0json:"` followed by its JSON, which the original decodes back;
//! * `tool_calls` is the JSON array of the assistant's tool calls, `tool_call_id` the id a
//!   tool result answers, and `tool_name` the tool's name (`name` in the OpenAI message);
//! * `sessions.message_count` and `tool_call_count` grow with every message, as the
//!   original's `append_message` makes them grow.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params};
use serde_json::{Map, Value};

use super::schema::Columns;

/// The marker before JSON-encoded structured content (the original's own).
const JSON_CONTENT_PREFIX: &str = "\u{0}json:";

/// Fields of stored tool calls that only the original's Codex Responses path uses; strict
/// OpenAI-compatible providers refuse them, so the history we send upstream leaves them out
/// (as the original does for such providers).
const PROVIDER_PRIVATE_TOOL_CALL_FIELDS: [&str; 3] =
    ["call_id", "response_item_id", "extra_content"];

/// One message as the columns of a `messages` row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MessageRow {
    pub(super) role: String,
    pub(super) content: Option<String>,
    pub(super) tool_call_id: Option<String>,
    pub(super) tool_calls: Option<String>,
    pub(super) tool_name: Option<String>,
    /// How many tool calls the message makes (what `sessions.tool_call_count` counts).
    pub(super) tool_call_count: i64,
}

fn text_field(m: &Value, key: &str) -> Option<String> {
    m.get(key).and_then(Value::as_str).map(str::to_string)
}

fn encode_content(content: Option<&Value>) -> Option<String> {
    match content {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(other) => Some(format!("{JSON_CONTENT_PREFIX}{other}")),
    }
}

impl MessageRow {
    /// The row for an OpenAI chat message. A message without a `role` is stored as `user`
    /// (the request parser refuses such messages, so this only covers old stored rows).
    pub(super) fn from_message(m: &Value) -> MessageRow {
        let role = text_field(m, "role").unwrap_or_else(|| "user".to_string());
        let calls = m.get("tool_calls").filter(|c| !c.is_null());
        // The original stores no `tool_calls` for an empty list, and counts a non-list as one.
        let tool_call_count = match calls {
            None => 0,
            Some(Value::Array(list)) => i64::try_from(list.len()).unwrap_or(i64::MAX),
            Some(_) => 1,
        };
        let tool_calls = calls
            .filter(|c| c.as_array().is_none_or(|list| !list.is_empty()))
            .map(Value::to_string);
        // Only a tool result's `name` is a tool name; a user's `name` is a participant name,
        // which the original has no column for.
        let tool_name = match role.as_str() {
            "tool" | "function" => text_field(m, "name").or_else(|| text_field(m, "tool_name")),
            _ => text_field(m, "tool_name"),
        };
        MessageRow {
            content: encode_content(m.get("content")),
            tool_call_id: text_field(m, "tool_call_id"),
            tool_calls,
            tool_name,
            tool_call_count,
            role,
        }
    }

    /// The OpenAI chat message for a stored row (as the original's
    /// `get_messages_as_conversation` decodes it, keeping only what a chat API accepts).
    pub(super) fn into_message(self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), Value::String(self.role.clone()));
        m.insert("content".into(), decode_content(self.content));
        if let Some(calls) = self.tool_calls.as_deref().and_then(decode_tool_calls) {
            m.insert("tool_calls".into(), calls);
        }
        if let Some(id) = self.tool_call_id.filter(|s| !s.is_empty()) {
            m.insert("tool_call_id".into(), Value::String(id));
        }
        let answers_a_call = self.role == "tool" || self.role == "function";
        if let Some(name) = self.tool_name.filter(|s| answers_a_call && !s.is_empty()) {
            m.insert("name".into(), Value::String(name));
        }
        Value::Object(m)
    }
}

fn decode_content(content: Option<String>) -> Value {
    match content {
        None => Value::Null,
        Some(text) => match text.strip_prefix(JSON_CONTENT_PREFIX) {
            // Undecodable JSON stays the raw text, as the original returns it.
            Some(json) => serde_json::from_str(json).unwrap_or(Value::String(text)),
            None => Value::String(text),
        },
    }
}

/// The stored tool calls without provider-private fields; `None` when the column holds
/// nothing usable (the message is then sent without tool calls rather than with a broken
/// list, which providers refuse).
fn decode_tool_calls(text: &str) -> Option<Value> {
    let mut calls = match serde_json::from_str::<Value>(text).ok()? {
        Value::Array(list) if !list.is_empty() => list,
        Value::Object(one) => vec![Value::Object(one)],
        _ => return None,
    };
    for call in &mut calls {
        if let Some(obj) = call.as_object_mut() {
            for key in PROVIDER_PRIVATE_TOOL_CALL_FIELDS {
                obj.remove(key);
            }
        }
    }
    Some(Value::Array(calls))
}

/// How the prompts of the original's background skill and memory review begin. Older builds
/// of the original wrote such a prompt (and the reply to it) into the user's own session;
/// replayed, it makes the model act as the reviewer instead of answering.
const REVIEW_PROMPT_PREFIXES: [&str; 2] = [
    "Review the conversation above and update the skill library",
    "Review the conversation above and consider saving to memory",
];

fn is_review_prompt(m: &Value) -> bool {
    let role = m.get("role").and_then(Value::as_str);
    let content = m.get("content").and_then(Value::as_str);
    matches!(role, Some("user" | "system"))
        && content.is_some_and(|text| {
            let text = text.trim_start();
            REVIEW_PROMPT_PREFIXES.iter().any(|p| text.starts_with(p))
        })
}

/// The history without stray review prompts and the assistant reply right after each, as the
/// original leaves them out when it replays a session.
pub(super) fn without_review_prompts(messages: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    let mut skip_reply = false;
    for m in messages {
        if is_review_prompt(&m) {
            skip_reply = true;
            continue;
        }
        let is_reply = m.get("role").and_then(Value::as_str) == Some("assistant");
        if std::mem::take(&mut skip_reply) && is_reply {
            continue;
        }
        out.push(m);
    }
    out
}

/// A column value as text: the original may have bound a number (its `content` is whatever
/// Python value it was given), and SQLite keeps it as one.
pub(super) fn sql_text(value: SqlValue) -> Option<String> {
    match value {
        SqlValue::Null => None,
        SqlValue::Integer(i) => Some(i.to_string()),
        SqlValue::Real(f) => Some(f.to_string()),
        SqlValue::Text(s) => Some(s),
        SqlValue::Blob(b) => Some(String::from_utf8_lossy(&b).into_owned()),
    }
}

/// The SQL this database needs (it depends on which optional columns it has).
#[derive(Debug, Clone)]
pub(super) struct Statements {
    upsert_session: String,
    /// Whether `upsert_session` binds the profile (`sessions.profile_name` exists).
    binds_profile: bool,
    insert_message: String,
    pub(super) history: String,
}

impl Statements {
    pub(super) fn new(columns: Columns) -> Statements {
        let (profile_col, profile_val, profile_set) = if columns.sessions_profile_name {
            (
                ", profile_name",
                ", ?5",
                ", profile_name = COALESCE(sessions.profile_name, excluded.profile_name)",
            )
        } else {
            ("", "", "")
        };
        // Set `active` explicitly: where an old reconcile added the column without its
        // default, an omitted value would be NULL and hide the row from the original.
        let (active_col, active_val, active_filter) = if columns.messages_active {
            (", active", ", 1", " AND active = 1")
        } else {
            ("", "", "")
        };
        Statements {
            binds_profile: columns.sessions_profile_name,
            // A session that exists keeps its source and fills only what it lacks, as the
            // original's own session upsert does.
            upsert_session: format!(
                "INSERT INTO sessions (id, source, model, started_at{profile_col})
                 VALUES (?1, ?2, ?3, ?4{profile_val})
                 ON CONFLICT(id) DO UPDATE SET
                     model = COALESCE(sessions.model, excluded.model){profile_set}"
            ),
            insert_message: format!(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls,
                     tool_name, timestamp{active_col})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7{active_val})"
            ),
            // Insertion order (the AUTOINCREMENT id), not timestamps: the original orders by
            // id too, because wall-clock time can go backwards between two rows.
            history: format!(
                "SELECT role, content, tool_call_id, tool_calls, tool_name FROM messages
                 WHERE session_id = ?1{active_filter} ORDER BY id"
            ),
        }
    }
}

/// What a new session row records besides its id.
#[derive(Debug, Clone, Copy)]
pub(super) struct SessionRow<'a> {
    pub(super) source: &'a str,
    pub(super) model: Option<&'a str>,
    /// NULL for the `default` profile, as the original records it.
    pub(super) profile_name: Option<&'a str>,
    pub(super) started_at: f64,
}

/// The profile name as the original records it: none for the default profile.
pub(super) fn profile_name(profile: &str) -> Option<&str> {
    Some(profile).filter(|p| !p.is_empty() && *p != "default")
}

/// Creates the session row, or fills the model and profile an existing one lacks.
pub(super) fn upsert_session(
    conn: &Connection,
    sql: &Statements,
    id: &str,
    row: SessionRow<'_>,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(&sql.upsert_session)?;
    if sql.binds_profile {
        stmt.execute(params![
            id,
            row.source,
            row.model,
            row.started_at,
            row.profile_name
        ])?;
    } else {
        stmt.execute(params![id, row.source, row.model, row.started_at])?;
    }
    Ok(())
}

/// Appends one message row and counts it on its session.
pub(super) fn insert_message(
    conn: &Connection,
    sql: &Statements,
    session: &str,
    row: &MessageRow,
    timestamp: f64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(&sql.insert_message)?.execute(params![
        session,
        row.role,
        row.content,
        row.tool_call_id,
        row.tool_calls,
        row.tool_name,
        timestamp
    ])?;
    conn.prepare_cached(
        "UPDATE sessions SET message_count = message_count + 1,
             tool_call_count = tool_call_count + ?2 WHERE id = ?1",
    )?
    .execute(params![session, row.tool_call_count])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(m: &Value) -> Value {
        MessageRow::from_message(m).into_message()
    }

    #[test]
    fn text_messages_round_trip() {
        let m = json!({"role": "user", "content": "hi"});
        assert_eq!(round_trip(&m), m);
        let row = MessageRow::from_message(&m);
        assert_eq!(row.content.as_deref(), Some("hi"));
        assert_eq!(row.tool_call_count, 0);
    }

    #[test]
    fn structured_content_is_stored_with_the_json_marker() {
        let parts = json!([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:x"}}]);
        let m = json!({"role": "user", "content": parts});
        let row = MessageRow::from_message(&m);
        let stored = row.content.clone().unwrap();
        assert!(stored.starts_with("\u{0}json:["), "{stored:?}");
        assert_eq!(row.into_message(), m);
    }

    #[test]
    fn tool_calls_and_results_round_trip() {
        let call =
            json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let asked = json!({"role": "assistant", "content": null, "tool_calls": [call]});
        let row = MessageRow::from_message(&asked);
        assert_eq!(row.tool_call_count, 1);
        assert!(row.content.is_none());
        assert_eq!(row.into_message(), asked);
        let result = json!({"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"});
        let row = MessageRow::from_message(&result);
        assert_eq!(row.tool_name.as_deref(), Some("f"));
        assert_eq!(row.into_message(), result);
    }

    #[test]
    fn provider_private_tool_call_fields_are_not_sent_back() {
        let row = MessageRow {
            role: "assistant".into(),
            content: None,
            tool_call_id: None,
            tool_calls: Some(
                json!([{"id": "c1", "call_id": "x", "response_item_id": "y", "type": "function",
                        "function": {"name": "f", "arguments": "{}"}}])
                .to_string(),
            ),
            tool_name: None,
            tool_call_count: 1,
        };
        let m = row.into_message();
        assert_eq!(
            m["tool_calls"],
            json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
        );
    }

    #[test]
    fn empty_or_broken_tool_calls_are_left_out() {
        let empty = MessageRow::from_message(
            &json!({"role": "assistant", "content": "a", "tool_calls": []}),
        );
        assert!(empty.tool_calls.is_none());
        assert_eq!(empty.tool_call_count, 0);
        let broken = MessageRow {
            tool_calls: Some("not json".into()),
            ..MessageRow::from_message(&json!({"role": "assistant", "content": "a"}))
        };
        assert!(broken.into_message().get("tool_calls").is_none());
    }

    #[test]
    fn a_user_name_is_not_a_tool_name() {
        let row =
            MessageRow::from_message(&json!({"role": "user", "name": "alice", "content": "hi"}));
        assert!(row.tool_name.is_none());
    }

    #[test]
    fn undecodable_marked_content_stays_text() {
        let raw = "\u{0}json:{broken".to_string();
        assert_eq!(decode_content(Some(raw.clone())), Value::String(raw));
        assert_eq!(sql_text(SqlValue::Integer(7)).as_deref(), Some("7"));
        assert_eq!(sql_text(SqlValue::Null), None);
    }

    #[test]
    fn review_prompts_and_their_replies_are_not_replayed() {
        let prompt = json!({"role": "user", "content": "  Review the conversation above and consider saving to memory. ..."});
        let history = vec![
            json!({"role": "user", "content": "q1"}),
            json!({"role": "assistant", "content": "a1"}),
            prompt.clone(),
            json!({"role": "assistant", "content": "saved"}),
            json!({"role": "user", "content": "q2"}),
            // A prompt followed by something other than a reply drops only the prompt.
            prompt,
            json!({"role": "user", "content": "q3"}),
        ];
        let kept: Vec<String> = without_review_prompts(history)
            .into_iter()
            .map(|m| m["content"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(kept, ["q1", "a1", "q2", "q3"]);
        // The same words from the assistant, or later in a message, are ordinary text.
        let ordinary = vec![
            json!({"role": "assistant", "content": "Review the conversation above and update the skill library"}),
            json!({"role": "user", "content": "please: Review the conversation above and consider saving to memory"}),
        ];
        assert_eq!(without_review_prompts(ordinary.clone()), ordinary);
    }

    #[test]
    fn the_default_profile_is_recorded_as_none() {
        assert_eq!(profile_name("default"), None);
        assert_eq!(profile_name(""), None);
        assert_eq!(profile_name("work"), Some("work"));
    }
}
