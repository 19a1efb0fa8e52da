//! The dashboard's diagnostics page in a real browser (see `ui`).
