//! RabbitMQ's permissions: per (virtual host, user) three regular expressions —
//! `configure`, `write`, `read` — that a resource's name must match for the operation, and
//! topic permissions per (virtual host, user, exchange) — `write`, `read` — that a routing
//! key on a topic exchange must match.
//!
//! Matching is RabbitMQ's (`rabbit_auth_backend_internal`): an unanchored search
//! (`re:run`), the empty pattern standing for `^$` (so it matches no named resource), the
//! default exchange checked under the name `amq.default`. Topic patterns first have
//! `{username}`, `{vhost}` and the front's other variables replaced by their values, as
//! they are, before the pattern is compiled; a variable the front does not supply (AMQP
//! 0-9-1 supplies no `{client_id}`, as RabbitMQ's) stays literal text. A user with no topic
//! permission on an exchange may use every routing key on it.
//!
//! Patterns are compiled by the `regex` crate on bytes without Unicode classes, close to
//! Erlang's `re` on binaries; its dialect has no look-around or back-references and wants
//! literal braces escaped, so such a pattern is refused when it is set, with the field's
//! name.

use regex::bytes::{Regex, RegexBuilder};
use std::collections::HashMap;

/// The name the default exchange ("") is checked under.
pub const DEFAULT_EXCHANGE_NAME: &str = "amq.default";

/// Compiled patterns larger than this are refused (a guard against patterns whose
/// automaton would cost much memory; RabbitMQ's real ones are small).
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The three kinds of access RabbitMQ distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Create, delete or change a resource.
    Configure,
    /// Put messages into a resource (publish, bind to it).
    Write,
    /// Take messages out of a resource (consume, get, purge, bind from it).
    Read,
}

impl Access {
    /// The word RabbitMQ's refusals use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Configure => "configure",
            Self::Write => "write",
            Self::Read => "read",
        }
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A pattern that does not compile, named by its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct BadPattern {
    /// The field (`configure`, `write`, `read`; the config prefixes its key path).
    pub field: String,
    /// Why it does not compile.
    pub reason: String,
}

impl BadPattern {
    /// The same error with `prefix.` before the field (`users[1].permissions[0]`).
    pub fn under(self, prefix: &str) -> Self {
        Self {
            field: format!("{prefix}.{}", self.field),
            reason: self.reason,
        }
    }
}

/// A user's permissions on one virtual host: the three patterns, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    /// Resources the user may create, delete or change.
    pub configure: String,
    /// Resources the user may write to.
    pub write: String,
    /// Resources the user may read from.
    pub read: String,
}

impl Permissions {
    /// Every resource for every access (`.*` thrice), what `[[users]] vhosts` grants.
    pub fn full() -> Self {
        Self {
            configure: ".*".into(),
            write: ".*".into(),
            read: ".*".into(),
        }
    }

    /// Checks that every pattern compiles.
    ///
    /// # Errors
    /// [`BadPattern`] naming the first field that does not.
    pub fn validate(&self) -> Result<(), BadPattern> {
        for (field, pattern) in self.fields() {
            Pattern::compile(field, pattern)?;
        }
        Ok(())
    }

    fn fields(&self) -> [(&'static str, &str); 3] {
        [
            ("configure", &self.configure),
            ("write", &self.write),
            ("read", &self.read),
        ]
    }
}

/// A user's permissions on a virtual host, as stored and listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VhostPermissions {
    /// The virtual host.
    pub vhost: String,
    /// The user.
    pub user: String,
    /// The patterns.
    pub permissions: Permissions,
}

/// A user's topic permission on one exchange of a virtual host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPermission {
    /// The virtual host.
    pub vhost: String,
    /// The user.
    pub user: String,
    /// The topic exchange it applies to.
    pub exchange: String,
    /// Routing keys the user may publish with.
    pub write: String,
    /// Routing keys the user may bind (and unbind) with.
    pub read: String,
}

impl TopicPermission {
    /// Checks that both patterns compile once variables are replaced.
    ///
    /// # Errors
    /// [`BadPattern`] naming the first field that does not.
    pub fn validate(&self) -> Result<(), BadPattern> {
        // Any value stands in for a variable here: values are inserted as they are, so a
        // pattern compiles with them when it compiles with plain text.
        let variables = TopicVariables::for_validation();
        for (field, pattern) in [("write", &self.write), ("read", &self.read)] {
            Pattern::compile(field, &variables.expand(pattern))?;
        }
        Ok(())
    }
}

