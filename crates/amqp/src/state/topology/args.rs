//! Arguments tables: the queue arguments Ferry understands, how they are checked, and
//! when two declarations are equivalent (RabbitMQ's rule: a redeclare must repeat the
//! recognised arguments exactly, or it fails with 406).

use crate::wire::errors::AmqpError;
use amq_protocol::frame::WriteContext;
use amq_protocol::types::generation::gen_field_table;
use amq_protocol::types::parsing::parse_field_table;
use amq_protocol::types::{AMQPValue, FieldTable};
use std::fmt;

/// What a queue does when a message arrives while it holds `x-max-length` ready messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Dead-letter (or drop) the oldest ready message to make room.
    #[default]
    DropHead,
    /// Refuse the new message: a publisher in confirm mode gets basic.nack.
    RejectPublish,
}

impl Overflow {
    fn as_str(self) -> &'static str {
        match self {
            Self::DropHead => "drop-head",
            Self::RejectPublish => "reject-publish",
        }
    }
}

/// The queue type a client asked for; every type is a stage, so both behave alike (the
/// store replicates; there is nothing for `quorum` to add).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueType {
    /// `classic`, or no `x-queue-type`.
    #[default]
    Classic,
    /// `quorum`: must be durable and not exclusive, as in RabbitMQ.
    Quorum,
}

/// The recognised queue arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueArgs {
    /// `x-max-priority`: the stage's priority lanes (1–255).
    pub max_priority: Option<u8>,
    /// `x-message-ttl`: ms a message may wait in the queue.
    pub message_ttl: Option<u64>,
    /// `x-expires`: ms the queue may go unused before it is deleted.
    pub expires: Option<u64>,
    /// `x-max-length`: ready messages the queue holds at most.
    pub max_length: Option<u64>,
    /// `x-overflow`: what happens at `x-max-length`.
    pub overflow: Overflow,
    /// `x-dead-letter-exchange`: where rejected, expired and dropped messages go.
    pub dead_letter_exchange: Option<String>,
    /// `x-dead-letter-routing-key`: the routing key they go with (default: their own).
    pub dead_letter_routing_key: Option<String>,
    /// `x-single-active-consumer`: one consumer at a time receives.
    pub single_active_consumer: bool,
    /// `x-queue-type`.
    pub queue_type: QueueType,
    /// `x-delivery-limit`: returns after which a returned message is dead-lettered (-1:
    /// never); see [`QueueArgs::stage_delivery_limit`].
    pub delivery_limit: Option<i64>,
    /// `x-consumer-timeout`: ms a delivery from this queue may stay unacknowledged before
    /// its channel is closed (instead of `amqp.consumer_timeout_ms`). Not part of a
    /// redeclare's equivalence check, as in RabbitMQ.
    pub consumer_timeout: Option<u64>,
}

/// One argument's value, for equivalence messages.
struct Shown<'a, T>(&'a Option<T>);

impl<T: fmt::Display> fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "'{v}'"),
            None => f.write_str("none"),
        }
    }
}

