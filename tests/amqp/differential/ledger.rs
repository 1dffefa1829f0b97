//! The model of a scenario's messages on one broker: where each message is (live in its
//! queue or held by a channel, acknowledged, gone), what the clients wrote that the broker
//! may not have read yet, and what RabbitMQ's rules say may happen next. Each delivery is
//! checked against it as it is seen, and each check that fails is kept as a violation.
//!
//! The rules:
//! - a message is delivered only while it is live and no channel holds it; never after an
//!   acknowledgement the broker certainly read (a round trip on the channel after it, or a
//!   close), nor after a rollback or a basic.return;
//! - `redelivered` is set on every delivery after the first, and on no first delivery —
//!   unless a delivery may have been in flight to a channel that closed (then either);
//! - at the end every published message is acknowledged or still in its queue, except what
//!   a cut socket made uncertain: acknowledgements and unconfirmed publishes written before
//!   the cut and not known to be read.

use super::ops::CHANNELS;
use std::collections::{BTreeMap, HashSet};

/// A delivery a channel holds (not acknowledged yet).
#[derive(Debug)]
pub struct Held {
    /// Its delivery tag on the channel.
    pub tag: u64,
    /// The message's body (its name).
    pub body: String,
    /// The consumer it came to, `None` for basic.get.
    pub consumer: Option<u64>,
}

/// Where a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In its queue or held by a channel.
    Live,
    /// Acknowledged (or rejected without requeue) by a write the broker has not certainly
    /// read yet.
    Acking,
    /// Acknowledged by a write a cut may have lost: it may come back.
    MaybeAcked,
    /// Acknowledged, rejected or taken without acknowledgement, for certain.
    Gone,
    /// Rolled back or returned: never in a queue.
    Never,
}

/// Whether a message was delivered before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    No,
    /// It may have been delivered to a channel that closed before the client read it.
    Maybe,
    Yes,
}

/// One message of the scenario.
#[derive(Debug)]
struct Msg {
    /// Its queue.
    queue: usize,
    state: State,
    /// Whether the broker has it for certain: not published just before a cut without a
    /// confirm (or seen since).
    sure: bool,
    seen: Seen,
}

/// One delivery as a client saw it.
pub struct Delivery<'a> {
    /// The channel slot it came on.
    pub slot: usize,
    pub tag: u64,
    pub body: &'a str,
    pub redelivered: bool,
    /// The consumer it came to, `None` for basic.get.
    pub consumer: Option<u64>,
    /// Taken without acknowledgement (no-ack basic.get, the final drain).
    pub no_ack: bool,
}

/// How a channel ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Closed after the broker read everything its client wrote (a close, an exception,
    /// a flushed cut).
    Read,
    /// Cut: what its client wrote since its last round trip may be lost.
    Cut,
}

/// The messages of one run.
#[derive(Default)]
pub struct Ledger {
    /// Every message published, by body.
    msgs: BTreeMap<String, Msg>,
    /// The deliveries each channel slot holds, in delivery-tag order.
    held: [Vec<Held>; CHANNELS],
    /// Acknowledgements each slot wrote that the broker may not have read yet.
    acking: [Vec<String>; CHANNELS],
    /// Publishes without a confirm each slot made since the run last settled.
    unsettled: [Vec<String>; CHANNELS],
    /// Whether a cut made any outcome uncertain (after that, runs on two brokers may
    /// legitimately part).
    uncertain: bool,
    /// What broke the rules, each a sentence.
    violations: Vec<String>,
    /// The step being run, for the violations' sentences.
    step: String,
}

impl Ledger {
    /// Names the step that the following events belong to.
    pub fn at(&mut self, step: String) {
        self.step = step;
    }

    /// Records a rule broken at the current step.
    pub fn violation(&mut self, what: String) {
        self.violations.push(format!("{}: {what}", self.step));
    }

    /// Every rule broken.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Whether a cut made an outcome uncertain.
    pub fn uncertain(&self) -> bool {
        self.uncertain
    }

