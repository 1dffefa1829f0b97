//! Kafka ACLs as values: resource types, pattern types, operations and permissions with
//! Kafka's wire codes, an ACL binding, the filters of DescribeAcls and DeleteAcls, and
//! the rules by which an ACL applies to a request (Kafka's `StandardAuthorizer`):
//!
//! - an ACL applies to a resource of its type when its pattern is the literal name, the
//!   literal wildcard `*`, or a prefix of the name (a prefixed pattern);
//! - to a principal when it names it or `User:*`, and to a host when it names it or `*`;
//! - a deny ACL for the operation (or `All`) wins over every allow;
//! - an allow ACL for the operation, for `All`, or for an operation implying it (`Read`,
//!   `Write`, `Delete` and `Alter` imply `Describe`; `AlterConfigs` implies
//!   `DescribeConfigs`) allows;
//! - a resource no ACL applies to (whoever for) is allowed only when
//!   `kafka.allow_everyone_if_no_acl_found` is on.
//!
//! Pure: no I/O, no store.

use std::net::IpAddr;

/// The name of the cluster resource, the only one Kafka accepts.
pub(crate) const CLUSTER_NAME: &str = "kafka-cluster";

/// The literal resource name every resource matches, and the principal or host every
/// principal or host matches.
pub(crate) const WILDCARD: &str = "*";

/// The principal every principal matches.
pub(crate) const ANY_USER: &str = "User:*";

/// The principal prefix Ferry's principals carry.
pub(crate) const USER_PREFIX: &str = "User:";

/// Declares a Kafka enum with its wire codes, `code()` and `from_code()`.
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $(Self::$variant => $code),+
                }
            }

            /// The value of a wire code, if it is one of these.
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

wire_enum! {
    /// What an ACL protects (Kafka's `ResourceType`; `ANY` is 1 in filters).
    ResourceType {
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster (named `kafka-cluster`).
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
    }
}

wire_enum! {
    /// How an ACL's resource name matches (Kafka's `PatternType`; `ANY` 1 and `MATCH` 2
    /// are filters only).
    PatternType {
        /// The name itself (or every name, for `*`).
        Literal = 3,
        /// Every name starting with it.
        Prefixed = 4,
    }
}

wire_enum! {
    /// What a request does to a resource (Kafka's `AclOperation`; `ANY` is 1 in filters).
    Operation {
        /// Every operation.
        All = 2,
        /// Consume; commit and fetch group offsets; join a group.
        Read = 3,
        /// Produce; transactional writes.
        Write = 4,
        /// Create topics.
        Create = 5,
        /// Delete topics, groups.
        Delete = 6,
        /// Add partitions; create and delete ACLs (on the cluster).
        Alter = 7,
        /// Metadata, offsets, coordinators; describe groups and ACLs.
        Describe = 8,
        /// Broker-to-broker requests.
        ClusterAction = 9,
        /// Read configs.
        DescribeConfigs = 10,
        /// Change configs.
        AlterConfigs = 11,
        /// Idempotent produce (on the cluster).
        IdempotentWrite = 12,
    }
}

wire_enum! {
    /// Whether an ACL allows or denies (Kafka's `AclPermissionType`; `ANY` is 1 in filters).
    Permission {
        /// Refuses, whatever allows.
        Deny = 2,
        /// Allows, unless something denies.
        Allow = 3,
    }
}

/// Kafka's `ANY` code in filters (resource type, pattern type, operation, permission).
pub(crate) const ANY: i8 = 1;
/// Kafka's `MATCH` pattern type filter.
pub(crate) const MATCH: i8 = 2;

impl Operation {
    /// Whether an allow ACL for `self` allows `wanted`: the same operation, `All`, or one
    /// implying it.
    pub fn grants(self, wanted: Operation) -> bool {
        use Operation::{All, Alter, AlterConfigs, Delete, Describe, DescribeConfigs, Read, Write};
        self == wanted
            || self == All
            || match wanted {
                Describe => matches!(self, Read | Write | Delete | Alter),
                DescribeConfigs => self == AlterConfigs,
                _ => false,
            }
    }

    /// Whether a deny ACL for `self` denies `wanted`: the same operation or `All`
    /// (a denied `Read` still allows `Describe`, as in Kafka).
    pub fn refuses(self, wanted: Operation) -> bool {
        self == wanted || self == Operation::All
    }
}

/// A resource pattern: what an ACL applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// How `name` matches.
    pub pattern_type: PatternType,
    /// The name, prefix or `*`.
    pub name: String,
}

impl ResourcePattern {
    /// Whether this pattern covers the resource `name` of its type.
    pub fn covers(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => self.name == name || self.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&self.name),
        }
    }
}

