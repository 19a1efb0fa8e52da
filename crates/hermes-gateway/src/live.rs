//! Configuration changes applied while the gateway runs, without a restart.
//!
//! Words (*source* and *fingerprint*: [`crate::source`]):
//! * *snapshot* — what a request uses from the settings: the soul, the client key and the
//!   provider client ([`Snapshot`]). Requests hold an `Arc` to the one current when they
//!   started, so a reload never changes a request midway.
//!
//! Every request (and `/health`) asks [`Live::current`], which compares the fingerprint (a
//! handful of `stat` calls, microseconds) and, when a file changed, resolves the settings
//! again with the same code as at start ([`SettingsSource::read`]). So an edit of the
//! model, the provider, a key or `SOUL.md` is used by the very next request; no signal and no
//! watcher thread are needed.
//!
//! What a reload cannot change: the address the gateway is bound to and its connection
//! limits (the socket is open already). A changed `API_SERVER_HOST`/`API_SERVER_PORT` is
//! logged once with "restart the gateway to apply", and the running address stays. The rules
//! that protect that address are checked against it, not against the file: a reload that
//! would leave a non-loopback address without a client key is refused.
//!
//! A reload that fails (a YAML error, a bad number, a refused rule) keeps the previous
//! snapshot in use, logs the reason once per change and shows it in `/health`
//! (`config_error`), so a typo in `config.yaml` never takes a running gateway down.

use std::sync::{Arc, Mutex};

use hermes_provider::Provider;

use crate::error::Error;
use crate::prompt::PromptSource;
use crate::settings::GatewaySettings;
use crate::source::{Fingerprint, Profile, SettingsSource};
use hermes_sessions::SessionStore;

/// What a request uses from the settings. Immutable: a reload builds a new one.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The system prompt sent first (`SOUL.md`).
    pub(crate) soul: Option<String>,
    /// Client key; `None` means no auth (loopback only, enforced by settings validation).
    pub(crate) api_key: Option<String>,
    /// Provider client; `None` when no model is configured.
    pub(crate) provider: Option<Provider>,
    /// What new sessions' system prompts are built from; `None` for settings built in code,
    /// which send [`Snapshot::soul`] instead.
    prompt: Option<Arc<PromptSource>>,
    /// The prompt built for requests without a session, and the day it was built for: the
    /// files it reads are watched, so only the date can make it stale.
    fresh_prompt: Mutex<Option<(time::Date, String)>>,
}

/// The system prompt of one turn.
#[derive(Debug)]
pub(crate) struct TurnPrompt {
    /// What to send (before the client's own system messages).
    pub(crate) text: Option<String>,
    /// Set when the prompt was built for this session now: store it with the turn.
    pub(crate) to_store: Option<String>,
}

impl Snapshot {
    /// The system prompt of a turn, as the original decides it: a session replays the prompt
    /// stored at its first turn (rebuilt when the stored `Model:`/`Provider:` lines no longer
    /// match); a new session, or a request without one, gets one built now.
    ///
    /// # Errors
    ///
    /// [`Error::Sessions`] when the stored prompt cannot be read.
    pub(crate) async fn turn_prompt(
        &self,
        store: &SessionStore,
        session: Option<&str>,
    ) -> Result<TurnPrompt, Error> {
        let Some(source) = &self.prompt else {
            return Ok(TurnPrompt {
                text: self.soul.clone(),
                to_store: None,
            });
        };
        let Some(id) = session else {
            return Ok(TurnPrompt {
                text: Some(self.fresh_prompt(source)),
                to_store: None,
            });
        };
        let stored = store.system_prompt_async(id.to_string()).await?;
        if let Some(stored) = stored.filter(|s| {
            crate::prompt::stored_prompt_matches(
                s,
                source.model.as_deref(),
                source.provider.as_deref(),
            )
        }) {
            return Ok(TurnPrompt {
                text: Some(stored),
                to_store: None,
            });
        }
        let built = self.fresh_prompt(source);
        Ok(TurnPrompt {
            text: Some(built.clone()),
            to_store: Some(built),
        })
    }

    fn fresh_prompt(&self, source: &PromptSource) -> String {
        let today = time::OffsetDateTime::now_utc().date();
        let mut cache = self
            .fresh_prompt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*cache {
            Some((day, text)) if *day == today => text.clone(),
            _ => {
                let text = source.build(today);
                *cache = Some((today, text.clone()));
                text
            }
        }
    }
}

