//! The dashboard's sessions page in a real browser (see `ui`).
