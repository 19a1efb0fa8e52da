//! Shared helpers for the public-API tests.

pub mod wheel;
