//! Kafka ACLs: [`model`] (ACLs, filters and the rules of matching, pure), [`store`] (the
//! ACLs in the store) and [`authorizer`] (the cached checks every Kafka API makes).
//! CreateAcls, DescribeAcls and DeleteAcls (in [`crate::api`]) change and read
//! them; `kafka.super_users` and `kafka.allow_everyone_if_no_acl_found` configure the
//! checks (`docs/security.md`, "Kafka ACLs").

pub mod authorizer;
pub mod model;
pub mod store;

pub use authorizer::{Access, Acls, AuthorizerSettings, Caller};
pub use model::{Operation, ResourceType};
