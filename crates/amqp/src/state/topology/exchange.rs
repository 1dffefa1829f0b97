//! Exchanges: their kinds, their settings, and the ones every virtual host has from the
//! start (the default exchange and the `amq.*` exchanges).

use crate::wire::errors::AmqpError;
use amq_protocol::types::FieldTable;

/// The type of a delayed-message exchange (the archived RabbitMQ plugin's): it holds a
/// message with a positive `x-delay` header for that many milliseconds, then routes it as
/// an exchange of its `x-delayed-type` argument would ([`crate::publishing::delayed`]).
pub(crate) const DELAYED_TYPE: &str = "x-delayed-message";

/// The argument naming how a delayed-message exchange routes.
const DELAYED_TYPE_ARG: &str = "x-delayed-type";

/// The header that delays a message published to a delayed-message exchange.
pub(crate) const DELAY_HEADER: &str = "x-delay";

/// The longest delay, ms (the plugin's, Erlang's longest timer: about 49.7 days); a longer
/// one, like a delay of zero or less, routes the message at once.
const MAX_DELAY_MS: i64 = u32::MAX as i64;

/// How long a message with `headers` is held by a delayed-message exchange, ms: its
/// `x-delay` header, as the plugin reads it (any integer type, a decimal string or a
/// float, truncated), when it is positive and at most [`MAX_DELAY_MS`].
pub fn delay_of(headers: Option<&FieldTable>) -> Option<u64> {
    use amq_protocol::types::AMQPValue;
    let value = headers?.inner().get(DELAY_HEADER)?;
    let delay = match value {
        AMQPValue::Float(f) => *f as i64,
        AMQPValue::Double(f) => *f as i64,
        AMQPValue::DecimalValue(d) => (f64::from(d.value) / 10f64.powi(i32::from(d.scale))) as i64,
        other => match super::args::integer(other) {
            Some(n) => n,
            None => super::args::text(other)?.parse().ok()?,
        },
    };
    (1..=MAX_DELAY_MS).contains(&delay).then_some(delay as u64)
}

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

    /// The routing kind of an exchange declared with type `name` and `arguments`, and
    /// whether it is a delayed-message exchange.
    ///
    /// # Errors
    /// 503 COMMAND_INVALID for a type Ferry does not have; 406 for a delayed-message
    /// exchange without a valid `x-delayed-type` (the plugin's text).
    pub fn declared(name: &str, arguments: &FieldTable) -> Result<(Self, bool), AmqpError> {
        if name != DELAYED_TYPE {
            return Ok((Self::parse(name)?, false));
        }
        match arguments
            .inner()
            .get(DELAYED_TYPE_ARG)
            .and_then(super::args::text)
        {
            Some(routing) if routing != DELAYED_TYPE => Ok((Self::parse(&routing)?, true)),
            _ => Err(AmqpError::precondition_failed(
                "Invalid argument, 'x-delayed-type' must be an existing exchange type",
            )),
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
    /// Whether it is a delayed-message exchange ([`DELAYED_TYPE`]) routing as `kind`.
    pub delayed: bool,
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
pub(crate) const RESERVED_PREFIX: &str = "amq.";

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
            delayed: false,
            durable: true,
            auto_delete: false,
            internal: false,
            arguments: FieldTable::default(),
            owner: 0,
            builtin: true,
        })
        .collect()
    }

    /// The type it was declared with: its kind's name, or [`DELAYED_TYPE`].
    pub fn type_name(&self) -> &'static str {
        if self.delayed {
            DELAYED_TYPE
        } else {
            self.kind.as_str()
        }
    }

    /// The exchange messages go to when this one routes them nowhere.
    pub(crate) fn alternate(&self) -> Option<String> {
        self.arguments
            .inner()
            .get("alternate-exchange")
            .and_then(super::args::text)
    }

    /// Checks that a redeclare asks for the same settings.
    ///
    /// # Errors
    /// 406 naming the first setting that differs, RabbitMQ's way.
    pub(crate) fn check_equivalent(&self, wanted: &Self, vhost: &str) -> Result<(), AmqpError> {
        let differ = |arg: &str,
                      received: &dyn std::fmt::Display,
                      current: &dyn std::fmt::Display| {
            Err(AmqpError::precondition_failed(format!(
                "inequivalent arg '{arg}' for exchange '{}' in vhost '{vhost}': received '{received}' but current is '{current}'",
                self.name
            )))
        };
        if self.delayed != wanted.delayed || (!self.delayed && self.kind != wanted.kind) {
            return differ("type", &wanted.type_name(), &self.type_name());
        }
        if self.kind != wanted.kind {
            return differ(DELAYED_TYPE_ARG, &wanted.kind.as_str(), &self.kind.as_str());
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
        let e = ExchangeKind::parse("x-consistent-hash").unwrap_err();
        assert_eq!(
            e.reply_text(),
            "COMMAND_INVALID - unknown exchange type 'x-consistent-hash'"
        );
        assert_eq!(ExchangeKind::parse("topic").unwrap(), ExchangeKind::Topic);
    }

    #[test]
    fn a_delayed_exchange_routes_as_its_delayed_type() {
        let args = |t: &str| {
            let mut table = FieldTable::default();
            table.insert(
                DELAYED_TYPE_ARG.into(),
                amq_protocol::types::AMQPValue::LongString(t.into()),
            );
            table
        };
        assert_eq!(
            ExchangeKind::declared(DELAYED_TYPE, &args("topic")).unwrap(),
            (ExchangeKind::Topic, true)
        );
        assert_eq!(
            ExchangeKind::declared("fanout", &args("topic")).unwrap(),
            (ExchangeKind::Fanout, false)
        );
        for missing in [FieldTable::default(), args(DELAYED_TYPE)] {
            assert_eq!(
                ExchangeKind::declared(DELAYED_TYPE, &missing)
                    .unwrap_err()
                    .reply_text(),
                "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange type"
            );
        }
        assert_eq!(
            ExchangeKind::declared(DELAYED_TYPE, &args("nope"))
                .unwrap_err()
                .reply_text(),
            "COMMAND_INVALID - unknown exchange type 'nope'"
        );
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