/// One ACL binding: a resource pattern and who may or may not do what to it from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acl {
    /// What it applies to.
    pub resource: ResourcePattern,
    /// `User:name` or `User:*`.
    pub principal: String,
    /// An IP address or `*`.
    pub host: String,
    /// The operation it allows or denies.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

impl Acl {
    /// Whether this ACL speaks of `principal` connecting from `host`.
    pub fn concerns(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == ANY_USER)
            && (self.host == host || self.host == WILDCARD)
    }
}

/// Why an ACL or a filter in a request is not one Ferry can use: the message of Kafka's
/// `INVALID_REQUEST` answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

/// An ACL as a CreateAcls request sends it, by wire codes.
#[derive(Debug, Clone)]
pub struct AclCodes<'a> {
    /// Resource type code.
    pub resource_type: i8,
    /// Resource name.
    pub name: &'a str,
    /// Pattern type code.
    pub pattern_type: i8,
    /// Principal.
    pub principal: &'a str,
    /// Host.
    pub host: &'a str,
    /// Operation code.
    pub operation: i8,
    /// Permission code.
    pub permission: i8,
}

impl Acl {
    /// The ACL a CreateAcls creation asks for, checked as Kafka checks it.
    ///
    /// # Errors
    /// [`InvalidAcl`] naming the field that is not a concrete, supported value: a resource
    /// type other than topic, group, cluster or transactional id; a pattern type other than
    /// literal or prefixed; `ANY` or an unknown operation or permission; an empty name; a
    /// cluster not named `kafka-cluster`; a principal that is not `User:name`; a host that
    /// is neither `*` nor an IP address.
    pub fn from_codes(codes: &AclCodes<'_>) -> Result<Self, InvalidAcl> {
        let resource_type = ResourceType::from_code(codes.resource_type).ok_or_else(|| {
            InvalidAcl(format!(
                "Invalid resourceType {} (Ferry has ACLs on topics (2), groups (3), the cluster (4) and transactional ids (5))",
                codes.resource_type
            ))
        })?;
        let pattern_type = PatternType::from_code(codes.pattern_type).ok_or_else(|| {
            InvalidAcl(format!(
                "Invalid patternType {} (LITERAL is 3, PREFIXED 4)",
                codes.pattern_type
            ))
        })?;
        let operation = Operation::from_code(codes.operation)
            .ok_or_else(|| InvalidAcl(format!("Invalid operation {}", codes.operation)))?;
        let permission = Permission::from_code(codes.permission)
            .ok_or_else(|| InvalidAcl(format!("Invalid permissionType {}", codes.permission)))?;
        if codes.name.is_empty() {
            return Err(InvalidAcl("Resource name should not be empty".to_owned()));
        }
        if resource_type == ResourceType::Cluster
            && (codes.name != CLUSTER_NAME || pattern_type != PatternType::Literal)
        {
            return Err(InvalidAcl(format!(
                "The only valid name for the CLUSTER resource is the literal {CLUSTER_NAME}"
            )));
        }
        check_principal(codes.principal)?;
        Ok(Self {
            resource: ResourcePattern {
                resource_type,
                pattern_type,
                name: codes.name.to_owned(),
            },
            principal: codes.principal.to_owned(),
            host: canonical_host(codes.host)?,
            operation,
            permission,
        })
    }
}

/// Checks that `principal` is `User:name` (or `User:*`).
fn check_principal(principal: &str) -> Result<(), InvalidAcl> {
    match principal.split_once(':') {
        None => Err(InvalidAcl(format!(
            "Could not parse principal from `{principal}` (no colon is present separating the principal type from the principal name)"
        ))),
        Some((kind, _)) if format!("{kind}:") != USER_PREFIX => Err(InvalidAcl(format!(
            "Invalid principal type `{kind}` in `{principal}` (Ferry's principals are User:name)"
        ))),
        Some((_, "")) => Err(InvalidAcl(format!(
            "Principal `{principal}` has an empty name"
        ))),
        Some(_) => Ok(()),
    }
}

/// `*`, or `host` as an IP address in its canonical form.
fn canonical_host(host: &str) -> Result<String, InvalidAcl> {
    if host == WILDCARD {
        return Ok(host.to_owned());
    }
    host.parse::<IpAddr>()
        .map(|ip| ip.to_string())
        .map_err(|_| {
            InvalidAcl(format!(
                "Invalid host `{host}`: neither * nor an IP address"
            ))
        })
}

/// A pattern type filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Every pattern type; the name, if given, exactly.
    Any,
    /// Every pattern that applies to the name (literal, `*`, prefixes of it).
    Match,
    /// This pattern type; the name, if given, exactly.
    Exactly(PatternType),
}

