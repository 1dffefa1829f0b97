//! Who may do what in the API, by the user's tags, as RabbitMQ decides it:
//!
//! | tags | may |
//! |---|---|
//! | none (or only others) | nothing: 401 "Not management user" |
//! | `management` | see the objects of the vhosts they have permissions in; see and close their own connections |
//! | `policymaker` | also see the (always empty) policies and runtime parameters |
//! | `monitoring` | also see every vhost's objects, every connection, and the Kafka front's topics and groups |
//! | `administrator` | also close any connection, manage vhosts, and see the Kafka ACLs |
//!
//! Changing objects (declare, delete, bind, get, purge, publish) needs, whatever the
//! tags, the user's permissions in the vhost, checked as the AMQP front checks them.

/// What one user's tags and vhosts allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access {
    /// The user.
    user: String,
    /// `administrator`.
    administrator: bool,
    /// `monitoring` (or `administrator`).
    monitoring: bool,
    /// `policymaker` (or `administrator`).
    policymaker: bool,
    /// Any tag that lets the user into the API.
    management: bool,
    /// The vhosts the user has permissions in.
    vhosts: Vec<String>,
}

/// The tags that let a user into the API.
const MANAGEMENT_TAGS: [&str; 4] = ["administrator", "monitoring", "policymaker", "management"];

impl Access {
    /// What `user` with `tags`, who has permissions in `vhosts`, may do.
    pub(crate) fn new(user: &str, tags: &[String], vhosts: &[String]) -> Self {
        let has = |tag: &str| tags.iter().any(|t| t == tag);
        Self {
            user: user.to_owned(),
            administrator: has("administrator"),
            monitoring: has("administrator") || has("monitoring"),
            policymaker: has("administrator") || has("policymaker"),
            management: MANAGEMENT_TAGS.iter().any(|t| has(t)),
            vhosts: vhosts.to_vec(),
        }
    }

    /// Whether the user may use the API at all.
    pub(crate) fn is_management_user(&self) -> bool {
        self.management
    }

    /// Whether the user is an administrator (vhosts, every object, every connection).
    pub(crate) fn is_administrator(&self) -> bool {
        self.administrator
    }

    /// Whether the user is `monitoring` or `administrator` (sees everything, as the Kafka
    /// front's topics and groups).
    pub(crate) fn is_monitoring(&self) -> bool {
        self.monitoring
    }

    /// Whether the user is `policymaker` or `administrator` (sees runtime parameters).
    pub(crate) fn is_policymaker(&self) -> bool {
        self.policymaker
    }

    /// Whether the user may see the objects of `vhost`.
    pub(crate) fn sees_vhost(&self, vhost: &str) -> bool {
        self.monitoring || self.vhosts.iter().any(|v| v == vhost)
    }

    /// Whether the user may see a connection (or its channels) of `owner`.
    pub(crate) fn sees_connection_of(&self, owner: &str) -> bool {
        self.monitoring || owner == self.user
    }

    /// Whether the user may close a connection of `owner`.
    pub(crate) fn closes_connection_of(&self, owner: &str) -> bool {
        self.administrator || owner == self.user
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(tags: &[&str]) -> Access {
        let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
        Access::new("alice", &tags, &["/".to_owned()])
    }

    #[test]
    fn tags_decide_as_in_rabbitmq() {
        assert!(!access(&[]).is_management_user());
        assert!(!access(&["impersonator"]).is_management_user());
        let management = access(&["management"]);
        assert!(management.is_management_user());
        assert!(management.sees_vhost("/") && !management.sees_vhost("other"));
        assert!(management.sees_connection_of("alice") && !management.sees_connection_of("bob"));
        assert!(!management.closes_connection_of("bob"));
        let policymaker = access(&["policymaker"]);
        assert!(!policymaker.sees_vhost("other"));
        assert!(policymaker.is_policymaker() && !management.is_policymaker());
        let monitoring = access(&["monitoring"]);
        assert!(monitoring.sees_vhost("other"));
        assert!(monitoring.sees_connection_of("bob") && !monitoring.closes_connection_of("bob"));
        assert!(monitoring.is_monitoring() && !management.is_monitoring());
        let admin = access(&["administrator"]);
        assert!(admin.is_administrator() && admin.is_monitoring() && admin.sees_vhost("other"));
        assert!(admin.is_policymaker() && !monitoring.is_policymaker());
        assert!(admin.closes_connection_of("bob"));
    }
}