impl QueueArgs {
    /// Checks and extracts the recognised arguments of `table`; unknown ones are ignored,
    /// as RabbitMQ does.
    ///
    /// # Errors
    /// 406 naming the argument whose value is of the wrong type or out of range, 540 for
    /// a queue type Ferry does not implement.
    pub fn parse(table: &FieldTable) -> Result<Self, AmqpError> {
        let mut args = Self::default();
        for (key, value) in table {
            let key = key.as_str();
            match key {
                "x-max-priority" => {
                    let p = int_in(key, value, 0, 255)?;
                    args.max_priority = (p > 0).then_some(p as u8);
                }
                "x-message-ttl" => args.message_ttl = Some(int_in(key, value, 0, u32::MAX.into())?),
                "x-expires" => args.expires = Some(int_in(key, value, 1, u32::MAX.into())?),
                "x-max-length" => args.max_length = Some(int_in(key, value, 0, i64::MAX as u64)?),
                "x-delivery-limit" => {
                    let n = integer(value).ok_or_else(|| wrong_type(key, "an integer"))?;
                    if !(-1..=i64::from(u32::MAX - 1)).contains(&n) {
                        return Err(AmqpError::precondition_failed(format!(
                            "invalid arg '{key}': {n} must be between -1 and {}",
                            u32::MAX - 1
                        )));
                    }
                    args.delivery_limit = Some(n);
                }
                "x-consumer-timeout" => {
                    args.consumer_timeout = Some(int_in(key, value, 1, i64::MAX as u64)?);
                }
                "x-overflow" => {
                    args.overflow = match string(key, value)?.as_str() {
                        "drop-head" => Overflow::DropHead,
                        "reject-publish" => Overflow::RejectPublish,
                        other => {
                            return Err(AmqpError::precondition_failed(format!(
                                "invalid arg 'x-overflow': '{other}' is not 'drop-head' or 'reject-publish'"
                            )));
                        }
                    }
                }
                "x-dead-letter-exchange" => args.dead_letter_exchange = Some(string(key, value)?),
                "x-dead-letter-routing-key" => {
                    args.dead_letter_routing_key = Some(string(key, value)?);
                }
                "x-single-active-consumer" => match value {
                    AMQPValue::Boolean(b) => args.single_active_consumer = *b,
                    _ => return Err(wrong_type(key, "a boolean")),
                },
                "x-queue-type" => {
                    args.queue_type = match string(key, value)?.as_str() {
                        "classic" => QueueType::Classic,
                        "quorum" => QueueType::Quorum,
                        other => {
                            return Err(AmqpError::not_implemented(format!(
                                "queue type '{other}' is not supported; use 'classic' or 'quorum'"
                            )));
                        }
                    }
                }
                _ => {}
            }
        }
        if args.dead_letter_routing_key.is_some() && args.dead_letter_exchange.is_none() {
            return Err(AmqpError::precondition_failed(
                "invalid arg 'x-dead-letter-routing-key': it needs 'x-dead-letter-exchange'",
            ));
        }
        Ok(args)
    }

    /// Checks that a redeclare with `wanted` matches these arguments.
    ///
    /// # Errors
    /// 406 naming the first argument that differs, RabbitMQ's way:
    /// `inequivalent arg 'x-max-priority' for queue 'q' in vhost '/': received '5' but current is none`.
    pub(crate) fn check_equivalent(
        &self,
        wanted: &Self,
        queue: &str,
        vhost: &str,
    ) -> Result<(), AmqpError> {
        let differ = |arg: &str, received: String, current: String| {
            Err(AmqpError::precondition_failed(format!(
                "inequivalent arg '{arg}' for queue '{queue}' in vhost '{vhost}': received {received} but current is {current}"
            )))
        };
        macro_rules! same {
            ($field:ident, $name:literal) => {
                if self.$field != wanted.$field {
                    return differ(
                        $name,
                        Shown(&wanted.$field).to_string(),
                        Shown(&self.$field).to_string(),
                    );
                }
            };
        }
        same!(max_priority, "x-max-priority");
        same!(message_ttl, "x-message-ttl");
        same!(expires, "x-expires");
        same!(max_length, "x-max-length");
        same!(delivery_limit, "x-delivery-limit");
        same!(dead_letter_exchange, "x-dead-letter-exchange");
        same!(dead_letter_routing_key, "x-dead-letter-routing-key");
        if self.overflow != wanted.overflow {
            return differ(
                "x-overflow",
                format!("'{}'", wanted.overflow.as_str()),
                format!("'{}'", self.overflow.as_str()),
            );
        }
        if self.single_active_consumer != wanted.single_active_consumer {
            return differ(
                "x-single-active-consumer",
                format!("'{}'", wanted.single_active_consumer),
                format!("'{}'", self.single_active_consumer),
            );
        }
        if self.queue_type != wanted.queue_type {
            return differ(
                "x-queue-type",
                format!("'{:?}'", wanted.queue_type).to_lowercase(),
                format!("'{:?}'", self.queue_type).to_lowercase(),
            );
        }
        Ok(())
    }
}

/// A quorum queue's delivery limit when it names none: RabbitMQ 4's default.
pub(crate) const QUORUM_DELIVERY_LIMIT: i64 = 20;

