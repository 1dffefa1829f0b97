//! Exchanges: their kinds, their settings, and the ones every virtual host has from the
//! start (the default exchange and the `amq.*` exchanges).

use crate::amqp::errors::AmqpError;
use amq_protocol::types::FieldTable;

/// How an exchange matches bindings against a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeKind {
    /// The binding key equals the routing key.
    Direct,
    /// Every binding.
    Fanout,
    /// The binding key is a pattern of dot-separated words with `*` and `#`.
    Topic,
    /// The binding's arguments match the message's headers (`x-match` all or any).
    Headers,
}

impl ExchangeKind {
    /// The kind named `name` in exchange.declare.
    ///
    /// # Errors
    /// 503 COMMAND_INVALID for a kind Ferry does not have.
    pub fn parse(name: &str) -> Result<Self, AmqpError> {
        match name {
            "direct" => Ok(Self::Direct),
            "fanout" => Ok(Self::Fanout),
            "topic" => Ok(Self::Topic),
            "headers" => Ok(Self::Headers),
            other => Err(AmqpError::command_invalid(format!(
                "unknown exchange type '{other}'"
            ))),
        }
    }

    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Fanout => "fanout",
            Self::Topic => "topic",
            Self::Headers => "headers",
        }
    }
}

/// An exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// Its name ("" is the default exchange).
    pub name: String,
    /// How it routes.
    pub kind: ExchangeKind,
    /// Whether it survives a restart.
    pub durable: bool,
    /// Whether it is deleted when its last binding (as a source) goes.
    pub auto_delete: bool,
    /// Whether publishers may not use it (only exchange-to-exchange bindings reach it).
    pub internal: bool,
    /// Its declaration arguments (`alternate-exchange` is the one Ferry acts on).
    pub arguments: FieldTable,
    /// The lease holder whose death removes a transient exchange (0: durable or built in).
    pub owner: u64,
    /// Whether it is one of the exchanges every virtual host has (never deleted or stored).
    pub builtin: bool,
}

/// The name prefix reserved for the server's exchanges and queues.
pub const RESERVED_PREFIX: &str = "amq.";

impl Exchange {
    /// The exchanges every virtual host has: the default exchange and the `amq.*` ones.
    pub fn builtins() -> Vec<Self> {
        [
            ("", ExchangeKind::Direct),
            ("amq.direct", ExchangeKind::Direct),
            ("amq.fanout", ExchangeKind::Fanout),
            ("amq.topic", ExchangeKind::Topic),
            ("amq.headers", ExchangeKind::Headers),
            ("amq.match", ExchangeKind::Headers),
        ]
        .into_iter()
        .map(|(name, kind)| Self {
            name: name.to_owned(),
            kind,
            durable: true,
            auto_delete: false,
            internal: false,
            arguments: FieldTable::default(),
            owner: 0,
            builtin: true,
        })
        .collect()
    }

    /// The exchange messages go to when this one routes them nowhere.
    pub fn alternate(&self) -> Option<String> {
        self.arguments
            .inner()
            .get("alternate-exchange")
            .and_then(super::args::text)
    }

    /// Checks that a redeclare asks for the same settings.
    ///
    /// # Errors
    /// 406 naming the first setting that differs, RabbitMQ's way.
    pub fn check_equivalent(&self, wanted: &Self, vhost: &str) -> Result<(), AmqpError> {
        let differ = |arg: &str,
                      received: &dyn std::fmt::Display,
                      current: &dyn std::fmt::Display| {
            Err(AmqpError::precondition_failed(format!(
                "inequivalent arg '{arg}' for exchange '{}' in vhost '{vhost}': received '{received}' but current is '{current}'",
                self.name
            )))
        };
        if self.kind != wanted.kind {
            return differ("type", &wanted.kind.as_str(), &self.kind.as_str());
        }
        if self.durable != wanted.durable {
            return differ("durable", &wanted.durable, &self.durable);
        }
        if self.auto_delete != wanted.auto_delete {
            return differ("auto_delete", &wanted.auto_delete, &self.auto_delete);
        }
        if self.internal != wanted.internal {
            return differ("internal", &wanted.internal, &self.internal);
        }
        if self.alternate() != wanted.alternate() {
            let show = |a: Option<String>| a.unwrap_or_else(|| "none".to_owned());
            return differ(
                "alternate-exchange",
                &show(wanted.alternate()),
                &show(self.alternate()),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kinds_are_command_invalid() {
        let e = ExchangeKind::parse("x-delayed-message").unwrap_err();
        assert_eq!(
            e.reply_text(),
            "COMMAND_INVALID - unknown exchange type 'x-delayed-message'"
        );
        assert_eq!(ExchangeKind::parse("topic").unwrap(), ExchangeKind::Topic);
    }

    #[test]
    fn every_vhost_has_the_default_and_amq_exchanges() {
        let names: Vec<String> = Exchange::builtins().into_iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "",
                "amq.direct",
                "amq.fanout",
                "amq.topic",
                "amq.headers",
                "amq.match"
            ]
        );
    }

    #[test]
    fn inequivalent_redeclare_names_the_setting() {
        let direct = Exchange::builtins().remove(1);
        let fanout = Exchange {
            kind: ExchangeKind::Fanout,
            ..direct.clone()
        };
        assert_eq!(
            direct.check_equivalent(&fanout, "/").unwrap_err().text,
            "inequivalent arg 'type' for exchange 'amq.direct' in vhost '/': received 'fanout' but current is 'direct'"
        );
    }
}
