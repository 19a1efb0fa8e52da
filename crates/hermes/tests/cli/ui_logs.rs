//! The dashboard's logs page in a real browser (see `ui`).
