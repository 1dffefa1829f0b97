//! Fetch sessions (KIP-227), as a pure state machine: a consumer of many partitions sends
//! them all once (a full fetch with epoch 0, which opens a session), then only what
//! changed — a partition whose fetch position moved, one added, one forgotten — each
//! request naming the session and its next epoch; the answer holds only the partitions
//! with records, an error, or a high watermark, last stable offset or log start that moved
//! since the session last reported them.
//!
//! Sessions live in memory on the instance that opened them (a client talks to its
//! partition leader; any other instance answers `FETCH_SESSION_ID_NOT_FOUND` and the client
//! starts over with a full fetch, as after a broker restart). Kafka's rules: epoch -1
//! closes the session named (if any) and fetches without one; epoch 0 closes it and opens a
//! new one; a later epoch must be the session's next (`INVALID_FETCH_SESSION_EPOCH`
//! otherwise). At most [`SLOTS`] sessions (Kafka's `max.incremental.fetch.session.cache.
//! slots`); when all are taken, the least recently used one is evicted if idle for
//! [`EVICTABLE_AFTER`], else the new fetch goes without a session (session id 0). A
//! partition that returned records moves to the end of its session, so under a byte limit
//! every partition gets its turn, as in Kafka.
//!
//! Sessions hold positions only: every fetch still checks the caller's Read permission on
//! each topic, so a session id carries no authority.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most sessions an instance keeps.
pub(crate) const SLOTS: usize = 1000;
/// How long a session must have been idle before a new one may evict it.
pub(crate) const EVICTABLE_AFTER: Duration = Duration::from_secs(120);
/// The epoch of a fetch that opens a session.
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch that closes its session (or uses none).
const FINAL_EPOCH: i32 = -1;

/// A partition, by topic name and index.
pub(crate) type PartitionId = (String, i32);

/// Where a fetch reads one partition from, and how much of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The offset to read from.
    pub offset: i64,
    /// The most bytes to return from it.
    pub max_bytes: i32,
    /// The leader epoch the client knows (-1: none); another than the partition's is
    /// refused ([`crate::partition::leader_epochs::check`]).
    pub leader_epoch: i32,
}

/// What an answer tells the client of one partition besides its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable: i64,
    /// The log start offset.
    pub log_start: i64,
}

/// One partition's answer, as [`FetchSessions::finish`] judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The partition.
    pub id: PartitionId,
    /// Its offsets as answered.
    pub reported: Reported,
    /// Whether records were returned.
    pub records: bool,
    /// Whether it was answered with an error.
    pub error: bool,
}

/// Why a fetch's session cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// No session has this id here (`FETCH_SESSION_ID_NOT_FOUND`).
    #[error("fetch session {0} is not known here")]
    NotFound(i32),
    /// The epoch is not the session's next (`INVALID_FETCH_SESSION_EPOCH`).
    #[error("fetch session {session} expects epoch {expected}, not {got}")]
    InvalidEpoch {
        /// The session.
        session: i32,
        /// The epoch it expects.
        expected: i32,
        /// The epoch asked.
        got: i32,
    },
}

/// What a fetch reads, and how it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Every partition the request names, each answered; `session` is the session opened
    /// (0: none).
    Full {
        /// The session id to answer.
        session: i32,
    },
    /// Every partition of the session, in its order; the answer holds the changed ones.
    Incremental {
        /// The session.
        session: i32,
        /// Its partitions.
        partitions: Vec<(PartitionId, Position)>,
    },
}

/// One partition of a session.
#[derive(Debug)]
struct Cached {
    id: PartitionId,
    position: Position,
    /// What the session's last answer said of it (`None`: not answered yet).
    reported: Option<Reported>,
}

#[derive(Debug)]
struct Session {
    /// The epoch its next request must carry.
    next_epoch: i32,
    partitions: Vec<Cached>,
    last_used: Instant,
}

/// An instance's fetch sessions.
#[derive(Debug)]
pub struct FetchSessions {
    sessions: Mutex<HashMap<i32, Session>>,
    slots: usize,
}

impl Default for FetchSessions {
    fn default() -> Self {
        Self::with_slots(SLOTS)
    }
}

