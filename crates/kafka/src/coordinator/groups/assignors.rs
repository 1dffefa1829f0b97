//! The server-side assignors of consumer groups on the consumer protocol (KIP-848): the
//! coordinator, not a member, splits the subscribed topics' partitions among the members
//! whenever the group epoch moves. Pure functions of the members' subscriptions, the
//! partition counts and the previous target assignment.
//!
//! - **uniform** (Kafka's default): every partition to a member subscribed to its topic,
//!   as evenly as the subscriptions allow — no member subscribed to a partition's topic
//!   has two or more fewer partitions than the member that holds it — and sticky: a
//!   partition stays with the member of the previous target unless balance needs it moved
//!   (a member gives up its highest partitions and keeps its lowest).
//! - **range**: per topic, the subscribed members sorted by member id take consecutive
//!   ranges of its partitions, the first ones one more when the count does not divide
//!   (Kafka's classic range assignment, so co-partitioned topics line up).

use std::collections::{BTreeMap, BTreeSet};

/// A topic's UUID (the consumer protocol names topics by id).
pub(crate) type TopicId = [u8; 16];

/// Partitions by topic: one member's assignment.
pub(crate) type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct Subscriber<'a> {
    /// Its member id.
    pub id: &'a str,
    /// The topics it subscribes to (those that exist).
    pub topics: BTreeSet<TopicId>,
    /// Its assignment in the previous target (what stickiness keeps).
    pub previous: Option<&'a Assignment>,
}

/// A server-side assignor a member may ask for (`group.remote.assignor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerAssignor {
    /// Balanced and sticky.
    Uniform,
    /// Consecutive ranges per topic.
    Range,
}

impl ServerAssignor {
    /// Every assignor, the default first.
    pub const ALL: [Self; 2] = [Self::Uniform, Self::Range];

    /// Its name, as clients ask for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Range => "range",
        }
    }

    /// The assignor called `name`.
    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The target assignment of `members` (sorted by id, ids unique) over `partitions`
    /// (each topic's partition count): every member, with what it gets (possibly nothing).
    pub fn assign(
        self,
        members: &[Subscriber<'_>],
        partitions: &BTreeMap<TopicId, i32>,
    ) -> BTreeMap<String, Assignment> {
        let owners = match self {
            Self::Uniform => uniform(members, partitions),
            Self::Range => range(members, partitions),
        };
        let mut out: BTreeMap<String, Assignment> = members
            .iter()
            .map(|m| (m.id.to_owned(), Assignment::new()))
            .collect();
        for ((topic, partition), member) in owners {
            if let Some(a) = out.get_mut(members[member].id) {
                a.entry(topic).or_default().insert(partition);
            }
        }
        out
    }
}

/// Which member (by index) gets each partition.
type Owners = BTreeMap<(TopicId, i32), usize>;

