//! The consumer protocol's rules, one scenario each.

use super::*;

const T: TopicId = [7; 16];
const U: TopicId = [8; 16];

/// Topics by name.
struct Catalog(BTreeMap<String, (TopicId, i32)>);

impl TopicCatalog for Catalog {
    fn topic(&self, name: &str) -> Option<(TopicId, i32)> {
        self.0.get(name).copied()
    }
    fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

fn catalog(partitions: i32) -> Catalog {
    Catalog(BTreeMap::from([
        ("t".to_owned(), (T, partitions)),
        ("u".to_owned(), (U, 2)),
    ]))
}

fn group() -> ConsumerGroup {
    ConsumerGroup::new(
        "g",
        ConsumerSettings {
            session_timeout: Duration::from_secs(45),
            heartbeat_interval: Duration::from_secs(5),
        },
    )
}

fn join(member: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member.to_owned(),
        member_epoch: JOIN_EPOCH,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".to_owned()]),
        owned: Some(Assignment::new()),
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        ..ConsumerHeartbeat::default()
    }
}

/// An ordinary heartbeat: nothing changed, owning `owned`.
fn beat(member: &str, epoch: i32, owned: &Assignment) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member.to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        ..ConsumerHeartbeat::default()
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Heartbeats every member (as clients do, each with what it last got) until no answer
/// changes; returns each member's (epoch, assignment).
fn settle(
    g: &mut ConsumerGroup,
    members: &[&str],
    cat: &Catalog,
    now: Instant,
) -> BTreeMap<String, (i32, Assignment)> {
    let mut have: BTreeMap<String, (i32, Assignment)> = members
        .iter()
        .map(|m| {
            let member = &g.members[*m];
            (m.to_string(), (member.epoch, member.assigned.clone()))
        })
        .collect();
    for _ in 0..10 {
        let mut changed = false;
        for m in members {
            let (epoch, owned) = have[*m].clone();
            let a = g.heartbeat(beat(m, epoch, &owned), cat, now);
            assert_eq!(a.error, 0, "{m}: {:?}", a.message);
            let next = (a.member_epoch, a.assignment.unwrap_or(owned));
            changed |= next != have[*m];
            have.insert(m.to_string(), next);
        }
        if !changed {
            return have;
        }
    }
    panic!("the group did not settle: {have:?}");
}

#[test]
fn a_first_member_gets_every_partition_at_the_first_epoch() {
    let (mut g, cat, now) = (group(), catalog(3), Instant::now());
    let a = g.heartbeat(join("m1"), &cat, now);
    assert_eq!((a.error, a.member_epoch), (0, 1));
    assert_eq!(
        a.assignment,
        Some(Assignment::from([(T, BTreeSet::from([0, 1, 2]))]))
    );
    assert_eq!(a.heartbeat_interval, Duration::from_secs(5));
    assert_eq!(g.state(), "Stable");
    assert!(g.take_dirty());
}

#[test]
fn three_members_split_the_partitions_without_two_holding_one() {
    let (mut g, cat, now) = (group(), catalog(6), Instant::now());
    g.heartbeat(join("m1"), &cat, now);
    g.heartbeat(join("m2"), &cat, now);
    g.heartbeat(join("m3"), &cat, now);
    let settled = settle(&mut g, &["m1", "m2", "m3"], &cat, now);
    let counts: Vec<usize> = settled.values().map(|(_, a)| count(a)).collect();
    assert_eq!(counts, vec![2, 2, 2]);
    assert!(settled.values().all(|(e, _)| *e == g.epoch));
    assert_eq!(g.state(), "Stable");
}