impl FetchSessions {
    /// Sessions with room for `slots` of them.
    pub fn with_slots(slots: usize) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            slots,
        }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies a fetch of `session` at `epoch` naming `requested` (in request order) and
    /// `forgotten` at `now`: the plan to read and answer it.
    ///
    /// # Errors
    /// [`SessionError`] for an incremental fetch of an unknown session or a wrong epoch.
    pub fn begin(
        &self,
        session: i32,
        epoch: i32,
        requested: Vec<(PartitionId, Position)>,
        forgotten: &[PartitionId],
        now: Instant,
    ) -> Result<Plan, SessionError> {
        let mut sessions = self.sessions.lock();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if session != 0 {
                sessions.remove(&session);
            }
            if epoch == FINAL_EPOCH || !self.make_room(&mut sessions, now) {
                return Ok(Plan::Full { session: 0 });
            }
            let id = loop {
                let id = fastrand::i32(1..);
                if !sessions.contains_key(&id) {
                    break id;
                }
            };
            let partitions = requested
                .into_iter()
                .map(|(id, position)| Cached {
                    id,
                    position,
                    reported: None,
                })
                .collect();
            sessions.insert(
                id,
                Session {
                    next_epoch: next(INITIAL_EPOCH),
                    partitions,
                    last_used: now,
                },
            );
            return Ok(Plan::Full { session: id });
        }
        let s = sessions
            .get_mut(&session)
            .ok_or(SessionError::NotFound(session))?;
        if epoch != s.next_epoch {
            return Err(SessionError::InvalidEpoch {
                session,
                expected: s.next_epoch,
                got: epoch,
            });
        }
        s.next_epoch = next(epoch);
        s.last_used = now;
        for (id, position) in requested {
            match s.partitions.iter_mut().find(|c| c.id == id) {
                Some(cached) => cached.position = position,
                None => s.partitions.push(Cached {
                    id,
                    position,
                    reported: None,
                }),
            }
        }
        s.partitions.retain(|c| !forgotten.contains(&c.id));
        Ok(Plan::Incremental {
            session,
            partitions: s
                .partitions
                .iter()
                .map(|c| (c.id.clone(), c.position))
                .collect(),
        })
    }

    /// Records what `session`'s answer says of each partition in `answered` and returns
    /// which of them the answer must hold: all of them for a `full` fetch; for an
    /// incremental one, those with records, an error, or offsets the session has not
    /// reported yet. A partition that returned records moves to the end of the session.
    /// Every partition is held when the session is gone meanwhile.
    pub fn finish(&self, session: i32, full: bool, answered: &[Answered]) -> Vec<bool> {
        let mut sessions = self.sessions.lock();
        let Some(s) = sessions.get_mut(&session) else {
            return vec![true; answered.len()];
        };
        // Where each partition is in the session: one pass, not one search per answer
        // (a session may hold thousands).
        let index: HashMap<PartitionId, usize> = s
            .partitions
            .iter()
            .enumerate()
            .map(|(at, c)| (c.id.clone(), at))
            .collect();
        let mut moved = Vec::new();
        let held = answered
            .iter()
            .map(|a| {
                let Some(&at) = index.get(&a.id) else {
                    return true;
                };
                let cached = &mut s.partitions[at];
                let changed = cached.reported != Some(a.reported);
                cached.reported = Some(a.reported);
                if a.records {
                    moved.push(at);
                }
                full || a.records || a.error || changed
            })
            .collect();
        moved.sort_unstable();
        for at in moved.into_iter().rev() {
            let cached = s.partitions.remove(at);
            s.partitions.push(cached);
        }
        held
    }

    /// Whether a new session fits, evicting the least recently used one when all slots
    /// are taken and it has been idle long enough.
    fn make_room(&self, sessions: &mut HashMap<i32, Session>, now: Instant) -> bool {
        if sessions.len() < self.slots {
            return true;
        }
        let oldest = sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used)
            .filter(|(_, s)| now.duration_since(s.last_used) >= EVICTABLE_AFTER)
            .map(|(id, _)| *id);
        oldest.is_some_and(|id| sessions.remove(&id).is_some())
    }
}

