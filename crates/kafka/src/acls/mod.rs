//! Kafka ACLs: [`model`] (ACLs, filters and the rules of matching, pure), [`store`] (the
//! ACLs in the store) and [`authorizer`] (the cached checks every Kafka API makes).
//! CreateAcls, DescribeAcls and DeleteAcls (in [`crate::api`]) change and read
//! them; `kafka.super_users` and `kafka.allow_everyone_if_no_acl_found` configure the
//! checks (`docs/security.md`, "Kafka ACLs").

pub(crate) mod authorizer;
pub(crate) mod model;
pub(crate) mod store;

pub(crate) use authorizer::{Access, Acls, AuthorizerSettings, Caller};
pub(crate) use model::Operation;
