//! The provider client's integration tests, one binary: every module is one area.
//!
//! The client end to end against fake upstreams, with settings resolved from a profile's
//! files, is tested by the gateway (its `credentials` and `provider_keys` areas), which does
//! that resolution.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod anthropic_parity;
