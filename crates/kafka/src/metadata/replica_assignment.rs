//! Manual replica assignments of CreateTopics and CreatePartitions, checked as Kafka checks
//! them: every replica list names live brokers, none is empty or names a broker twice, all
//! have the same length, and (CreateTopics) the partition indexes are 0..n-1, each once.
//!
//! Ferry keeps one copy of each partition, in the store, and any instance may sequence it
//! (the sequencer lease), so a valid assignment is taken and its placement is not kept:
//! Metadata shows Ferry's own leader and replicas. What an assignment decides is how many
//! partitions there are.

use kafka_protocol::ResponseError;
use std::collections::HashSet;

/// Why an assignment is refused: Kafka's `INVALID_REPLICA_ASSIGNMENT`, with its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InvalidAssignment(pub String);

impl InvalidAssignment {
    /// The Kafka error code for an answer.
    pub(crate) fn code(&self) -> i16 {
        ResponseError::InvalidReplicaAssignment.code()
    }
}

/// Checks a CreateTopics assignment, `(partition index, replicas)` per partition, against
/// the `live` brokers; returns the topic's partition count.
///
/// # Errors
/// [`InvalidAssignment`] naming the first rule broken.
pub(crate) fn check_topic(
    assignment: &[(i32, Vec<i32>)],
    live: &[i32],
) -> Result<i32, InvalidAssignment> {
    let mut indexes = HashSet::with_capacity(assignment.len());
    for (index, _) in assignment {
        if !indexes.insert(*index) {
            return Err(InvalidAssignment(format!(
                "Found multiple manual partition assignments for partition {index}"
            )));
        }
    }
    let count = i32::try_from(assignment.len()).unwrap_or(i32::MAX);
    if !(0..count).all(|i| indexes.contains(&i)) {
        return Err(InvalidAssignment(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    check_lists(
        assignment.iter().map(|(_, replicas)| replicas.as_slice()),
        live,
    )?;
    Ok(count)
}

/// Checks the replica lists of the partitions a CreatePartitions adds (one list each, in
/// order) against the `live` brokers: `added` partitions are being added.
///
/// # Errors
/// [`InvalidAssignment`] naming the first rule broken.
pub(crate) fn check_new_partitions(
    lists: &[Vec<i32>],
    added: i32,
    live: &[i32],
) -> Result<(), InvalidAssignment> {
    if usize::try_from(added).ok() != Some(lists.len()) {
        return Err(InvalidAssignment(format!(
            "Increasing the number of partitions by {added} but {} assignments provided.",
            lists.len()
        )));
    }
    check_lists(lists.iter().map(Vec::as_slice), live)
}

/// Kafka's rules for every replica list of one request.
fn check_lists<'a>(
    lists: impl Iterator<Item = &'a [i32]>,
    live: &[i32],
) -> Result<(), InvalidAssignment> {
    let mut length = None;
    for replicas in lists {
        if replicas.is_empty() {
            return Err(InvalidAssignment(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        let mut seen = HashSet::with_capacity(replicas.len());
        for broker in replicas {
            if !live.contains(broker) {
                return Err(InvalidAssignment(format!(
                    "The manual partition assignment includes broker {broker}, but no such broker is registered."
                )));
            }
            if !seen.insert(broker) {
                return Err(InvalidAssignment(format!(
                    "The manual partition assignment includes the broker {broker} more than once."
                )));
            }
        }
        match length {
            Some(n) if n != replicas.len() => {
                return Err(InvalidAssignment(format!(
                    "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {n} replica(s).",
                    replicas.len()
                )));
            }
            _ => length = Some(replicas.len()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_of_live_brokers_gives_the_partition_count() {
        let live = [0, 1, 2];
        let assignment = [(1, vec![1, 0]), (0, vec![0, 2]), (2, vec![2, 1])];
        assert_eq!(check_topic(&assignment, &live), Ok(3));
        assert_eq!(check_new_partitions(&[vec![2], vec![0]], 2, &live), Ok(()));
    }

    #[test]
    fn each_broken_rule_is_named() {
        let live = [0, 1];
        let refused =
            |assignment: &[(i32, Vec<i32>)]| check_topic(assignment, &live).unwrap_err().0;
        assert_eq!(
            refused(&[(0, vec![0]), (0, vec![1])]),
            "Found multiple manual partition assignments for partition 0"
        );
        assert_eq!(
            refused(&[(0, vec![0]), (2, vec![1])]),
            "partitions should be a consecutive 0-based integer sequence"
        );
        assert_eq!(
            refused(&[(0, vec![])]),
            "The manual partition assignment includes an empty replica list."
        );
        assert_eq!(
            refused(&[(0, vec![0, 7])]),
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            refused(&[(0, vec![1, 1])]),
            "The manual partition assignment includes the broker 1 more than once."
        );
        assert_eq!(
            refused(&[(0, vec![0, 1]), (1, vec![1])]),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."
        );
        assert_eq!(
            check_new_partitions(&[vec![0]], 2, &live).unwrap_err().0,
            "Increasing the number of partitions by 2 but 1 assignments provided."
        );
        assert_eq!(
            check_new_partitions(&[vec![0], vec![3]], 2, &live)
                .unwrap_err()
                .code(),
            ResponseError::InvalidReplicaAssignment.code()
        );
    }
}