/// The subscribed members of `topic`, by index.
fn subscribers(members: &[Subscriber<'_>], topic: &TopicId) -> Vec<usize> {
    (0..members.len())
        .filter(|&i| members[i].topics.contains(topic))
        .collect()
}

/// Uniform: keep the previous target's valid partitions, give each partition left to the
/// least-loaded subscriber, then move partitions from a member to a subscriber of their
/// topic with two or more fewer until none can move.
fn uniform(members: &[Subscriber<'_>], partitions: &BTreeMap<TopicId, i32>) -> Owners {
    let mut owners = Owners::new();
    let mut load = vec![0usize; members.len()];
    for (i, m) in members.iter().enumerate() {
        for (topic, kept) in m.previous.into_iter().flatten() {
            let Some(&count) = partitions.get(topic) else {
                continue;
            };
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in kept.iter().filter(|&&p| (0..count).contains(&p)) {
                if owners.insert((*topic, p), i).is_none() {
                    load[i] += 1;
                }
            }
        }
    }
    let eligible: BTreeMap<TopicId, Vec<usize>> = partitions
        .keys()
        .map(|t| (*t, subscribers(members, t)))
        .collect();
    for (topic, &count) in partitions {
        let candidates = &eligible[topic];
        for p in 0..count {
            if owners.contains_key(&(*topic, p)) {
                continue;
            }
            if let Some(&least) = candidates.iter().min_by_key(|&&i| (load[i], i)) {
                owners.insert((*topic, p), least);
                load[least] += 1;
            }
        }
    }
    // Each move narrows the gap between two members by two, so this ends. Members give up
    // their highest partitions first and keep the lowest, as Kafka's uniform assignor
    // places them (librdkafka's 0113 checks the exact placement).
    loop {
        let mut moved = false;
        let held: Vec<((TopicId, i32), usize)> =
            owners.iter().rev().map(|(k, v)| (*k, *v)).collect();
        for (partition, holder) in held {
            let Some(&least) = eligible[&partition.0].iter().min_by_key(|&&i| (load[i], i)) else {
                continue;
            };
            if load[holder] > load[least] + 1 {
                owners.insert(partition, least);
                load[holder] -= 1;
                load[least] += 1;
                moved = true;
            }
        }
        if !moved {
            return owners;
        }
    }
}

/// Range: per topic, consecutive ranges to its subscribers in member id order.
fn range(members: &[Subscriber<'_>], partitions: &BTreeMap<TopicId, i32>) -> Owners {
    let mut owners = Owners::new();
    for (topic, &count) in partitions {
        let subscribed = subscribers(members, topic);
        if subscribed.is_empty() {
            continue;
        }
        let n = i32::try_from(subscribed.len()).unwrap_or(i32::MAX);
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (rank, &member) in subscribed.iter().enumerate() {
            let rank = i32::try_from(rank).unwrap_or(i32::MAX);
            let len = each + i32::from(rank < extra);
            for p in next..next + len {
                owners.insert((*topic, p), member);
            }
            next += len;
        }
    }
    owners
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: TopicId = [1; 16];
    const B: TopicId = [2; 16];

    fn sub<'a>(
        id: &'a str,
        topics: &[TopicId],
        previous: Option<&'a Assignment>,
    ) -> Subscriber<'a> {
        Subscriber {
            id,
            topics: topics.iter().copied().collect(),
            previous,
        }
    }

    fn counts(out: &BTreeMap<String, Assignment>) -> Vec<usize> {
        out.values()
            .map(|a| a.values().map(BTreeSet::len).sum())
            .collect()
    }

    fn every_partition_once(
        out: &BTreeMap<String, Assignment>,
        partitions: &BTreeMap<TopicId, i32>,
    ) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "partition {p} assigned twice");
                }
            }
        }
        let all: usize = partitions.values().map(|&c| c as usize).sum();
        assert_eq!(seen.len(), all);
    }

    #[test]
    fn uniform_splits_evenly_among_three() {
        let partitions = BTreeMap::from([(A, 4), (B, 3)]);
        let members = [
            sub("m1", &[A, B], None),
            sub("m2", &[A, B], None),
            sub("m3", &[A, B], None),
        ];
        let out = ServerAssignor::Uniform.assign(&members, &partitions);
        every_partition_once(&out, &partitions);
        let mut c = counts(&out);
        c.sort_unstable();
        assert_eq!(c, vec![2, 2, 3]);
    }

    #[test]
    fn uniform_keeps_partitions_where_they_were_when_a_member_joins() {
        let partitions = BTreeMap::from([(A, 6)]);
        let two = [sub("m1", &[A], None), sub("m2", &[A], None)];
        let before = ServerAssignor::Uniform.assign(&two, &partitions);
        let three = [
            sub("m1", &[A], Some(&before["m1"])),
            sub("m2", &[A], Some(&before["m2"])),
            sub("m3", &[A], None),
        ];
        let after = ServerAssignor::Uniform.assign(&three, &partitions);
        every_partition_once(&after, &partitions);
        assert_eq!(counts(&after), vec![2, 2, 2]);
        // Each old member gives up one partition and keeps the rest.
        for m in ["m1", "m2"] {
            let kept = after[m][&A].intersection(&before[m][&A]).count();
            assert_eq!(kept, 2, "{m} kept {kept} of its partitions");
        }
    }

    #[test]
    fn uniform_places_partitions_as_kafka_does_as_members_join_one_by_one() {
        // librdkafka's 0113 x_incremental_rebalances: 6 partitions, members joining one by one.
        let partitions = BTreeMap::from([(A, 6)]);
        let set = |ps: &[i32]| Assignment::from([(A, ps.iter().copied().collect())]);
        let one = ServerAssignor::Uniform.assign(&[sub("c0", &[A], None)], &partitions);
        assert_eq!(one["c0"], set(&[0, 1, 2, 3, 4, 5]));
        let two = ServerAssignor::Uniform.assign(
            &[sub("c0", &[A], Some(&one["c0"])), sub("c1", &[A], None)],
            &partitions,
        );
        assert_eq!(
            (&two["c0"], &two["c1"]),
            (&set(&[0, 1, 2]), &set(&[3, 4, 5]))
        );
        let three = ServerAssignor::Uniform.assign(
            &[
                sub("c0", &[A], Some(&two["c0"])),
                sub("c1", &[A], Some(&two["c1"])),
                sub("c2", &[A], None),
            ],
            &partitions,
        );
        assert_eq!(
            (&three["c0"], &three["c1"], &three["c2"]),
            (&set(&[0, 1]), &set(&[3, 4]), &set(&[2, 5]))
        );
    }

    #[test]
    fn uniform_gives_a_leavers_partitions_to_the_rest() {
        let partitions = BTreeMap::from([(A, 6)]);
        let three = [
            sub("m1", &[A], None),
            sub("m2", &[A], None),
            sub("m3", &[A], None),
        ];
        let before = ServerAssignor::Uniform.assign(&three, &partitions);
        let two = [
            sub("m1", &[A], Some(&before["m1"])),
            sub("m2", &[A], Some(&before["m2"])),
        ];
        let after = ServerAssignor::Uniform.assign(&two, &partitions);
        every_partition_once(&after, &partitions);
        assert_eq!(counts(&after), vec![3, 3]);
        for m in ["m1", "m2"] {
            assert!(before[m][&A].is_subset(&after[m][&A]));
        }
    }

    #[test]
    fn uniform_gives_each_topic_only_to_its_subscribers() {
        let partitions = BTreeMap::from([(A, 4), (B, 2)]);
        let members = [sub("m1", &[A], None), sub("m2", &[A, B], None)];
        let out = ServerAssignor::Uniform.assign(&members, &partitions);
        every_partition_once(&out, &partitions);
        assert!(!out["m1"].contains_key(&B));
        assert_eq!(counts(&out), vec![3, 3]);
    }

    #[test]
    fn uniform_drops_partitions_of_topics_unsubscribed_or_gone() {
        let previous = Assignment::from([(A, BTreeSet::from([0, 1, 7])), (B, BTreeSet::from([0]))]);
        let partitions = BTreeMap::from([(A, 2)]);
        let out = ServerAssignor::Uniform.assign(&[sub("m1", &[A], Some(&previous))], &partitions);
        assert_eq!(out["m1"], Assignment::from([(A, BTreeSet::from([0, 1]))]));
    }

    #[test]
    fn range_gives_consecutive_ranges_in_member_order() {
        let partitions = BTreeMap::from([(A, 5), (B, 2)]);
        let members = [sub("m1", &[A, B], None), sub("m2", &[A, B], None)];
        let out = ServerAssignor::Range.assign(&members, &partitions);
        assert_eq!(
            out["m1"],
            Assignment::from([(A, BTreeSet::from([0, 1, 2])), (B, BTreeSet::from([0]))])
        );
        assert_eq!(
            out["m2"],
            Assignment::from([(A, BTreeSet::from([3, 4])), (B, BTreeSet::from([1]))])
        );
    }

    #[test]
    fn assignors_are_found_by_name() {
        assert_eq!(
            ServerAssignor::by_name("uniform"),
            Some(ServerAssignor::Uniform)
        );
        assert_eq!(
            ServerAssignor::by_name("range"),
            Some(ServerAssignor::Range)
        );
        assert_eq!(ServerAssignor::by_name("sticky"), None);
    }
}