impl QueueArgs {
    /// The priority lanes of the queue's stage: `x-max-priority`; a quorum queue without it
    /// has two (normal and high), as RabbitMQ 4's quorum queues do.
    pub fn stage_max_priority(&self) -> u8 {
        match (self.max_priority, self.queue_type) {
            (Some(p), _) => p,
            (None, QueueType::Quorum) => 1,
            (None, QueueType::Classic) => 0,
        }
    }

    /// The stage priority a message of `priority` is stored with: its own, or for a quorum
    /// queue without `x-max-priority` RabbitMQ 4's two levels (above 4: high).
    pub fn lane_priority(&self, priority: u8) -> u8 {
        match (self.max_priority, self.queue_type) {
            (None, QueueType::Quorum) => u8::from(priority > 4),
            _ => priority,
        }
    }

    /// The deliveries the queue's stage allows a message before a return dead-letters it
    /// (0: no limit). RabbitMQ dead-letters a message once it was returned more often
    /// than `x-delivery-limit`, so a message is delivered the limit plus one times; a
    /// quorum queue without the argument has [`QUORUM_DELIVERY_LIMIT`], and -1 is no
    /// limit (RabbitMQ 4).
    pub fn stage_delivery_limit(&self) -> u32 {
        let limit = match (self.delivery_limit, self.queue_type) {
            (Some(n), _) => n,
            (None, QueueType::Quorum) => QUORUM_DELIVERY_LIMIT,
            (None, QueueType::Classic) => -1,
        };
        u32::try_from(limit + 1).unwrap_or(0)
    }
}

impl QueueArgs {
    /// Writes the recognised arguments into `table`, as they are stored.
    pub fn write_into(&self, table: &mut FieldTable) {
        use amq_protocol::types::AMQPValue::{Boolean, LongLongInt, LongString};
        let mut int = |k: &str, v: Option<u64>| {
            if let Some(v) = v {
                table.insert(k.into(), LongLongInt(v as i64));
            }
        };
        int("x-max-priority", self.max_priority.map(u64::from));
        int("x-message-ttl", self.message_ttl);
        int("x-expires", self.expires);
        int("x-max-length", self.max_length);
        int("x-consumer-timeout", self.consumer_timeout);
        if let Some(limit) = self.delivery_limit {
            table.insert("x-delivery-limit".into(), LongLongInt(limit));
        }
        if self.overflow == Overflow::RejectPublish {
            table.insert("x-overflow".into(), LongString("reject-publish".into()));
        }
        if let Some(x) = &self.dead_letter_exchange {
            table.insert(
                "x-dead-letter-exchange".into(),
                LongString(x.as_str().into()),
            );
        }
        if let Some(k) = &self.dead_letter_routing_key {
            table.insert(
                "x-dead-letter-routing-key".into(),
                LongString(k.as_str().into()),
            );
        }
        if self.single_active_consumer {
            table.insert("x-single-active-consumer".into(), Boolean(true));
        }
        if self.queue_type == QueueType::Quorum {
            table.insert("x-queue-type".into(), LongString("quorum".into()));
        }
    }
}

/// An integer argument within `[min, max]`.
fn int_in(key: &str, value: &AMQPValue, min: u64, max: u64) -> Result<u64, AmqpError> {
    let n = integer(value).ok_or_else(|| wrong_type(key, "an integer"))?;
    u64::try_from(n)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            AmqpError::precondition_failed(format!(
                "invalid arg '{key}': {n} must be between {min} and {max}"
            ))
        })
}

/// The value of any AMQP integer type.
pub fn integer(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(v) => (*v).into(),
        AMQPValue::ShortShortUInt(v) => (*v).into(),
        AMQPValue::ShortInt(v) => (*v).into(),
        AMQPValue::ShortUInt(v) => (*v).into(),
        AMQPValue::LongInt(v) => (*v).into(),
        AMQPValue::LongUInt(v) => (*v).into(),
        AMQPValue::LongLongInt(v) => *v,
        AMQPValue::Timestamp(v) => i64::try_from(*v).ok()?,
        _ => return None,
    })
}

