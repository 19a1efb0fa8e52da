//! What a profile's gateway runs with, resolved: [`GatewaySettings`] (where the API server
//! listens and whether it is on, its key, the provider endpoint with its keys and fallbacks,
//! connection limits), from the profile's files read once by `hermes_settings` and in its
//! precedence.
//!
//! The gateway serves with these; `doctor`, `dump` and the dashboard show what a gateway would
//! make of a profile — and whether it would refuse it ([`Error`]) — by the same code, without
//! linking the gateway's server, the provider's HTTP client or the session store.
//!
//! Modules: [`read`] (the one read of a profile's files, `SOUL.md` and `auth.json` included),
//! [`resolve`] (the pure resolution, and key routing: which key may go where),
//! [`api_server`] (whether the API server is on, and the key it needs), [`provider`] (the
//! provider client's configuration, its key pools and `fallback_providers` as configured),
//! [`limits`] (client connections), [`prompt`] (how much of `SOUL.md` the prompt takes),
//! [`error`].
//!
//! PID 1 links `hermes_settings`, not this crate: resolving a provider's address needs a URL
//! parser that PID 1 has no use for.

pub mod api_server;
pub mod error;
pub mod limits;
pub mod prompt;
pub mod provider;
pub mod read;
pub mod resolve;

pub use error::Error;
pub use limits::ConnectionLimits;
pub use read::{Read, read, read_from_process};
pub use resolve::{
    DEFAULT_PORT, GatewaySettings, KnownProvider, NAMED_PORT_BASE, NAMED_PORT_SLOTS, ProviderKey,
    choose_provider_key, default_port, known_provider, known_providers,
};
