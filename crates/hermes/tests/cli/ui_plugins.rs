//! The dashboard's plugins page in a real browser (see `ui`).
