//! `hermes-provider`: the client of a model provider, for the gateway.
//!
//! A [`Provider`] sends OpenAI chat completions requests to one configured endpoint (an
//! OpenAI-compatible API, or Anthropic's Messages API spoken through [`anthropic`]), with
//! retries, a pool of keys per endpoint ([`credentials`]) and the `fallback_providers` chain
//! ([`fallback`]) behind it, and answers whole or as a stream of chunks ([`ChatStream`]).
//!
//! Its configuration is [`ProviderSettings`], already resolved: which keys a profile's files
//! allow where is decided by `hermes_gateway_settings`, which hands the result over. Failures are
//! one [`Error`] with a `hint()`, which the gateway wraps as it is.
//!
//! Modules: [`client`] (the client, the chain, retries, a stream being read), [`anthropic`]
//! (translation both ways, pure), [`credentials`] (key pools in use, `auth.json` status),
//! [`sse`] (the event-stream decoder), [`error`]. The settings and the `fallback_providers`
//! chain as configured are `hermes_gateway_settings::provider`'s, re-exported here.

pub mod anthropic;
pub mod client;
pub mod credentials;
pub mod error;
pub mod sse;

pub use hermes_gateway_settings::provider::{self as settings, fallback};

pub use client::{ChatStream, PRIMARY_COOLDOWN, Provider, StreamEvent};
pub use error::Error;
pub use settings::{ApiKind, ProviderSettings, WithheldKey};
pub use sse::SseDecoder;
