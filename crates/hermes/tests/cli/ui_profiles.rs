//! The dashboard's profiles page in a real browser (see `ui`).