impl Snapshot {
    /// Builds the snapshot of `settings`, reusing `previous`'s provider client (and so its
    /// open connections) when the provider settings did not change.
    ///
    /// A mounted profile whose API server is off has no client key: it is served on another
    /// profile's listener, so its routes refuse every key ([`Role::Mounted`]).
    fn build(
        settings: &GatewaySettings,
        prompt: Option<Arc<PromptSource>>,
        previous: Option<&Snapshot>,
        role: Role,
    ) -> Result<Snapshot, Error> {
        let reused = previous
            .and_then(|p| p.provider.as_ref())
            .filter(|p| Some(p.settings()) == settings.provider.as_ref())
            .cloned();
        let provider = match reused {
            Some(p) => Some(p),
            None => settings.provider.clone().map(Provider::new).transpose()?,
        };
        Ok(Snapshot {
            soul: settings.soul.clone(),
            api_key: settings
                .api_key
                .clone()
                .filter(|k| !k.is_empty())
                .filter(|_| role == Role::Listener || settings.api_server.is_on()),
            provider,
            prompt,
            fresh_prompt: Mutex::new(None),
        })
    }
}

/// How a profile is served: on its own listener, or on another profile's (multiplexing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The profile owns the listener: its address is fixed at start, a reload that would
    /// switch its API server off needs a restart, and settings built in code without a key
    /// serve on loopback without one.
    Listener,
    /// Served at `/p/<profile>/` on another profile's listener: its own address settings do
    /// not apply, and without a usable key of its own it refuses every request (fail closed,
    /// never open because the listener happens to be on loopback).
    Mounted,
}

/// The settings in use, re-read when their files change.
#[derive(Debug)]
pub(crate) struct Live {
    role: Role,
    /// `None`: settings built in code (tests, benches); they never change.
    source: Option<SettingsSource>,
    /// The address and limits fixed at start: a reload cannot change them.
    fixed: GatewaySettings,
    state: Mutex<LiveState>,
}

#[derive(Debug)]
struct LiveState {
    fingerprint: Fingerprint,
    snapshot: Arc<Snapshot>,
    /// Why the last reload was refused (kept until a reload succeeds).
    error: Option<String>,
    /// The bind address last reported as needing a restart, so it is said once.
    restart_noted: Option<(String, u16)>,
}

impl Live {
    /// The profile the gateway starts with. [`Profile::reload`] makes it reloadable; its
    /// `fingerprint` is the one taken when it was read.
    pub(crate) fn new(profile: &Profile, role: Role) -> Result<Live, Error> {
        let settings = &profile.settings;
        let snapshot = Arc::new(Snapshot::build(
            settings,
            profile.prompt.clone(),
            None,
            role,
        )?);
        let (source, fingerprint) = match &profile.reload {
            Some(r) => (Some(r.source.clone()), r.fingerprint.clone()),
            None => (None, Fingerprint::default()),
        };
        Ok(Live {
            role,
            source,
            fixed: settings.clone(),
            state: Mutex::new(LiveState {
                fingerprint,
                snapshot,
                error: None,
                restart_noted: None,
            }),
        })
    }

    /// A mounted profile whose settings could not be read (`error`): nothing configured, no
    /// key (so every keyed request is refused), the reason in `/health`, and read again when
    /// its files change, as a refused edit is.
    pub(crate) fn unconfigured(
        fixed: GatewaySettings,
        source: SettingsSource,
        fingerprint: Fingerprint,
        error: &Error,
    ) -> Live {
        let snapshot = Arc::new(Snapshot {
            soul: None,
            api_key: None,
            provider: None,
            prompt: None,
            fresh_prompt: Mutex::new(None),
        });
        Live {
            role: Role::Mounted,
            source: Some(source),
            fixed,
            state: Mutex::new(LiveState {
                fingerprint,
                snapshot,
                error: Some(hermes_errors::one_line(error)),
                restart_noted: None,
            }),
        }
    }

    /// How the profile is served.
    pub(crate) fn role(&self) -> Role {
        self.role
    }

    /// Where the settings are read from (`None` for settings built in code).
    pub(crate) fn source(&self) -> Option<&SettingsSource> {
        self.source.as_ref()
    }

