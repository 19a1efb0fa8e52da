//! Shared helpers for the public-API tests.

pub use hermes_test_support::wheel;