/// The text of a short or long string value (long strings must be UTF-8).
pub(crate) fn text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        AMQPValue::LongString(s) => String::from_utf8(s.as_bytes().to_vec()).ok(),
        _ => None,
    }
}

fn string(key: &str, value: &AMQPValue) -> Result<String, AmqpError> {
    text(value).ok_or_else(|| wrong_type(key, "a string"))
}

fn wrong_type(key: &str, expected: &str) -> AmqpError {
    AmqpError::precondition_failed(format!("invalid arg '{key}': it must be {expected}"))
}

/// A table as AMQP encodes it (a 4-byte length and the entries): how arguments are
/// stored.
pub fn encode_table(table: &FieldTable) -> Vec<u8> {
    match gen_field_table(table)(WriteContext::from(Vec::new())) {
        Ok(written) => written.into_inner().0,
        Err(e) => panic!("cannot encode an arguments table: {e:?}"),
    }
}

/// Decodes [`encode_table`]'s bytes; `None` when they do not parse.
pub fn decode_table(bytes: &[u8]) -> Option<FieldTable> {
    match parse_field_table(bytes) {
        Ok(([], table)) => Some(table),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, AMQPValue)]) -> FieldTable {
        let mut t = FieldTable::default();
        for (k, v) in entries {
            t.insert((*k).into(), v.clone());
        }
        t
    }

    #[test]
    fn recognised_arguments_are_parsed_from_any_integer_type() {
        let args = QueueArgs::parse(&table(&[
            ("x-max-priority", AMQPValue::ShortShortUInt(10)),
            ("x-message-ttl", AMQPValue::LongLongInt(60_000)),
            ("x-max-length", AMQPValue::LongInt(5)),
            ("x-overflow", AMQPValue::LongString("reject-publish".into())),
            (
                "x-dead-letter-exchange",
                AMQPValue::LongString("dlx".into()),
            ),
            ("x-single-active-consumer", AMQPValue::Boolean(true)),
            ("x-custom", AMQPValue::Void),
        ]))
        .unwrap();
        assert_eq!(args.max_priority, Some(10));
        assert_eq!(args.message_ttl, Some(60_000));
        assert_eq!(args.max_length, Some(5));
        assert_eq!(args.overflow, Overflow::RejectPublish);
        assert_eq!(args.dead_letter_exchange.as_deref(), Some("dlx"));
        assert!(args.single_active_consumer);
    }

    #[test]
    fn bad_values_fail_with_406_naming_the_argument() {
        let e =
            QueueArgs::parse(&table(&[("x-max-priority", AMQPValue::LongInt(300))])).unwrap_err();
        assert_eq!(
            e.reply_text(),
            "PRECONDITION_FAILED - invalid arg 'x-max-priority': 300 must be between 0 and 255"
        );
        let e = QueueArgs::parse(&table(&[(
            "x-message-ttl",
            AMQPValue::LongString("1".into()),
        )]))
        .unwrap_err();
        assert_eq!(e.text, "invalid arg 'x-message-ttl': it must be an integer");
        let e = QueueArgs::parse(&table(&[(
            "x-queue-type",
            AMQPValue::LongString("stream".into()),
        )]))
        .unwrap_err();
        assert_eq!(e.code.code(), 540);
    }

    #[test]
    fn inequivalent_redeclare_names_the_argument_like_rabbitmq() {
        let current = QueueArgs::default();
        let wanted = QueueArgs {
            max_priority: Some(5),
            ..QueueArgs::default()
        };
        assert_eq!(
            current
                .check_equivalent(&wanted, "q", "/")
                .unwrap_err()
                .text,
            "inequivalent arg 'x-max-priority' for queue 'q' in vhost '/': received '5' but current is none"
        );
        current
            .check_equivalent(&QueueArgs::default(), "q", "/")
            .unwrap();
    }

    #[test]
    fn tables_round_trip_through_their_encoding() {
        let t = table(&[
            ("k", AMQPValue::LongString("v".into())),
            ("n", AMQPValue::LongInt(3)),
        ]);
        assert_eq!(decode_table(&encode_table(&t)), Some(t));
        assert_eq!(decode_table(b"\x00\x00\x00\x05ab"), None);
    }
}
