//! The management server's parts: so far the web UI ([`ui`]), which the management router
//! serves at `/`.

pub mod ui;