    /// The snapshot to use for a request that starts now (re-read first when a watched file
    /// changed).
    pub(crate) fn current(&self) -> Arc<Snapshot> {
        let mut state = self.lock();
        if let Some(source) = &self.source {
            let now = Fingerprint::of(&source.watched());
            if now != state.fingerprint {
                self.reload(source, &mut state);
            }
        }
        Arc::clone(&state.snapshot)
    }

    /// Why the last attempt to apply an edit was refused, if the edit is still in place.
    pub(crate) fn config_error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveState> {
        // Every critical section leaves the state consistent (fields are replaced whole), so a
        // poisoned lock is safe to keep using.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn reload(&self, source: &SettingsSource, state: &mut LiveState) {
        let (fingerprint, loaded) = source.read();
        // Even a refused edit is not re-read on every request: only a further change is.
        state.fingerprint = fingerprint;
        let applied = loaded.and_then(|profile| {
            let (mut new, prompt) = (profile.settings, profile.prompt);
            if self.role == Role::Mounted {
                // No address of its own to protect: its key decides, fail closed.
                let snapshot = Snapshot::build(&new, prompt, Some(&state.snapshot), self.role)?;
                return Ok((new, snapshot));
            }
            self.note_restart_needed(&new, state);
            if let crate::api_server::ApiServer::Off { .. } = new.api_server {
                // Stopping to serve is a lifecycle change, not a request setting.
                return Err(Error::Settings(
                    hermes_gateway_settings::Error::InvalidSetting {
                        key: "API_SERVER_ENABLED".into(),
                        value: String::new(),
                        reason:
                            "the files now switch the API server off: restart the gateway to apply it"
                                .into(),
                    },
                ));
            }
            // The running address is what must be protected, whatever the file now says.
            new.host.clone_from(&self.fixed.host);
            new.port = self.fixed.port;
            new.validate()?;
            let snapshot = Snapshot::build(&new, prompt, Some(&state.snapshot), self.role)?;
            Ok((new, snapshot))
        });
        match applied {
            Ok((new, snapshot)) => {
                let changed = describe_changes(&state.snapshot, &snapshot);
                tracing::info!(
                    profile = %new.profile,
                    "configuration reloaded ({})",
                    if changed.is_empty() { "no setting a request uses changed".to_string() } else { changed.join(", ") }
                );
                state.snapshot = Arc::new(snapshot);
                state.error = None;
            }
            Err(e) => {
                let reason = hermes_errors::one_line(&e);
                tracing::warn!(
                    "configuration not reloaded, the previous one stays in use: {reason}"
                );
                state.error = Some(reason);
            }
        }
    }

    fn note_restart_needed(&self, new: &GatewaySettings, state: &mut LiveState) {
        let wanted = (new.host.clone(), new.port);
        let running = (self.fixed.host.clone(), self.fixed.port);
        if wanted != running && state.restart_noted.as_ref() != Some(&wanted) {
            tracing::warn!(
                "the address changed to {}:{} (running on {}:{}): restart the gateway to apply it (`hermes gateway restart`)",
                wanted.0,
                wanted.1,
                running.0,
                running.1
            );
            state.restart_noted = Some(wanted);
        }
    }
}

/// What differs between two snapshots, as words for the log (never a secret's value).
fn describe_changes(old: &Snapshot, new: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let model = |s: &Snapshot| s.provider.as_ref().map(|p| p.settings().model.clone());
    let endpoint = |s: &Snapshot| s.provider.as_ref().map(|p| p.settings().base_url.clone());
    let provider_key = |s: &Snapshot| s.provider.as_ref().map(|p| p.settings().api_key.clone());
    if model(old) != model(new) {
        out.push(format!(
            "model: {} -> {}",
            model(old).unwrap_or_else(|| "none".into()),
            model(new).unwrap_or_else(|| "none".into())
        ));
    }
    if endpoint(old) != endpoint(new) {
        out.push("provider address".into());
    }
    if provider_key(old) != provider_key(new) {
        out.push("provider key".into());
    }
    if old.soul != new.soul {
        out.push("SOUL.md".into());
    }
    if old.api_key != new.api_key {
        out.push("API_SERVER_KEY".into());
    }
    out
}