    /// A message published to `queue` on `slot`: `confirmed` by a confirm or a commit,
    /// or (`None`) published without waiting, so at risk until the run settles or the
    /// channel makes a round trip; a confirm that did not come makes it uncertain.
    pub fn published(&mut self, slot: usize, body: String, queue: usize, confirmed: Option<bool>) {
        if confirmed.is_none() {
            self.unsettled[slot].push(body.clone());
        }
        let sure = confirmed != Some(false);
        self.uncertain |= !sure;
        let msg = Msg {
            queue,
            state: State::Live,
            sure,
            seen: Seen::No,
        };
        self.msgs.insert(body, msg);
    }

    /// A message rolled back: it must never be delivered.
    pub fn rolled_back(&mut self, body: String, queue: usize) {
        let msg = Msg {
            queue,
            state: State::Never,
            sure: true,
            seen: Seen::No,
        };
        self.msgs.insert(body, msg);
    }

    /// Checks a delivery, and records the channel's hold on it; the trace's token for it:
    /// the body and `r` (redelivered), `-` (first delivery) or `?` (either may be right).
    pub fn delivered(&mut self, d: Delivery<'_>) -> String {
        let holder = self.holder(d.body);
        let Some(msg) = self.msgs.get_mut(d.body) else {
            self.violation(format!("unknown message '{}' delivered", d.body));
            return format!("{}!", d.body);
        };
        let mut broken = Vec::new();
        match msg.state {
            State::Live => {
                if let Some(other) = holder {
                    broken.push(format!(
                        "delivered on ch{} while ch{other} holds it",
                        d.slot
                    ));
                }
            }
            // The cut lost its acknowledgement: legitimately back.
            State::MaybeAcked => {}
            State::Acking | State::Gone => {
                broken.push("delivered again after it was acknowledged".to_owned());
            }
            State::Never => broken.push("delivered, but it was rolled back".to_owned()),
        }
        let flag = match (msg.seen, d.redelivered) {
            (Seen::Yes, false) => {
                broken.push("delivered again without the redelivered flag".to_owned());
                "-"
            }
            (Seen::No, true) => {
                broken.push("flagged redelivered on its first delivery".to_owned());
                "r"
            }
            (Seen::Maybe, _) => "?",
            (_, true) => "r",
            (_, false) => "-",
        };
        msg.seen = Seen::Yes;
        // Seen, so the broker has it.
        msg.sure = true;
        if d.no_ack {
            msg.state = State::Gone;
        } else {
            msg.state = State::Live;
            self.held[d.slot].push(Held {
                tag: d.tag,
                body: d.body.to_owned(),
                consumer: d.consumer,
            });
        }
        for what in broken {
            self.violation(format!("{} {what}", d.body));
        }
        format!("{}{flag}", d.body)
    }

    /// The slot holding `body`, if one does.
    fn holder(&self, body: &str) -> Option<usize> {
        self.held
            .iter()
            .position(|held| held.iter().any(|h| h.body == body))
    }

    /// The delivery tag to answer for the `pick`-th delivery `slot` holds (modulo their
    /// number) and the bodies the answer covers (with `multiple`, every earlier one too);
    /// `None` when the slot holds nothing.
    pub fn pick(&self, slot: usize, pick: usize, multiple: bool) -> Option<(u64, Vec<String>)> {
        let held = &self.held[slot];
        if held.is_empty() {
            return None;
        }
        let i = pick % held.len();
        let first = if multiple { 0 } else { i };
        let bodies = held[first..=i].iter().map(|h| h.body.clone()).collect();
        Some((held[i].tag, bodies))
    }