/// The values `{name}` placeholders of topic patterns are replaced with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicVariables {
    values: HashMap<&'static str, String>,
}

impl TopicVariables {
    /// The variables every front supplies: `{username}` and `{vhost}`.
    pub fn new(username: &str, vhost: &str) -> Self {
        Self {
            values: HashMap::from([
                ("username", username.to_owned()),
                ("vhost", vhost.to_owned()),
            ]),
        }
    }

    /// Adds `{client_id}` (a front whose clients have one; AMQP 0-9-1 clients do not, in
    /// RabbitMQ as here).
    pub fn with_client_id(mut self, client_id: &str) -> Self {
        self.values.insert("client_id", client_id.to_owned());
        self
    }

    fn for_validation() -> Self {
        Self::new("u", "v").with_client_id("c")
    }

    /// `pattern` with every supplied `{name}` replaced by its value, and every known
    /// placeholder without a value escaped, so it stays literal text as in Erlang's `re`.
    pub fn expand(&self, pattern: &str) -> String {
        let mut expanded = pattern.to_owned();
        for name in ["username", "vhost", "client_id"] {
            let placeholder = format!("{{{name}}}");
            let value = match self.values.get(name) {
                Some(value) => value.clone(),
                None => format!("\\{{{name}\\}}"),
            };
            expanded = expanded.replace(&placeholder, &value);
        }
        expanded
    }
}

/// A compiled permission pattern.
#[derive(Debug, Clone)]
pub struct Pattern(Regex);

impl Pattern {
    /// Compiles `pattern` for the field `field`; "" becomes `^$`, as in RabbitMQ.
    ///
    /// # Errors
    /// [`BadPattern`] naming `field` when it does not compile.
    pub fn compile(field: &str, pattern: &str) -> Result<Self, BadPattern> {
        let pattern = if pattern.is_empty() { "^$" } else { pattern };
        RegexBuilder::new(pattern)
            .unicode(false)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map(Self)
            .map_err(|e| BadPattern {
                field: field.to_owned(),
                reason: format!("'{pattern}' is not a valid regular expression: {e}"),
            })
    }

    /// Whether `name` matches somewhere (an unanchored search, as `re:run`).
    pub fn matches(&self, name: &str) -> bool {
        self.0.is_match(name.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, name: &str) -> bool {
        Pattern::compile("f", pattern).unwrap().matches(name)
    }

    #[test]
    fn patterns_search_unanchored_and_the_empty_one_matches_no_name() {
        assert!(matches("app", "my-app-queue"));
        assert!(matches("^app-", "app-orders"));
        assert!(!matches("^app-", "my-app-orders"));
        assert!(matches(".*", "anything"));
        assert!(!matches("", "anything"));
        assert!(!matches("", DEFAULT_EXCHANGE_NAME));
        assert!(matches("^(orders|invoices)$", "invoices"));
        assert!(!matches("^(orders|invoices)$", "invoices2"));
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_named_by_its_field() {
        let bad = Permissions {
            write: "(unclosed".into(),
            ..Permissions::full()
        };
        let error = bad.validate().unwrap_err().under("users[1].permissions[0]");
        assert_eq!(error.field, "users[1].permissions[0].write");
        assert!(
            error.to_string().starts_with(
                "users[1].permissions[0].write: '(unclosed' is not a valid regular expression"
            ),
            "{error}"
        );
        assert_eq!(Permissions::full().validate(), Ok(()));
    }

    #[test]
    fn topic_variables_are_replaced_as_they_are_and_missing_ones_stay_literal() {
        let vars = TopicVariables::new("alice", "/");
        assert_eq!(vars.expand("^{username}\\."), "^alice\\.");
        assert_eq!(vars.expand("{vhost}|{username}"), "/|alice");
        let literal = vars.expand("^{client_id}$");
        assert_eq!(literal, "^\\{client_id\\}$");
        assert!(matches(&literal, "{client_id}"));
        assert_eq!(
            vars.with_client_id("c-1").expand("^{client_id}\\."),
            "^c-1\\."
        );
    }

    #[test]
    fn topic_patterns_with_variables_validate_and_bad_ones_are_named() {
        let topic = |write: &str| TopicPermission {
            vhost: "/".into(),
            user: "u".into(),
            exchange: "amq.topic".into(),
            write: write.into(),
            read: ".*".into(),
        };
        assert_eq!(topic("^{username}\\.{client_id}").validate(), Ok(()));
        assert_eq!(topic("[").validate().unwrap_err().field, "write");
    }
}