#[test]
fn a_member_gives_partitions_up_before_another_gets_them() {
    let (mut g, cat, now) = (group(), catalog(4), Instant::now());
    let first = g.heartbeat(join("m1"), &cat, now);
    let all = first.assignment.unwrap();
    let joined = g.heartbeat(join("m2"), &cat, now);
    // m2 is at the new epoch but everything is still m1's.
    assert_eq!(joined.member_epoch, 2);
    assert_eq!(joined.assignment, Some(Assignment::new()));
    assert_eq!(g.state(), "Reconciling");
    // m1 is told to keep only its half, at its old epoch.
    let told = g.heartbeat(beat("m1", 1, &all), &cat, now);
    assert_eq!(told.member_epoch, 1);
    let kept = told.assignment.unwrap();
    assert_eq!(count(&kept), 2);
    // While m1 still reports them, m2 gets nothing.
    let waiting = g.heartbeat(beat("m2", 2, &Assignment::new()), &cat, now);
    assert_eq!(waiting.assignment, None);
    // m1 released them: it moves to epoch 2; m2 then takes the other half.
    let released = g.heartbeat(beat("m1", 1, &kept), &cat, now);
    assert_eq!(released.member_epoch, 2);
    let taken = g.heartbeat(beat("m2", 2, &Assignment::new()), &cat, now);
    let other = taken.assignment.unwrap();
    assert_eq!(count(&other), 2);
    assert!(kept[&T].is_disjoint(&other[&T]));
    assert_eq!(g.state(), "Stable");
}

#[test]
fn a_leaver_s_partitions_go_to_the_others() {
    let (mut g, cat, now) = (group(), catalog(4), Instant::now());
    g.heartbeat(join("m1"), &cat, now);
    g.heartbeat(join("m2"), &cat, now);
    let settled = settle(&mut g, &["m1", "m2"], &cat, now);
    let mut leave = beat("m2", settled["m2"].0, &settled["m2"].1);
    leave.member_epoch = LEAVE_EPOCH;
    let left = g.heartbeat(leave, &cat, now);
    assert_eq!((left.error, left.member_epoch), (0, LEAVE_EPOCH));
    assert!(!g.members.contains_key("m2"));
    let after = settle(&mut g, &["m1"], &cat, now);
    assert_eq!(count(&after["m1"].1), 4);
}

#[test]
fn a_silent_member_is_removed_after_its_session_and_a_slow_revoker_after_its_rebalance_timeout() {
    let (mut g, cat, t0) = (group(), catalog(4), Instant::now());
    let all = g.heartbeat(join("m1"), &cat, t0).assignment.unwrap();
    g.heartbeat(join("m2"), &cat, t0);
    // m1 is asked to revoke and does not.
    g.heartbeat(beat("m1", 1, &all), &cat, t0);
    assert_eq!(g.members["m1"].state, MemberState::UnrevokedPartitions);
    let deadline = g.next_deadline().unwrap();
    assert_eq!(deadline, t0 + Duration::from_secs(30));
    g.tick(deadline);
    assert!(
        !g.members.contains_key("m1"),
        "m1 never released its partitions"
    );
    // m2 goes silent too.
    g.tick(t0 + Duration::from_secs(45));
    assert!(g.members.is_empty());
    assert_eq!(g.state(), "Empty");
}

#[test]
fn epochs_fence_heartbeats_and_commits() {
    let (mut g, cat, now) = (group(), catalog(2), Instant::now());
    let a = g.heartbeat(join("m1"), &cat, now);
    let owned = a.assignment.unwrap();
    let ahead = g.heartbeat(beat("m1", 5, &owned), &cat, now);
    assert_eq!(ahead.error, ResponseError::FencedMemberEpoch.code());
    let unknown = g.heartbeat(beat("zz", 1, &owned), &cat, now);
    assert_eq!(unknown.error, ResponseError::UnknownMemberId.code());
    assert_eq!(g.check_commit("m1", 1), 0);
    assert_eq!(
        g.check_commit("m1", 0),
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        g.check_commit("m1", 2),
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        g.check_commit("zz", 1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        group().check_commit("", -1),
        0,
        "an admin's commit to an empty group"
    );
}

#[test]
fn a_heartbeat_of_the_previous_epoch_is_taken_after_a_lost_response() {
    let (mut g, cat, now) = (group(), catalog(2), Instant::now());
    g.heartbeat(join("m1"), &cat, now);
    let settled = settle(&mut g, &["m1"], &cat, now);
    let (epoch, owned) = settled["m1"].clone();
    // A topic grows: a new epoch, whose answer the client never sees.
    let grown = catalog(3);
    let lost = g.heartbeat(beat("m1", epoch, &owned), &grown, now);
    assert_eq!(lost.member_epoch, epoch + 1);
    let again = g.heartbeat(beat("m1", epoch, &owned), &grown, now);
    assert_eq!((again.error, again.member_epoch), (0, epoch + 1));
}

#[test]
fn more_partitions_begin_a_new_epoch_that_assigns_them() {
    let (mut g, now) = (group(), Instant::now());
    let a = g.heartbeat(join("m1"), &catalog(2), now);
    let b = g.heartbeat(beat("m1", 1, &a.assignment.unwrap()), &catalog(3), now);
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        b.assignment,
        Some(Assignment::from([(T, BTreeSet::from([0, 1, 2]))]))
    );
}

