//! A share group's figures as the management API reads them (`KafkaAdmin::share_groups`,
//! `share_group`), driven by raw ShareGroupHeartbeat, ShareFetch and ShareAcknowledge
//! requests: records acquired and not acknowledged are in flight, released ones waiting,
//! rejected ones archived; the start offset is the lowest not settled and the lag the
//! records not settled (waiting, in flight, produced past the end offset: settled records
//! above the start do not count), 0 once every record is accepted; the members and their assignments;
//! a share group is not a consumer group; and another instance's look leaves the group
//! unknown to it.

use super::fixture::{Front, batch};
use super::produce;
use super::share_groups::{
    ACCEPT, GROUP, RELEASE, TOPIC, acknowledge, acquired, fetch, from_earliest, heartbeat,
    partition,
};
use crate::admin::{KafkaAdmin, ShareGroupFigures, SharePartitionFigures};
use crate::share::ShareGroups;
use uuid::Uuid;

const REJECT: i8 = 3;

/// (start, end, high watermark, in flight, waiting, archived, lag) of the one partition of
/// the group.
type Figures = (i64, i64, i64, i64, i64, i64, i64);

fn figures(p: &SharePartitionFigures) -> Figures {
    (
        p.start_offset,
        p.end_offset,
        p.high_watermark,
        p.in_flight,
        p.waiting,
        p.archived,
        p.lag,
    )
}

/// `GROUP` as the API shows it, with its one partition's figures.
async fn shown(admin: &KafkaAdmin) -> (ShareGroupFigures, Figures) {
    let g = admin
        .share_group(GROUP)
        .await
        .unwrap()
        .expect("a share group");
    let listed = admin.share_groups().await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&g), "the list shows the same");
    assert_eq!(g.partitions.len(), 1, "{g:?}");
    let p = &g.partitions[0];
    assert_eq!((p.topic.as_str(), p.partition), (TOPIC, 0));
    let f = figures(p);
    (g, f)
}

#[tokio::test]
async fn in_flight_waiting_archived_and_lag_follow_acquisitions_and_acknowledgements() {
    let front = Front::start().await;
    let admin = KafkaAdmin::new(front.ctx.clone());
    let mut c = front.client();
    super::create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    produce(&mut c, TOPIC, 0, batch(&["a", "b", "c", "d", "e", "f"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    // Settings alone make no share group.
    assert_eq!(admin.share_groups().await.unwrap(), []);
    assert_eq!(admin.share_group(GROUP).await.unwrap(), None);

    assert_eq!(heartbeat(&mut c, "m1", 0).await.error_code, 0);
    let (g, f) = shown(&admin).await;
    assert_eq!((g.state, g.members.len()), ("Stable", 1));
    let m = &g.members[0];
    assert_eq!(
        (m.id.as_str(), m.client_id.as_str(), m.client_host.as_str()),
        ("m1", "api-test", "/127.0.0.1")
    );
    assert_eq!(m.assigned, [(TOPIC.to_owned(), vec![0])]);
    assert_eq!(m.subscribed, [TOPIC]);
    assert_eq!(f, (0, 0, 6, 0, 0, 0, 6), "started at 0, nothing fed yet");
    // Not a consumer group.
    assert_eq!(admin.groups().await.unwrap(), []);
    assert_eq!(admin.group(GROUP).await.unwrap(), None);

    let got = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&got)), [(0, 5, 1)]);
    assert_eq!(
        shown(&admin).await.1,
        (0, 6, 6, 6, 0, 0, 6),
        "all in flight"
    );

    // 0 rejected, 1 accepted, 2 released: 3..5 still in flight, 2 waiting.
    let settled = c
        .call(
            1,
            acknowledge(
                "m1",
                1,
                topic,
                &[(0, 0, REJECT), (1, 1, ACCEPT), (2, 2, RELEASE)],
            ),
        )
        .await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);
    let (g, f) = shown(&admin).await;
    assert_eq!(f, (2, 6, 6, 3, 1, 1, 4));
    assert_eq!(
        (
            g.total(|p| p.in_flight),
            g.total(|p| p.archived),
            g.total(|p| p.lag)
        ),
        (3, 1, 4)
    );

    let settled = c
        .call(1, acknowledge("m1", 2, topic, &[(3, 5, ACCEPT)]))
        .await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);
    // Only 2 is left: 3..5, accepted above the start offset, are no lag.
    assert_eq!(shown(&admin).await.1, (2, 6, 6, 0, 1, 1, 1));
    let again = fetch(&mut c, "m1", 3, topic, &[]).await;
    assert_eq!(acquired(partition(&again)), [(2, 2, 2)]);
    assert_eq!(shown(&admin).await.1, (2, 6, 6, 1, 0, 1, 1));
    let settled = c
        .call(1, acknowledge("m1", 4, topic, &[(2, 2, ACCEPT)]))
        .await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);
    assert_eq!(
        shown(&admin).await.1,
        (6, 6, 6, 0, 0, 1, 0),
        "every record settled: no lag"
    );

    // Records produced since are lag, not yet fed.
    produce(&mut c, TOPIC, 0, batch(&["g", "h"])).await;
    assert_eq!(shown(&admin).await.1, (6, 6, 8, 0, 0, 1, 2));

    // The member leaves; the group stays, empty.
    assert_eq!(heartbeat(&mut c, "m1", -1).await.error_code, 0);
    let (g, f) = shown(&admin).await;
    assert_eq!((g.state, g.members.len()), ("Empty", 0));
    assert_eq!(f, (6, 6, 8, 0, 0, 1, 2));
    assert_eq!(admin.share_group("nobody").await.unwrap(), None);
    front.stop().await;
}

/// Another instance over the same store (one that does not serve the group) sees the same
/// counts of records and no members, and its looks — the API's and the metrics' — leave it
/// not knowing the group, so its ShareGroupDescribe still answers `GROUP_ID_NOT_FOUND`.
#[tokio::test]
async fn another_instance_sees_the_records_and_a_look_leaves_the_group_unknown_to_it() {
    let front = Front::start().await;
    let mut c = front.client();
    super::create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    produce(&mut c, TOPIC, 0, batch(&["a", "b", "c"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    assert_eq!(heartbeat(&mut c, "m1", 0).await.error_code, 0);
    let got = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&got)), [(0, 2, 1)]);
    let settled = c
        .call(1, acknowledge("m1", 1, topic, &[(0, 0, REJECT)]))
        .await;
    assert_eq!(settled.responses[0].partitions[0].error_code, 0);

    let ctx = &front.ctx;
    let prefix = ferry_store::StoreConfig::default().prefix;
    let stages = ferry_stage::Stages::new(ctx.db.clone(), &prefix);
    let other = ShareGroups::new(ctx.db.clone(), ctx.keys.clone(), ctx.topics.clone(), stages);
    assert_eq!(other.names().await.unwrap(), [GROUP]);
    assert!(other.is_listed(GROUP).await.unwrap());
    let seen = other.figures(GROUP).await.unwrap();
    assert_eq!((seen.state, seen.members.len()), ("Empty", 0));
    // Records 1 and 2 are in flight; this instance handed none out, so its start offset is
    // the lowest waiting (none), else the end.
    let p = &seen.partitions[0];
    assert_eq!(
        (
            p.in_flight,
            p.waiting,
            p.archived,
            p.end_offset,
            p.high_watermark
        ),
        (2, 0, 1, 3, 3)
    );
    other.publish().await.unwrap();
    assert!(
        other.state(GROUP).is_none() && other.describe(GROUP).is_none(),
        "looking made the group one this instance knows"
    );
    front.stop().await;
}