/// The epoch after `epoch`: it wraps to 1, never to the initial or final epoch.
fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(topic: &str, index: i32) -> PartitionId {
        (topic.to_owned(), index)
    }

    fn at(offset: i64) -> Position {
        Position {
            offset,
            max_bytes: 1 << 20,
            leader_epoch: -1,
        }
    }

    fn answered(id: PartitionId, high_watermark: i64, records: bool) -> Answered {
        Answered {
            id,
            reported: Reported {
                high_watermark,
                last_stable: high_watermark,
                log_start: 0,
            },
            records,
            error: false,
        }
    }

    fn open(sessions: &FetchSessions, now: Instant) -> i32 {
        let requested = vec![(p("a", 0), at(0)), (p("a", 1), at(0)), (p("b", 0), at(0))];
        let Ok(Plan::Full { session }) = sessions.begin(0, 0, requested, &[], now) else {
            panic!("a full fetch");
        };
        assert_ne!(session, 0);
        let all = [
            answered(p("a", 0), 5, true),
            answered(p("a", 1), 0, false),
            answered(p("b", 0), 0, false),
        ];
        assert_eq!(sessions.finish(session, true, &all), [true, true, true]);
        session
    }

    fn incremental(plan: Result<Plan, SessionError>) -> Vec<(PartitionId, Position)> {
        match plan {
            Ok(Plan::Incremental { partitions, .. }) => partitions,
            other => panic!("an incremental fetch, not {other:?}"),
        }
    }

    #[test]
    fn an_incremental_fetch_reads_the_whole_session_and_answers_what_changed() {
        let sessions = FetchSessions::default();
        let t0 = Instant::now();
        let id = open(&sessions, t0);
        // The client moved past a/0's records: it sends only that partition.
        let read = incremental(sessions.begin(id, 1, vec![(p("a", 0), at(5))], &[], t0));
        // a/0 returned records in the full fetch, so it went to the end.
        assert_eq!(
            read,
            [(p("a", 1), at(0)), (p("b", 0), at(0)), (p("a", 0), at(5))]
        );
        let answers = [
            answered(p("a", 1), 0, false), // nothing new
            answered(p("b", 0), 3, true),  // records
            answered(p("a", 0), 7, false), // its high watermark moved
        ];
        assert_eq!(sessions.finish(id, false, &answers), [false, true, true]);
        // A partition added, one forgotten.
        let read = incremental(sessions.begin(id, 2, vec![(p("c", 0), at(9))], &[p("a", 1)], t0));
        assert_eq!(
            read,
            [(p("a", 0), at(5)), (p("b", 0), at(0)), (p("c", 0), at(9))]
        );
    }

    #[test]
    fn wrong_epochs_and_unknown_sessions_are_refused() {
        let sessions = FetchSessions::default();
        let t0 = Instant::now();
        let id = open(&sessions, t0);
        assert_eq!(
            sessions.begin(id, 2, vec![], &[], t0),
            Err(SessionError::InvalidEpoch {
                session: id,
                expected: 1,
                got: 2
            })
        );
        assert!(incremental(sessions.begin(id, 1, vec![], &[], t0)).len() == 3);
        assert_eq!(
            sessions.begin(id, 1, vec![], &[], t0),
            Err(SessionError::InvalidEpoch {
                session: id,
                expected: 2,
                got: 1
            }),
            "an epoch is used once"
        );
        let other = id.wrapping_add(1).max(1);
        assert_eq!(
            sessions.begin(other, 1, vec![], &[], t0),
            Err(SessionError::NotFound(other))
        );
    }

    #[test]
    fn epoch_minus_one_closes_the_session_and_epoch_zero_replaces_it() {
        let sessions = FetchSessions::default();
        let t0 = Instant::now();
        let id = open(&sessions, t0);
        assert_eq!(
            sessions.begin(id, -1, vec![], &[], t0),
            Ok(Plan::Full { session: 0 })
        );
        assert!(sessions.is_empty());
        let id = open(&sessions, t0);
        let Ok(Plan::Full { session }) = sessions.begin(id, 0, vec![], &[], t0) else {
            panic!("a full fetch");
        };
        assert_ne!(session, id);
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn when_every_slot_is_taken_only_an_idle_session_is_evicted() {
        let sessions = FetchSessions::with_slots(1);
        let t0 = Instant::now();
        let first = open(&sessions, t0);
        let busy = sessions.begin(0, 0, vec![], &[], t0 + Duration::from_secs(1));
        assert_eq!(busy, Ok(Plan::Full { session: 0 }), "no room: no session");
        let later = t0 + EVICTABLE_AFTER;
        let Ok(Plan::Full { session }) = sessions.begin(0, 0, vec![], &[], later) else {
            panic!("a full fetch");
        };
        assert_ne!(session, 0);
        assert_eq!(
            sessions.begin(first, 1, vec![], &[], later),
            Err(SessionError::NotFound(first))
        );
    }

    #[test]
    fn the_epoch_after_i32_max_is_one() {
        assert_eq!(next(i32::MAX), 1);
        assert_eq!(next(0), 1);
    }
}
