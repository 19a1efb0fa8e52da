//! `hermes chat -q`: one question to the profile's agent, without a running gateway.
//!
//! Same provider client, same soul-first message assembly and same session store as the HTTP
//! API, so a conversation started here can be continued over HTTP with the same session id
//! and the other way round. It takes no gateway lock: SQLite in WAL mode lets it share
//! `state.db` with a running gateway.

use serde_json::{Value, json};

use crate::error::Error;
use crate::live::Live;
use hermes_sessions::{SOURCE_CLI, SessionStore, TurnMeta, validate_session_id};

use crate::assemble::assemble;
use crate::source::Profile;

/// What `chat_once` returns once the answer is complete.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAnswer {
    /// The whole answer text (also delivered piece by piece to `on_delta`).
    pub text: String,
    /// The session the turn was stored in, if one was given.
    pub session: Option<String>,
    /// The model that answered.
    pub model: String,
}

/// Asks `question` and streams the answer to `on_delta` as it arrives. With `session`, the
/// session's history is sent first and the turn is stored afterwards.
///
/// # Errors
///
/// [`Error::NoModel`] when no model is configured; [`Error::Provider`] when the provider
/// fails (a rejected key, unreachable, a timeout, an error status); [`Error::Sessions`] for
/// an invalid session id or a failing session store.
pub async fn chat_once(
    profile: &Profile,
    question: &str,
    session: Option<&str>,
    mut on_delta: impl FnMut(&str),
) -> Result<ChatAnswer, Error> {
    let settings = &profile.settings;
    let model = settings
        .provider
        .as_ref()
        .map(|p| p.model.clone())
        .ok_or_else(|| Error::NoModel {
            profile: settings.profile.clone(),
            home: settings.home.clone(),
        })?;
    if let Some(id) = session {
        validate_session_id(id)?;
    }
    // The same snapshot a gateway request uses: provider client and system prompt.
    let snapshot = Live::new(profile, crate::live::Role::Listener)?.current();
    let provider = snapshot.provider.clone().ok_or_else(|| Error::NoModel {
        profile: settings.profile.clone(),
        home: settings.home.clone(),
    })?;
    let store = SessionStore::open(&settings.state_db)?;
    let history = match session {
        Some(id) => store.history_async(id.to_string()).await?,
        None => Vec::new(),
    };
    let prompt = snapshot.turn_prompt(&store, session).await?;
    let request = [json!({"role": "user", "content": question})];
    let assembled = assemble(prompt.text.as_deref(), &history, &request);

    let mut stream = provider
        .stream(json!({"messages": Value::Array(assembled.upstream)}))
        .await?;
    let mut text = String::new();
    while let Some(event) = stream.next_event().await {
        let event = event?;
        if let Some(d) = event.delta.as_deref().filter(|d| !d.is_empty()) {
            on_delta(d);
            text.push_str(d);
        }
    }
    if let Some(id) = session {
        let mut turn = assembled.new_turn;
        turn.push(json!({"role": "assistant", "content": text}));
        let meta = TurnMeta {
            profile: settings.profile.clone(),
            source: SOURCE_CLI.to_string(),
            model: Some(model.clone()),
            system_prompt: prompt.to_store,
        };
        store.append_turn_async(id.to_string(), meta, turn).await?;
    }
    Ok(ChatAnswer {
        text,
        session: session.map(String::from),
        model,
    })
}
