//! A share group's membership (KIP-932's ShareGroupHeartbeat) as a pure state machine: no
//! I/O, no clocks (every call takes `now`).
//!
//! A share group has no revocation dance: records, not partitions, are what members hold,
//! so every change of membership or of the subscribed topics bumps the **group epoch** and
//! every member takes its new assignment on its next heartbeat. The assignment is Kafka's
//! simple one: with no more members than a topic's partitions, each partition goes to one
//! member; with more, every member gets a partition and several members share each.
//!
//! A member names its own id (KIP-1082) and joins with epoch 0; it leaves with -1. A
//! heartbeat of an unknown member is `UNKNOWN_MEMBER_ID` (the client joins again), one with
//! an epoch other than the member's `FENCED_MEMBER_EPOCH`. A member silent for the session
//! timeout is removed ([`ShareGroup::expire`]); what it held then goes back to the group.

use kafka_protocol::ResponseError;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The member epoch a member joins with.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The member epoch a member leaves with.
pub(crate) const LEAVE_EPOCH: i32 = -1;

/// A topic as the assignment names it: its UUID and partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicShape {
    /// Its UUID.
    pub uuid: [u8; 16],
    /// How many partitions it has.
    pub partitions: i32,
}

/// Partitions by topic name.
pub(crate) type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// One member.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// Its epoch: the group epoch of the latest assignment it was sent.
    pub epoch: i32,
    /// The topics it subscribed to.
    pub subscribed: BTreeSet<String>,
    /// Its assignment at the group epoch (sent on its next heartbeat when newer than its
    /// epoch).
    pub assigned: Assignment,
    /// When its session ends unless it heartbeats.
    pub expires: Instant,
    /// Its client id and host, for ShareGroupDescribe.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its rack, if it named one.
    pub rack_id: Option<String>,
}

/// A heartbeat as the group sees it.
#[derive(Debug, Clone)]
pub(crate) struct Heartbeat {
    /// The member's id.
    pub member_id: String,
    /// Its epoch (0: join, -1: leave).
    pub member_epoch: i32,
    /// The topics it subscribes to, when it says (`None`: unchanged).
    pub subscribed: Option<Vec<String>>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
}

/// What a heartbeat is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    /// The member's epoch after it (-1 after a leave).
    pub member_epoch: i32,
    /// Its assignment, when it changed or the member joined.
    pub assignment: Option<Assignment>,
}

/// A share group's members.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareGroup {
    /// Bumped by every change of membership, subscription or partition count.
    pub epoch: i32,
    /// The members, by id.
    pub members: BTreeMap<String, Member>,
    /// The topics the current assignment was computed from (name → shape), to see when
    /// a subscribed topic grows, appears or goes.
    shapes: BTreeMap<String, TopicShape>,
}