#[test]
fn a_static_member_back_in_its_session_takes_its_partitions_without_a_new_epoch() {
    let (mut g, cat, now) = (group(), catalog(4), Instant::now());
    let mut first = join("m1");
    first.instance_id = Some("i1".to_owned());
    g.heartbeat(first, &cat, now);
    g.heartbeat(join("m2"), &cat, now);
    let settled = settle(&mut g, &["m1", "m2"], &cat, now);
    let epoch = g.epoch;
    let mut away = beat("m1", settled["m1"].0, &settled["m1"].1);
    away.member_epoch = STATIC_LEAVE_EPOCH;
    away.instance_id = Some("i1".to_owned());
    assert_eq!(
        g.heartbeat(away, &cat, now).member_epoch,
        STATIC_LEAVE_EPOCH
    );
    // A second consumer with the instance id while the first is in: refused.
    let mut back = join("m1-restarted");
    back.instance_id = Some("i1".to_owned());
    let answer = g.heartbeat(back, &cat, now);
    assert_eq!(answer.error, 0, "{:?}", answer.message);
    assert_eq!(answer.assignment, Some(settled["m1"].1.clone()));
    assert_eq!(answer.member_epoch, settled["m1"].0);
    assert_eq!(g.epoch, epoch, "no new group epoch");
    assert!(!g.members.contains_key("m1"));
    let mut twin = join("m1-twin");
    twin.instance_id = Some("i1".to_owned());
    let refused = g.heartbeat(twin, &cat, now);
    assert_eq!(refused.error, ResponseError::UnreleasedInstanceId.code());
    // The old member id is fenced.
    let mut old = beat("m1", settled["m1"].0, &settled["m1"].1);
    old.instance_id = Some("i1".to_owned());
    assert_eq!(
        g.heartbeat(old, &cat, now).error,
        ResponseError::FencedInstanceId.code()
    );
}

#[test]
fn subscriptions_by_pattern_take_every_matching_topic_from_the_next_heartbeat() {
    let (mut g, cat, now) = (group(), catalog(2), Instant::now());
    let mut req = join("m1");
    req.subscribed_topic_names = None;
    req.subscribed_topic_regex = Some("[tu]".to_owned());
    // As in Kafka, a new pattern is resolved after the heartbeat that brought it.
    let joined = g.heartbeat(req, &cat, now);
    assert_eq!(joined.assignment, Some(Assignment::new()));
    let a = g.heartbeat(
        beat("m1", joined.member_epoch, &Assignment::new()),
        &cat,
        now,
    );
    assert_eq!(a.member_epoch, joined.member_epoch + 1);
    assert_eq!(
        a.assignment,
        Some(Assignment::from([
            (T, BTreeSet::from([0, 1])),
            (U, BTreeSet::from([0, 1]))
        ]))
    );
    // Left and back with the same pattern: new again, so resolved a heartbeat later.
    let mut leave = beat("m1", a.member_epoch, &Assignment::new());
    leave.member_epoch = LEAVE_EPOCH;
    g.heartbeat(leave, &cat, now);
    let mut again = join("m1");
    again.subscribed_topic_names = Some(vec!["u".to_owned()]);
    again.subscribed_topic_regex = Some("[tu]".to_owned());
    let back = g.heartbeat(again, &cat, now);
    assert_eq!(
        back.assignment,
        Some(Assignment::from([(U, BTreeSet::from([0, 1]))]))
    );
    let mut bad = join("m2");
    bad.subscribed_topic_regex = Some("(".to_owned());
    assert_eq!(
        g.heartbeat(bad, &cat, now).error,
        ResponseError::InvalidRegularExpression.code()
    );
}

