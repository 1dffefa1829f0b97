//! Share sessions (KIP-932): a member's ShareFetch at epoch 0 opens one with the partitions
//! it names; each later fetch or acknowledgement carries the next epoch and only the
//! partitions it adds or forgets; epoch -1 closes it. A wrong epoch is
//! `INVALID_SHARE_SESSION_EPOCH`, a session this instance does not have
//! `SHARE_SESSION_NOT_FOUND` (the client then opens a new one).

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};

/// The epoch that opens a session.
pub(crate) const OPEN: i32 = 0;
/// The epoch that closes a session.
pub(crate) const CLOSE: i32 = -1;

/// A partition as a share session names it: its topic's UUID and its index.
pub(crate) type SessionPartition = ([u8; 16], i32);

/// One member's session.
#[derive(Debug, Default)]
struct Session {
    /// The epoch its next request carries.
    next: i32,
    /// The partitions it fetches from.
    partitions: BTreeSet<SessionPartition>,
}

/// This instance's share sessions, by (group, member).
#[derive(Debug, Default)]
pub(crate) struct ShareSessions {
    sessions: Mutex<HashMap<(String, String), Session>>,
}

impl ShareSessions {
    /// Moves `member`'s session on by a request at `epoch` that adds `added` and forgets
    /// `forgotten`; returns the partitions the session fetches from now (none once
    /// closed).
    ///
    /// # Errors
    /// `SHARE_SESSION_NOT_FOUND` or `INVALID_SHARE_SESSION_EPOCH`.
    pub(crate) fn advance(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[SessionPartition],
        forgotten: &[SessionPartition],
    ) -> Result<Vec<SessionPartition>, (ResponseError, String)> {
        let mut sessions = self.sessions.lock();
        let key = (group.to_owned(), member.to_owned());
        if epoch == OPEN {
            let session = Session {
                next: 1,
                partitions: added.iter().copied().collect(),
            };
            let partitions = session.partitions.iter().copied().collect();
            sessions.insert(key, session);
            return Ok(partitions);
        }
        let Some(session) = sessions.get_mut(&key) else {
            return Err((
                ResponseError::ShareSessionNotFound,
                format!("Share session for member {member} not found."),
            ));
        };
        if epoch == CLOSE {
            sessions.remove(&key);
            return Ok(Vec::new());
        }
        if epoch != session.next {
            return Err((
                ResponseError::InvalidShareSessionEpoch,
                format!(
                    "The share session epoch {epoch} is not the expected {}.",
                    session.next
                ),
            ));
        }
        session.next = if epoch == i32::MAX { 1 } else { epoch + 1 };
        session.partitions.extend(added.iter().copied());
        for f in forgotten {
            session.partitions.remove(f);
        }
        Ok(session.partitions.iter().copied().collect())
    }

    /// Closes `member`'s session (it left the group or was removed from it).
    pub(crate) fn close_member(&self, group: &str, member: &str) {
        self.sessions
            .lock()
            .remove(&(group.to_owned(), member.to_owned()));
    }

    /// How many sessions are open.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_move_on_and_wrong_ones_are_refused() {
        let s = ShareSessions::default();
        let (a, b) = (([1; 16], 0), ([1; 16], 1));
        assert_eq!(
            s.advance("g", "m", 3, &[], &[]).unwrap_err().0,
            ResponseError::ShareSessionNotFound
        );
        assert_eq!(s.advance("g", "m", OPEN, &[a], &[]).unwrap(), vec![a]);
        assert_eq!(s.advance("g", "m", 1, &[b], &[]).unwrap(), vec![a, b]);
        assert_eq!(
            s.advance("g", "m", 1, &[], &[]).unwrap_err().0,
            ResponseError::InvalidShareSessionEpoch
        );
        assert_eq!(s.advance("g", "m", 2, &[], &[a]).unwrap(), vec![b]);
        assert_eq!(s.advance("g", "m", CLOSE, &[], &[]).unwrap(), vec![]);
        assert_eq!(s.len(), 0);
    }
}