    /// `slot` answered the deliveries of `bodies`: requeued (live again) or acknowledged
    /// (an ack, or a nack or reject without requeue).
    pub fn answered(&mut self, slot: usize, bodies: &[String], requeue: bool) {
        self.held[slot].retain(|h| !bodies.contains(&h.body));
        for body in bodies {
            let msg = self.msgs.get_mut(body).unwrap();
            if requeue {
                msg.state = State::Live;
            } else {
                msg.state = State::Acking;
                self.acking[slot].push(body.clone());
            }
        }
    }

    /// `slot` made a round trip: the broker read everything it wrote before.
    pub fn synced(&mut self, slot: usize) {
        for body in std::mem::take(&mut self.acking[slot]) {
            self.msgs.get_mut(&body).unwrap().state = State::Gone;
        }
        self.unsettled[slot].clear();
    }

    /// The run settled: every publish made so far reached its queue.
    pub fn settled(&mut self) {
        self.unsettled.iter_mut().for_each(Vec::clear);
    }

    /// basic.recover on `slot`: what it holds is live again.
    pub fn recovered(&mut self, slot: usize) {
        self.synced(slot);
        self.held[slot].clear();
    }

    /// `slot` ended as `ending` says: what it holds is live again. When deliveries to its
    /// consumer of `in_flight` may have been on their way, the queue's undelivered messages
    /// may have been delivered unseen.
    pub fn ended(&mut self, slot: usize, ending: Ending, in_flight: Option<usize>) {
        match ending {
            Ending::Read => self.synced(slot),
            Ending::Cut => {
                for body in std::mem::take(&mut self.acking[slot]) {
                    self.msgs.get_mut(&body).unwrap().state = State::MaybeAcked;
                    self.uncertain = true;
                }
                for body in std::mem::take(&mut self.unsettled[slot]) {
                    self.msgs.get_mut(&body).unwrap().sure = false;
                    self.uncertain = true;
                }
            }
        }
        self.held[slot].clear();
        if let Some(queue) = in_flight {
            let held: HashSet<&str> = self.held.iter().flatten().map(|h| &*h.body).collect();
            for (body, msg) in &mut self.msgs {
                if msg.queue == queue
                    && msg.state == State::Live
                    && msg.seen == Seen::No
                    && !held.contains(body.as_str())
                {
                    msg.seen = Seen::Maybe;
                }
            }
        }
    }

    /// The deliveries `slot` holds, in tag order.
    pub fn held(&self, slot: usize) -> &[Held] {
        &self.held[slot]
    }

    /// How many deliveries of consumer `consumer` `slot` holds.
    pub fn held_by_consumer(&self, slot: usize, consumer: u64) -> usize {
        self.held[slot]
            .iter()
            .filter(|h| h.consumer == Some(consumer))
            .count()
    }

    /// How many messages of `queue` channels hold.
    pub fn held_of(&self, queue: usize) -> usize {
        self.held
            .iter()
            .flatten()
            .filter(|h| self.msgs[&h.body].queue == queue)
            .count()
    }

    /// The least and the most messages `queue` may hold, ready or held: the live messages
    /// the broker certainly has, and those a cut made uncertain.
    pub fn expected(&self, queue: usize) -> (usize, usize) {
        let of_queue = self.msgs.values().filter(|m| m.queue == queue);
        let (mut least, mut most) = (0, 0);
        for msg in of_queue {
            match msg.state {
                State::Live if msg.sure => (least, most) = (least + 1, most + 1),
                State::Live | State::MaybeAcked => most += 1,
                _ => {}
            }
        }
        (least, most)
    }

    /// After the final drain: every message the broker certainly has and nobody
    /// acknowledged must have been in its queue.
    pub fn check_nothing_left(&mut self) {
        let left: Vec<String> = (self.msgs.iter())
            .filter(|(_, m)| m.state == State::Live && m.sure)
            .map(|(body, m)| format!("{body} (q{})", m.queue))
            .collect();
        if !left.is_empty() {
            self.violation(format!(
                "lost or stranded (published, never acknowledged, not in its queue at the \
                 end): {}",
                left.join(", ")
            ));
        }
    }
}