#[test]
fn bad_requests_are_refused_with_kafka_s_codes() {
    let (mut g, cat, now) = (group(), catalog(2), Instant::now());
    let mut no_id = join("");
    no_id.member_id.clear();
    assert_eq!(
        g.heartbeat(no_id, &cat, now).error,
        ResponseError::InvalidRequest.code()
    );
    let mut no_subscription = join("m1");
    no_subscription.subscribed_topic_names = None;
    assert_eq!(
        g.heartbeat(no_subscription, &cat, now).error,
        ResponseError::InvalidRequest.code()
    );
    let mut assignor = join("m1");
    assignor.server_assignor = Some("sticky".to_owned());
    assert_eq!(
        g.heartbeat(assignor, &cat, now).error,
        ResponseError::UnsupportedAssignor.code()
    );
    assert!(g.members.is_empty());
}

#[test]
fn the_range_assignor_is_used_when_members_ask_for_it() {
    let (mut g, cat, now) = (group(), catalog(3), Instant::now());
    let mut req = join("m1");
    req.server_assignor = Some("range".to_owned());
    g.heartbeat(req, &cat, now);
    assert_eq!(g.assignor(), ServerAssignor::Range);
    assert_eq!(g.view().assignor, ServerAssignor::Range);
}

/// A client as librdkafka behaves: it owns what it was last given, heartbeats with that,
/// and rejoins with epoch 0 (owning nothing) when fenced or unknown.
#[derive(Clone)]
struct Client {
    epoch: i32,
    owned: Assignment,
}

#[test]
fn random_joins_leaves_beats_and_growth_never_give_a_partition_to_two_clients() {
    fastrand::seed(848);
    let (mut g, t0) = (group(), Instant::now());
    let mut partitions = 4;
    let mut clients: BTreeMap<String, Client> = BTreeMap::new();
    for step in 0..3_000 {
        let now = t0 + Duration::from_millis(step);
        let cat = catalog(partitions);
        let name = format!("m{}", fastrand::u8(0..5));
        match (fastrand::u8(0..20), clients.get(&name).cloned()) {
            (0, _) if partitions < 12 => partitions += 1,
            (1, Some(c)) => {
                let mut leave = beat(&name, c.epoch, &c.owned);
                leave.member_epoch = LEAVE_EPOCH;
                g.heartbeat(leave, &cat, now);
                clients.remove(&name);
            }
            (_, None) => {
                let a = g.heartbeat(join(&name), &cat, now);
                assert_eq!(a.error, 0, "{:?}", a.message);
                let owned = a.assignment.unwrap_or_default();
                clients.insert(
                    name.clone(),
                    Client {
                        epoch: a.member_epoch,
                        owned,
                    },
                );
            }
            (_, Some(c)) => {
                let a = g.heartbeat(beat(&name, c.epoch, &c.owned), &cat, now);
                let next = if a.error == 0 {
                    Client {
                        epoch: a.member_epoch,
                        owned: a.assignment.unwrap_or(c.owned),
                    }
                } else {
                    // Fenced or unknown: it gives everything up and joins again.
                    let a = g.heartbeat(join(&name), &cat, now);
                    assert_eq!(a.error, 0, "{:?}", a.message);
                    Client {
                        epoch: a.member_epoch,
                        owned: a.assignment.unwrap_or_default(),
                    }
                };
                clients.insert(name.clone(), next);
            }
        }
        let mut seen = BTreeSet::new();
        for (member, c) in &clients {
            for (t, ps) in &c.owned {
                for p in ps {
                    assert!(
                        seen.insert((*t, *p)),
                        "step {step}: partition {p} owned by {member} and another"
                    );
                }
            }
        }
    }
    // Left to heartbeat, the members settle with every partition owned once.
    let members: Vec<String> = clients.keys().cloned().collect();
    let names: Vec<&str> = members.iter().map(String::as_str).collect();
    let settled = settle(
        &mut g,
        &names,
        &catalog(partitions),
        t0 + Duration::from_secs(3),
    );
    let owned: usize = settled.values().map(|(_, a)| count(a)).sum();
    assert_eq!(owned, usize::try_from(partitions).unwrap());
    assert_eq!(g.state(), "Stable");
}