impl ShareGroup {
    /// Applies `heartbeat` at `now` with `session` as the session timeout; `shape` looks a
    /// topic up. Returns the answer, or Kafka's error for it.
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID`, `FENCED_MEMBER_EPOCH` or `INVALID_REQUEST` as the module says.
    pub(crate) fn heartbeat(
        &mut self,
        heartbeat: Heartbeat,
        now: Instant,
        session: Duration,
        shape: &dyn Fn(&str) -> Option<TopicShape>,
    ) -> Result<Answer, (ResponseError, String)> {
        let id = heartbeat.member_id.clone();
        if id.is_empty() {
            return Err((
                ResponseError::InvalidRequest,
                "MemberId can't be empty.".into(),
            ));
        }
        match heartbeat.member_epoch {
            LEAVE_EPOCH => {
                if self.members.remove(&id).is_some() {
                    self.reassign(shape);
                }
                return Ok(Answer {
                    member_epoch: LEAVE_EPOCH,
                    assignment: None,
                });
            }
            JOIN_EPOCH => {
                let subscribed = heartbeat.subscribed.clone().ok_or_else(|| {
                    (
                        ResponseError::InvalidRequest,
                        "SubscribedTopicNames must be set in first request.".to_owned(),
                    )
                })?;
                self.members.insert(
                    id.clone(),
                    Member {
                        epoch: 0,
                        subscribed: subscribed.into_iter().collect(),
                        assigned: Assignment::new(),
                        expires: now + session,
                        client_id: heartbeat.client_id,
                        client_host: heartbeat.client_host,
                        rack_id: heartbeat.rack_id,
                    },
                );
                self.reassign(shape);
            }
            epoch => {
                let Some(member) = self.members.get_mut(&id) else {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Member {id} is not a member of the group."),
                    ));
                };
                if epoch != member.epoch {
                    return Err((
                        ResponseError::FencedMemberEpoch,
                        format!(
                            "The share group member has a epoch ({epoch}) which is not the member's epoch ({}).",
                            member.epoch
                        ),
                    ));
                }
                member.expires = now + session;
                let changed = heartbeat
                    .subscribed
                    .map(|s| s.into_iter().collect::<BTreeSet<_>>())
                    .filter(|s| *s != member.subscribed);
                if let Some(subscribed) = changed {
                    member.subscribed = subscribed;
                    self.reassign(shape);
                } else if self.shapes_changed(shape) {
                    self.reassign(shape);
                }
            }
        }
        let epoch = self.epoch;
        let member = self
            .members
            .get_mut(&id)
            .expect("the member is in the group");
        let moved = member.epoch != epoch;
        member.epoch = epoch;
        Ok(Answer {
            member_epoch: epoch,
            assignment: moved.then(|| member.assigned.clone()),
        })
    }

    /// Removes the members whose session ended by `now`; returns their ids.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        shape: &dyn Fn(&str) -> Option<TopicShape>,
    ) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.expires <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
        }
        if !gone.is_empty() {
            self.reassign(shape);
        }
        gone
    }

    /// Whether a subscribed topic appeared, went or changed its partitions since the
    /// assignment was computed.
    fn shapes_changed(&self, shape: &dyn Fn(&str) -> Option<TopicShape>) -> bool {
        let now = self.current_shapes(shape);
        now != self.shapes
    }

    fn current_shapes(
        &self,
        shape: &dyn Fn(&str) -> Option<TopicShape>,
    ) -> BTreeMap<String, TopicShape> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter())
            .filter_map(|t| Some((t.clone(), shape(t)?)))
            .collect()
    }

    /// A new group epoch and every member's assignment at it.
    fn reassign(&mut self, shape: &dyn Fn(&str) -> Option<TopicShape>) {
        self.epoch += 1;
        self.shapes = self.current_shapes(shape);
        let mut assigned: BTreeMap<String, Assignment> = self
            .members
            .keys()
            .map(|id| (id.clone(), Assignment::new()))
            .collect();
        for (topic, shape) in &self.shapes {
            let members: Vec<&String> = self
                .members
                .iter()
                .filter(|(_, m)| m.subscribed.contains(topic))
                .map(|(id, _)| id)
                .collect();
            for (member, partition) in spread(members.len(), shape.partitions) {
                assigned
                    .get_mut(members[member])
                    .expect("every member has an entry")
                    .entry(topic.clone())
                    .or_default()
                    .insert(partition);
            }
        }
        for (id, member) in &mut self.members {
            member.assigned = assigned.remove(id).unwrap_or_default();
        }
    }

    /// Every partition some member is assigned.
    #[cfg(test)]
    pub(crate) fn assigned_partitions(&self) -> BTreeSet<(String, i32)> {
        self.members
            .values()
            .flat_map(|m| {
                m.assigned
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            })
            .collect()
    }
}

/// Which member (by index) gets which partition: each partition to one member while there
/// are no more members than partitions, else each member one partition, partitions shared.
fn spread(members: usize, partitions: i32) -> Vec<(usize, i32)> {
    let partitions = usize::try_from(partitions).unwrap_or(0);
    if members == 0 || partitions == 0 {
        return Vec::new();
    }
    let pairs = members.max(partitions);
    (0..pairs)
        .map(|i| (i % members, (i % partitions) as i32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Duration = Duration::from_secs(45);

    fn shapes(name: &str) -> Option<TopicShape> {
        match name {
            "six" => Some(TopicShape {
                uuid: [6; 16],
                partitions: 6,
            }),
            "one" => Some(TopicShape {
                uuid: [1; 16],
                partitions: 1,
            }),
            _ => None,
        }
    }

    fn join(id: &str, topics: &[&str]) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: JOIN_EPOCH,
            subscribed: Some(topics.iter().map(|t| (*t).to_owned()).collect()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn beat(id: &str, epoch: i32) -> Heartbeat {
        Heartbeat {
            member_epoch: epoch,
            subscribed: None,
            ..join(id, &[])
        }
    }

    #[test]
    fn three_members_split_six_partitions_and_a_leave_gives_them_back() {
        let now = Instant::now();
        let mut g = ShareGroup::default();
        for id in ["a", "b", "c"] {
            g.heartbeat(join(id, &["six"]), now, SESSION, &shapes)
                .unwrap();
        }
        let epoch = g.epoch;
        let answer = g.heartbeat(beat("a", 1), now, SESSION, &shapes).unwrap();
        assert_eq!(
            answer.member_epoch, epoch,
            "a member moves to the group epoch"
        );
        let mine = answer.assignment.expect("a new epoch sends the assignment");
        assert_eq!(mine["six"].len(), 2);
        let all: BTreeSet<_> = g.assigned_partitions();
        assert_eq!(all.len(), 6, "every partition is assigned");
        g.heartbeat(beat("c", LEAVE_EPOCH), now, SESSION, &shapes)
            .unwrap();
        let a = g
            .heartbeat(beat("a", epoch), now, SESSION, &shapes)
            .unwrap();
        assert_eq!(a.assignment.unwrap()["six"].len(), 3);
        let again = g
            .heartbeat(beat("a", a.member_epoch), now, SESSION, &shapes)
            .unwrap();
        assert_eq!(
            again.assignment, None,
            "an unchanged assignment is not sent"
        );
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let now = Instant::now();
        let mut g = ShareGroup::default();
        for id in ["a", "b", "c"] {
            g.heartbeat(join(id, &["one"]), now, SESSION, &shapes)
                .unwrap();
        }
        for m in g.members.values() {
            assert_eq!(m.assigned["one"], BTreeSet::from([0]));
        }
    }

    #[test]
    fn unknown_members_stale_epochs_and_silent_members() {
        let now = Instant::now();
        let mut g = ShareGroup::default();
        let unknown = g
            .heartbeat(beat("x", 3), now, SESSION, &shapes)
            .unwrap_err();
        assert_eq!(unknown.0, ResponseError::UnknownMemberId);
        g.heartbeat(join("a", &["six"]), now, SESSION, &shapes)
            .unwrap();
        let fenced = g
            .heartbeat(beat("a", 7), now, SESSION, &shapes)
            .unwrap_err();
        assert_eq!(fenced.0, ResponseError::FencedMemberEpoch);
        let b = g
            .heartbeat(join("b", &["six"]), now, SESSION, &shapes)
            .unwrap();
        let later = now + Duration::from_secs(30);
        g.heartbeat(beat("b", b.member_epoch), later, SESSION, &shapes)
            .unwrap();
        assert_eq!(g.expire(now + SESSION, &shapes), vec!["a".to_owned()]);
        assert_eq!(g.members["b"].assigned["six"].len(), 6);
        let empty = Heartbeat {
            member_id: String::new(),
            ..join("", &["six"])
        };
        let refused = g.heartbeat(empty, now, SESSION, &shapes).unwrap_err();
        assert_eq!(refused.0, ResponseError::InvalidRequest);
    }
}
