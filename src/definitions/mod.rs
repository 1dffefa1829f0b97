//! Definitions: RabbitMQ's JSON of users, virtual hosts, permissions and topology, which
//! the management API exports (`GET /api/definitions`) and imports (`POST`), the import in
//! one store transaction (`docs/management.md`).
//!
//! - [`model`]: the JSON's serde types, exactly RabbitMQ 3.x's fields;
//! - [`import`]: checking a document, then writing it all in one transaction;
//! - [`export`]: the document of what the store holds.
//!
//! Declaration arguments go between JSON and field tables as the rest of the API's do
//! ([`crate::management::tables`]).

pub mod export;
pub mod import;
pub mod model;

pub use export::{export_all, export_vhost, user_definition};
pub use import::{ImportError, Imported, Target};
pub use model::Definitions;
