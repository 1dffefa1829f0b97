//! The form every bridged message takes in a route's stages: the AMQP front's stage body
//! of the message ([`AmqpMessage::to_stage_body`]: exchange, routing key, properties,
//! body), so one encoding serves every path. A Kafka record is staged as its AMQP mapping (lossless both ways, see
//! [`super::mapping`]) and mapped back when it leaves for Kafka.

use super::mapping::amqp_to_kafka;
use bytes::Bytes;
use ferry_amqp::port::{AmqpMessage, UndecodableMessage};
use ferry_config::KeySource;
use ferry_kafka::port::KafkaRecord;
use ferry_stage::{Delivery, MessageId, NewMessage, Spill};

/// The stage message for an AMQP message; its priority picks the lane.
pub(crate) fn from_amqp(m: &AmqpMessage) -> NewMessage {
    NewMessage::new(m.to_stage_body()).priority(m.properties.priority().unwrap_or(0))
}

/// A staged message on its way to a destination.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    /// Its place in the destination stage.
    pub id: MessageId,
    /// The message.
    pub message: AmqpMessage,
    /// Whether it was handed to this destination before with an unknown outcome.
    pub redelivered: bool,
    /// When it was staged, ms since the epoch.
    pub staged_ms: u64,
    /// The spill its body is in, for a large message whose body was not read into
    /// `message.body` (which is then empty).
    pub spill: Option<Spill>,
    /// Whether the route's lease holder holds `spill` (written for this delivery, to be
    /// let go of by the transaction that stores the message) rather than the message's
    /// entry in the route's stage referencing it.
    pub holds_spill: bool,
    /// The form its destination stores it in (a Kafka record batch), when that is too large
    /// for one transaction: written to a spill held by the route's lease holder before the
    /// transaction that stores the message by reference to it and lets go of the hold
    /// ([`super::sink::InStoreSink::large_form`]).
    pub stored: Option<SpilledForm>,
}

/// A message's stored form, kept in a spill held by the route's lease holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpilledForm {
    /// The spill holding the whole form.
    pub spill: Spill,
    /// Its first bytes, which the destination keeps besides the reference (a batch's
    /// header): a copy, so the form itself is not kept in memory.
    pub head: Bytes,
}

impl Outgoing {
    /// Reads a delivery of a route stage.
    ///
    /// # Errors
    /// [`UndecodableMessage`] when the body is not a stored message.
    pub(crate) fn decode(d: &Delivery) -> Result<Self, UndecodableMessage> {
        Ok(Self {
            id: d.id,
            message: AmqpMessage::from_stage_body(d.body.clone())?,
            redelivered: d.redelivered(),
            staged_ms: d.envelope.enqueued_ms,
            spill: d.envelope.spill,
            holds_spill: false,
            stored: None,
        })
    }

    /// Message `index` of a batch a source writes straight to a destination on one of
    /// Ferry's fronts ([`super::route::RouteStages::stage_in`]): it has no place in a stage,
    /// so its id only tells it from the batch's others.
    pub(crate) fn direct(index: usize, message: AmqpMessage, now: u64) -> Self {
        let mut stamp = [0; 12];
        stamp[4..].copy_from_slice(&(index as u64).to_be_bytes());
        Self {
            id: MessageId { lane: 0, stamp },
            message,
            redelivered: false,
            staged_ms: now,
            spill: None,
            holds_spill: false,
            stored: None,
        }
    }

    /// The message-id a destination can deduplicate by: the message's own, or one
    /// derived from its place in the stage (`ferry-LANE-VERSIONSTAMP` in hex), which is
    /// the same on every attempt.
    pub(crate) fn message_id(&self) -> String {
        match self.message.properties.message_id() {
            Some(id) => id.as_str().to_owned(),
            None => {
                let hex: String = self.id.stamp.iter().map(|b| format!("{b:02x}")).collect();
                format!("ferry-{}-{hex}", self.id.lane)
            }
        }
    }

    /// The message as a Kafka record, its key made as `key` says.
    pub(crate) fn to_kafka(&self, key: KeySource) -> KafkaRecord {
        amqp_to_kafka(&self.message, key)
    }

    /// The spills the route's lease holder holds for this delivery, which the transaction
    /// that stores the message lets go of (or the worker, when the message is refused).
    pub(crate) fn held_spills(&self) -> impl Iterator<Item = Spill> + '_ {
        let body = self.spill.filter(|_| self.holds_spill);
        body.into_iter()
            .chain(self.stored.as_ref().map(|s| s.spill))
    }

    /// Body bytes, for the byte counters (a spilled body's too).
    pub(crate) fn len(&self) -> usize {
        match self.spill {
            Some(spill) => spill.len as usize,
            None => self.message.body.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::kafka_to_amqp;
    use amq_protocol::protocol::BasicProperties;
    use bytes::Bytes;
    use ferry_stage::Envelope;

    fn delivered(m: NewMessage) -> Delivery {
        Delivery {
            id: MessageId {
                lane: 3,
                stamp: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 1],
            },
            body: m.body,
            envelope: Envelope {
                body_len: 0,
                priority: 0,
                delivery_count: 2,
                enqueued_ms: 5,
                expires_ms: 0,
                dead_letter: None,
                spill: None,
            },
        }
    }

    #[test]
    fn an_amqp_message_round_trips_through_a_stage_body() {
        let m = AmqpMessage {
            exchange: "x".into(),
            routing_key: "k".into(),
            properties: BasicProperties::default().with_priority(7),
            body: Bytes::from_static(b"hello"),
        };
        let staged = from_amqp(&m);
        assert_eq!(staged.priority, 7);
        let out = Outgoing::decode(&delivered(staged)).unwrap();
        assert_eq!(out.message, m);
        assert!(out.redelivered);
        assert_eq!(
            out.message_id(),
            format!("ferry-3-{}01", "07".repeat(10) + "00")
        );
    }

    #[test]
    fn a_kafka_record_round_trips_through_a_stage_body() {
        let r = KafkaRecord {
            key: Some(Bytes::from_static(b"k")),
            value: None,
            headers: vec![("h".into(), None), ("h".into(), Some(b"v".to_vec()))],
            timestamp_ms: Some(42),
        };
        let mapped = kafka_to_amqp(&r, "");
        assert!(mapped.fallbacks.is_empty());
        let out = Outgoing::decode(&delivered(from_amqp(&mapped.message))).unwrap();
        assert_eq!(out.to_kafka(KeySource::RoutingKey), r);
    }

    #[test]
    fn a_foreign_body_is_an_error_not_a_panic() {
        assert!(Outgoing::decode(&delivered(NewMessage::new(b"\x09junk".to_vec()))).is_err());
    }
}