/// The filter of a DescribeAcls request or of one DeleteAcls filter: `None` fields match
/// everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type, or any.
    pub resource_type: Option<ResourceType>,
    /// The resource name, or any.
    pub name: Option<String>,
    /// How `name` selects patterns.
    pub pattern: PatternFilter,
    /// The principal, or any.
    pub principal: Option<String>,
    /// The host, or any.
    pub host: Option<String>,
    /// The operation, or any.
    pub operation: Option<Operation>,
    /// The permission, or any.
    pub permission: Option<Permission>,
}

/// A filter as a DescribeAcls or DeleteAcls request sends it, by wire codes.
#[derive(Debug, Clone)]
pub struct FilterCodes<'a> {
    /// Resource type code (1: any).
    pub resource_type: i8,
    /// Resource name (`None`: any).
    pub name: Option<&'a str>,
    /// Pattern type code (1: any, 2: match).
    pub pattern_type: i8,
    /// Principal (`None`: any).
    pub principal: Option<&'a str>,
    /// Host (`None`: any).
    pub host: Option<&'a str>,
    /// Operation code (1: any).
    pub operation: i8,
    /// Permission code (1: any).
    pub permission: i8,
}

impl AclFilter {
    /// The filter a request sends.
    ///
    /// # Errors
    /// [`InvalidAcl`] naming a field whose code is neither `ANY` nor a known value.
    pub fn from_codes(codes: &FilterCodes<'_>) -> Result<Self, InvalidAcl> {
        /// `None` for `ANY`, else the known value of `code`.
        fn any_or<T>(
            code: i8,
            field: &str,
            parse: fn(i8) -> Option<T>,
        ) -> Result<Option<T>, InvalidAcl> {
            if code == ANY {
                return Ok(None);
            }
            parse(code)
                .map(Some)
                .ok_or_else(|| InvalidAcl(format!("Invalid {field} filter {code}")))
        }
        let pattern = match codes.pattern_type {
            ANY => PatternFilter::Any,
            MATCH => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code)
                    .ok_or_else(|| InvalidAcl(format!("Invalid patternType filter {code}")))?,
            ),
        };
        Ok(Self {
            resource_type: any_or(codes.resource_type, "resourceType", ResourceType::from_code)?,
            name: codes.name.map(str::to_owned),
            pattern,
            principal: codes.principal.map(str::to_owned),
            host: codes.host.map(str::to_owned),
            operation: any_or(codes.operation, "operation", Operation::from_code)?,
            permission: any_or(codes.permission, "permissionType", Permission::from_code)?,
        })
    }

    /// Whether `acl` passes this filter (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, acl: &Acl) -> bool {
        let r = &acl.resource;
        self.resource_type.is_none_or(|t| t == r.resource_type)
            && self.matches_name(r)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission)
    }

    /// Whether the pattern type and name filters pass `pattern`.
    fn matches_name(&self, pattern: &ResourcePattern) -> bool {
        match (self.pattern, &self.name) {
            (PatternFilter::Exactly(t), _) if t != pattern.pattern_type => false,
            (_, None) => true,
            (PatternFilter::Match, Some(name)) => pattern.covers(name),
            (_, Some(name)) => *name == pattern.name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: ResourceType, pt: PatternType, name: &str, op: Operation, perm: Permission) -> Acl {
        Acl {
            resource: ResourcePattern {
                resource_type: rt,
                pattern_type: pt,
                name: name.into(),
            },
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn read_write_delete_and_alter_imply_describe_and_alter_configs_implies_describe_configs() {
        use Operation::*;
        for op in [Read, Write, Delete, Alter, All, Describe] {
            assert!(op.grants(Describe), "{op:?}");
        }
        for op in [
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
        ] {
            assert!(!op.grants(Describe), "{op:?}");
        }
        assert!(AlterConfigs.grants(DescribeConfigs));
        assert!(!DescribeConfigs.grants(AlterConfigs));
        assert!(!Describe.grants(Read));
        assert!(!Write.grants(Read));
        for op in Operation::ALL {
            assert!(All.grants(*op));
        }
    }

    #[test]
    fn a_deny_refuses_only_its_operation_or_all() {
        use Operation::*;
        assert!(Read.refuses(Read));
        assert!(All.refuses(Describe));
        assert!(!Read.refuses(Describe));
        assert!(!Write.refuses(Read));
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns_cover_names() {
        let pattern = |pt, name: &str| ResourcePattern {
            resource_type: ResourceType::Topic,
            pattern_type: pt,
            name: name.into(),
        };
        assert!(pattern(PatternType::Literal, "orders").covers("orders"));
        assert!(!pattern(PatternType::Literal, "orders").covers("orders-eu"));
        assert!(pattern(PatternType::Literal, "*").covers("anything"));
        assert!(pattern(PatternType::Prefixed, "orders").covers("orders-eu"));
        assert!(!pattern(PatternType::Prefixed, "orders").covers("order"));
        assert!(!pattern(PatternType::Prefixed, "*").covers("anything"));
    }

    #[test]
    fn acls_concern_their_principal_and_host_or_wildcards() {
        let mut a = acl(
            ResourceType::Topic,
            PatternType::Literal,
            "t",
            Operation::Read,
            Permission::Allow,
        );
        assert!(a.concerns("User:alice", "10.0.0.1"));
        assert!(!a.concerns("User:bob", "10.0.0.1"));
        a.principal = "User:*".into();
        a.host = "10.0.0.2".into();
        assert!(a.concerns("User:bob", "10.0.0.2"));
        assert!(!a.concerns("User:bob", "10.0.0.1"));
    }

    #[test]
    fn filters_match_as_kafka_any_match_and_exact_pattern_types() {
        let literal = acl(
            ResourceType::Topic,
            PatternType::Literal,
            "orders",
            Operation::Read,
            Permission::Allow,
        );
        let prefixed = acl(
            ResourceType::Topic,
            PatternType::Prefixed,
            "ord",
            Operation::Write,
            Permission::Deny,
        );
        let wildcard = acl(
            ResourceType::Topic,
            PatternType::Literal,
            "*",
            Operation::Read,
            Permission::Allow,
        );
        let group = acl(
            ResourceType::Group,
            PatternType::Literal,
            "orders",
            Operation::Read,
            Permission::Allow,
        );
        let codes = |rt, name, pt, op| FilterCodes {
            resource_type: rt,
            name,
            pattern_type: pt,
            principal: None,
            host: None,
            operation: op,
            permission: ANY,
        };
        let all = [&literal, &prefixed, &wildcard, &group];
        let matching = |c: FilterCodes<'_>| -> Vec<&Acl> {
            let f = AclFilter::from_codes(&c).unwrap();
            all.into_iter().filter(|a| f.matches(a)).collect()
        };
        assert_eq!(matching(codes(ANY, None, ANY, ANY)).len(), 4);
        assert_eq!(matching(codes(2, Some("orders"), ANY, ANY)), vec![&literal]);
        assert_eq!(
            matching(codes(2, Some("orders"), MATCH, ANY)),
            vec![&literal, &prefixed, &wildcard]
        );
        assert_eq!(matching(codes(2, None, 4, ANY)), vec![&prefixed]);
        assert_eq!(
            matching(codes(ANY, Some("orders"), 3, 3)),
            vec![&literal, &group]
        );
        assert_eq!(
            AclFilter::from_codes(&codes(0, None, ANY, ANY))
                .unwrap_err()
                .0,
            "Invalid resourceType filter 0"
        );
        assert_eq!(
            AclFilter::from_codes(&codes(ANY, None, 0, ANY))
                .unwrap_err()
                .0,
            "Invalid patternType filter 0"
        );
    }

    #[test]
    fn creations_are_checked_as_kafka_checks_them() {
        let good = AclCodes {
            resource_type: 2,
            name: "orders",
            pattern_type: 3,
            principal: "User:alice",
            host: "*",
            operation: 3,
            permission: 3,
        };
        assert!(Acl::from_codes(&good).is_ok());
        let error = |edit: fn(&mut AclCodes<'static>)| {
            let mut c = good.clone();
            edit(&mut c);
            Acl::from_codes(&c).unwrap_err().0
        };
        assert!(error(|c| c.resource_type = 1).starts_with("Invalid resourceType 1"));
        assert!(error(|c| c.pattern_type = 2).starts_with("Invalid patternType 2"));
        assert_eq!(error(|c| c.operation = 1), "Invalid operation 1");
        assert_eq!(error(|c| c.permission = 1), "Invalid permissionType 1");
        assert_eq!(error(|c| c.name = ""), "Resource name should not be empty");
        assert_eq!(
            error(|c| c.principal = "alice"),
            "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"
        );
        assert!(error(|c| c.principal = "Group:x").starts_with("Invalid principal type `Group`"));
        assert_eq!(
            error(|c| c.host = "nowhere"),
            "Invalid host `nowhere`: neither * nor an IP address"
        );
        assert!(
            error(|c| {
                c.resource_type = 4;
                c.name = "other";
            })
            .starts_with("The only valid name for the CLUSTER resource")
        );
        let mut v6 = good.clone();
        v6.host = "0:0::1";
        assert_eq!(Acl::from_codes(&v6).unwrap().host, "::1");
    }
}
