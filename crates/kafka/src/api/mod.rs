//! The Kafka APIs Ferry implements, one module each, and the table of versions
//! ApiVersions advertises — exactly the versions these modules answer, flexible versions
//! included.
//!
//! A handler returns a [`Reply`]. Work whose order matters (staging a produced batch,
//! queueing a group command, committing offsets) happens before the handler returns, so it
//! follows the connection's request order; waiting (for the sequencer, a long poll, a
//! rebalance) is the `Later` future, which runs concurrently with the next requests while
//! the connection still answers in request order.

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod alter_partition_reassignments;
mod alter_replica_log_dirs;
mod alter_share_group_offsets;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_topics;
mod describe_acls;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_share_group_offsets;
mod describe_transactions;
mod describe_user_scram_credentials;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
pub(crate) mod sasl_authenticate;
pub(crate) mod sasl_handshake;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod sync_group;
mod txn_offset_commit;

#[cfg(test)]
pub(crate) mod tests;

pub(crate) use api_versions::unsupported_version;

use super::Context;
use crate::acls::model::USER_PREFIX;
use crate::acls::{Access, Caller};
use crate::wire::codec::Request;
use ferry_auth::ScramLogin;
use ferry_auth::peer::Peer;
use ferry_auth::principal::PrincipalRules;
use ferry_config::listeners::SecurityProtocol;
use futures::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;

/// Every API Ferry answers, with the versions it answers.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 5),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::DescribeAcls, 1, 2),
    (ApiKey::CreateAcls, 1, 2),
    (ApiKey::DeleteAcls, 1, 2),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
];

/// Whether Ferry answers `api` at `version`.
pub fn supported(api: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|&(a, min, max)| a == api && (min..=max).contains(&version))
}

/// What one connection knows about its client.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The client: its address, and its TLS session when it has one.
    pub peer: Peer,
    /// The listener the client came in on (named by its security protocol); Metadata and
    /// FindCoordinator answer with the brokers' addresses on that listener.
    pub listener: SecurityProtocol,
    /// Whether the client must authenticate with SASL before other requests (a SASL_*
    /// listener, or `kafka.require_sasl` on a PLAINTEXT one).
    pub require_sasl: bool,
    /// The client id of its latest request.
    pub client_id: String,
    /// Where the SASL exchange stands.
    pub sasl: SaslState,
    /// Whether the SASL exchange goes on in bare tokens: after a SaslHandshake v0 (Kafka
    /// 0.10's framing), each client message is a size-prefixed token with no request
    /// header, answered the same way, until the login ends.
    pub sasl_tokens: bool,
    /// The user the client authenticated as with SASL.
    pub user: Option<String>,
    /// How that user logged in, and until when.
    pub login: Option<Login>,
    /// The principal `kafka.ssl_principal_mapping_rules` gives the client certificate's
    /// subject (a TLS listener with a client certificate); `None` without a certificate
    /// or when no rule matches.
    pub certificate_principal: Option<String>,
}

/// A SASL login on a connection: its mechanism (a re-authentication must use it again,
/// as Kafka requires) and when it ends (`kafka.connections_max_reauth_ms`, KIP-368;
/// `None`: with the connection).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Login {
    /// The mechanism it used.
    pub mechanism: sasl_handshake::SaslMechanism,
    /// When it ends: the connection may then only authenticate again.
    pub expires: Option<std::time::Instant>,
}

/// Where a connection's SASL exchange stands.
#[derive(Debug, Clone)]
pub(crate) enum SaslState {
    /// No mechanism chosen (or the exchange is over).
    None,
    /// SaslHandshake chose this mechanism; SaslAuthenticate comes next.
    Chosen(sasl_handshake::SaslMechanism),
    /// SCRAM server-first was sent; client-final comes next.
    ScramFinal(Box<ScramLogin>),
}

impl Session {
    /// A session of a client `peer` on `listener`, not authenticated; its certificate's
    /// principal, if it has one, by `rules`.
    pub(crate) fn new(
        peer: Peer,
        listener: SecurityProtocol,
        require_sasl: bool,
        rules: &PrincipalRules,
    ) -> Self {
        let certificate_principal = peer.certificate().and_then(|c| rules.apply(&c.subject));
        Self {
            peer,
            listener,
            require_sasl,
            client_id: String::new(),
            sasl: SaslState::None,
            sasl_tokens: false,
            user: None,
            login: None,
            certificate_principal,
        }
    }

    /// Who the client is for authorization: the SASL user, else the certificate's
    /// principal.
    pub(crate) fn principal(&self) -> Option<&str> {
        self.user
            .as_deref()
            .or(self.certificate_principal.as_deref())
    }

    /// The client's access by the ACLs of `ctx`.
    pub(crate) fn access(&self, ctx: &Context) -> Access {
        Access::new(ctx.acls.clone(), self.caller())
    }

    /// The client as ACLs name it: `User:<SASL user>`, else `User:<certificate
    /// principal>`, else `User:ANONYMOUS` (as Kafka), from its IP address.
    pub(crate) fn caller(&self) -> Caller {
        Caller {
            principal: format!("{USER_PREFIX}{}", self.principal().unwrap_or(ANONYMOUS)),
            host: self.peer.addr.ip().to_string(),
        }
    }
}

/// The principal name of a client that neither authenticated nor showed a certificate.
pub(crate) const ANONYMOUS: &str = "ANONYMOUS";

/// How a request is answered.
pub(crate) enum Reply {
    /// With this response.
    Now(ResponseKind),
    /// With the response this future produces.
    Later(BoxFuture<'static, ResponseKind>),
    /// Not at all (a produce with `acks=0`).
    Nothing,
    /// With this response, then the connection closes (failed authentication).
    Last(ResponseKind),
    /// The connection closes, for this reason, after the answers already owed.
    Close(String),
}

/// Why the session may not make a request of `api` now, if it may not: on a listener that
/// requires SASL, only ApiVersions and the SASL exchange come before authentication; a
/// client certificate whose subject no `kafka.ssl_principal_mapping_rules` rule maps may
/// make none (as Kafka closes such a connection); once a SASL login has expired
/// (`kafka.connections_max_reauth_ms`), only a re-authentication may come (KIP-368: Kafka
/// closes the connection on any other request).
pub(crate) fn refusal(session: &Session, api: ApiKey) -> Option<String> {
    if session.peer.certificate().is_some() && session.certificate_principal.is_none() {
        return Some(
            "the client certificate's subject matches no kafka.ssl_principal_mapping_rules rule"
                .to_owned(),
        );
    }
    let open = matches!(
        api,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    );
    let expired = session
        .login
        .and_then(|l| l.expires)
        .is_some_and(|at| at <= std::time::Instant::now());
    if expired && !matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
        return Some(format!(
            "{api:?} after the SASL login expired without a re-authentication (kafka.connections_max_reauth_ms)"
        ));
    }
    (session.require_sasl && session.user.is_none() && !open).then(|| {
        let why = if session.listener.is_sasl() {
            format!("the {} listener requires it", session.listener)
        } else {
            "kafka.require_sasl is on".to_owned()
        };
        format!("{api:?} before SASL authentication ({why})")
    })
}

/// Answers a burst of produce requests the connection read back to back (their batches are
/// staged together); one reply per request, in order. Check [`refusal`] first.
pub(crate) async fn produce_burst(
    ctx: &Arc<Context>,
    session: &Session,
    requests: Vec<(i16, ProduceRequest)>,
    throttle: Duration,
) -> Vec<Reply> {
    produce::handle(ctx, &session.access(ctx), requests, throttle).await
}

/// Answers one bare SASL token (a [`Session::sasl_tokens`] exchange) as SaslAuthenticate
/// v0 answers its bytes: with the server's token, or [`Reply::Last`] when the login fails
/// (Kafka then closes the connection without a word). The exchange goes on in tokens while
/// it has a further step.
pub(crate) async fn sasl_token(
    ctx: &Arc<Context>,
    session: &mut Session,
    token: bytes::Bytes,
) -> Reply {
    let request =
        kafka_protocol::messages::SaslAuthenticateRequest::default().with_auth_bytes(token);
    let reply = sasl_authenticate::handle(ctx, session, 0, request).await;
    session.sasl_tokens = matches!(session.sasl, SaslState::ScramFinal(_));
    reply
}

/// Answers one request.
pub(crate) async fn handle(ctx: &Arc<Context>, session: &mut Session, request: Request) -> Reply {
    let version = request.version();
    if let Some(reason) = refusal(session, request.api) {
        return Reply::Close(reason);
    }
    match request.body {
        RequestKind::ApiVersions(_) => Reply::Now(api_versions::handle(version)),
        RequestKind::Metadata(r) => Reply::Now(metadata::handle(ctx, session, version, r).await),
        RequestKind::Produce(r) => produce::handle(
            ctx,
            &session.access(ctx),
            vec![(version, r)],
            Duration::ZERO,
        )
        .await
        .pop()
        .unwrap_or(Reply::Nothing),
        RequestKind::Fetch(r) => fetch::handle(ctx, session, version, r),
        RequestKind::ListOffsets(r) => {
            Reply::Now(list_offsets::handle(ctx, session, version, r).await)
        }
        RequestKind::FindCoordinator(r) => {
            Reply::Now(find_coordinator::handle(ctx, session, version, r).await)
        }
        RequestKind::JoinGroup(r) => join_group::handle(ctx, session, version, r).await,
        RequestKind::SyncGroup(r) => sync_group::handle(ctx, session, r).await,
        RequestKind::Heartbeat(r) => heartbeat::handle(ctx, session, r).await,
        RequestKind::LeaveGroup(r) => leave_group::handle(ctx, session, version, r).await,
        RequestKind::ConsumerGroupHeartbeat(r) => {
            consumer_group_heartbeat::handle(ctx, session, version, r).await
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            Reply::Now(consumer_group_describe::handle(ctx, session, r).await)
        }
        RequestKind::ShareGroupHeartbeat(r) => share_group_heartbeat::handle(ctx, session, r).await,
        RequestKind::ShareGroupDescribe(r) => {
            Reply::Now(share_group_describe::handle(ctx, session, r))
        }
        RequestKind::ShareFetch(r) => share_fetch::handle(ctx, session, r).await,
        RequestKind::ShareAcknowledge(r) => {
            Reply::Now(share_acknowledge::handle(ctx, session, r).await)
        }
        RequestKind::DescribeShareGroupOffsets(r) => {
            Reply::Now(describe_share_group_offsets::handle(ctx, session, r).await)
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            Reply::Now(alter_share_group_offsets::handle(ctx, session, r).await)
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            Reply::Now(delete_share_group_offsets::handle(ctx, session, r).await)
        }
        RequestKind::OffsetCommit(r) => Reply::Now(offset_commit::handle(ctx, session, r).await),
        RequestKind::OffsetFetch(r) => {
            Reply::Now(offset_fetch::handle(ctx, session, version, r).await)
        }
        RequestKind::DescribeGroups(r) => {
            Reply::Now(describe_groups::handle(ctx, session, r).await)
        }
        RequestKind::ListGroups(r) => Reply::Now(list_groups::handle(ctx, session, r).await),
        RequestKind::DeleteGroups(r) => Reply::Now(delete_groups::handle(ctx, session, r).await),
        RequestKind::OffsetDelete(r) => Reply::Now(offset_delete::handle(ctx, session, r).await),
        RequestKind::DeleteRecords(r) => Reply::Now(delete_records::handle(ctx, session, r).await),
        RequestKind::OffsetForLeaderEpoch(r) => {
            Reply::Now(offset_for_leader_epoch::handle(ctx, session, r).await)
        }
        RequestKind::CreateTopics(r) => {
            Reply::Now(create_topics::handle(ctx, session, version, r).await)
        }
        RequestKind::DeleteTopics(r) => {
            Reply::Now(delete_topics::handle(ctx, session, version, r).await)
        }
        RequestKind::CreatePartitions(r) => {
            Reply::Now(create_partitions::handle(ctx, session, r).await)
        }
        RequestKind::DescribeConfigs(r) => {
            Reply::Now(describe_configs::handle(ctx, session, version, r).await)
        }
        RequestKind::AlterConfigs(r) => Reply::Now(alter_configs::handle(ctx, session, r).await),
        RequestKind::DescribeLogDirs(r) => {
            Reply::Now(describe_log_dirs::handle(ctx, session, r).await)
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            Reply::Now(alter_replica_log_dirs::handle(ctx, session, r).await)
        }
        RequestKind::ElectLeaders(r) => Reply::Now(elect_leaders::handle(ctx, session, r).await),
        RequestKind::ListPartitionReassignments(r) => {
            Reply::Now(list_partition_reassignments::handle(ctx, session, r))
        }
        RequestKind::AlterPartitionReassignments(r) => {
            Reply::Now(alter_partition_reassignments::handle(ctx, session, r).await)
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            Reply::Now(incremental_alter_configs::handle(ctx, session, r).await)
        }
        RequestKind::InitProducerId(r) => {
            Reply::Now(init_producer_id::handle(ctx, session, r).await)
        }
        RequestKind::AddPartitionsToTxn(r) => {
            Reply::Now(add_partitions_to_txn::handle(ctx, session, r).await)
        }
        RequestKind::AddOffsetsToTxn(r) => {
            Reply::Now(add_offsets_to_txn::handle(ctx, session, r).await)
        }
        RequestKind::TxnOffsetCommit(r) => {
            Reply::Now(txn_offset_commit::handle(ctx, session, r).await)
        }
        RequestKind::EndTxn(r) => Reply::Now(end_txn::handle(ctx, session, r).await),
        RequestKind::CreateAcls(r) => Reply::Now(create_acls::handle(ctx, session, r).await),
        RequestKind::DescribeAcls(r) => Reply::Now(describe_acls::handle(ctx, session, r).await),
        RequestKind::DescribeCluster(r) => {
            Reply::Now(describe_cluster::handle(ctx, session, version, r).await)
        }
        RequestKind::DeleteAcls(r) => Reply::Now(delete_acls::handle(ctx, session, r).await),
        RequestKind::DescribeProducers(r) => {
            Reply::Now(describe_producers::handle(ctx, session, r).await)
        }
        RequestKind::DescribeTransactions(r) => {
            Reply::Now(describe_transactions::handle(ctx, session, r).await)
        }
        RequestKind::ListTransactions(r) => {
            Reply::Now(list_transactions::handle(ctx, session, r).await)
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            Reply::Now(describe_user_scram_credentials::handle(ctx, session, r).await)
        }
        RequestKind::AlterUserScramCredentials(r) => {
            Reply::Now(alter_user_scram_credentials::handle(ctx, session, r).await)
        }
        RequestKind::SaslHandshake(r) => Reply::Now(sasl_handshake::handle(session, version, r)),
        RequestKind::SaslAuthenticate(r) => {
            sasl_authenticate::handle(ctx, session, version, r).await
        }
        other => Reply::Close(format!("{other:?} is not implemented")),
    }
}

/// The first error code in `response` (0 when none), for the requests metric.
pub(crate) fn first_error(response: &ResponseKind) -> i16 {
    match response {
        ResponseKind::ApiVersions(r) => r.error_code,
        ResponseKind::Metadata(r) => first(r.topics.iter().flat_map(|t| {
            std::iter::once(t.error_code).chain(t.partitions.iter().map(|p| p.error_code))
        })),
        ResponseKind::Produce(r) => first(
            &mut r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Fetch(r) => first(
            &mut std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::ListOffsets(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::FindCoordinator(r) => first(
            &mut std::iter::once(r.error_code).chain(r.coordinators.iter().map(|c| c.error_code)),
        ),
        ResponseKind::JoinGroup(r) => r.error_code,
        ResponseKind::SyncGroup(r) => r.error_code,
        ResponseKind::Heartbeat(r) => r.error_code,
        ResponseKind::LeaveGroup(r) => {
            first(&mut std::iter::once(r.error_code).chain(r.members.iter().map(|m| m.error_code)))
        }
        ResponseKind::OffsetCommit(r) => first(
            &mut r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::OffsetFetch(r) => first(
            &mut std::iter::once(r.error_code).chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DescribeGroups(r) => first(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::ListGroups(r) => r.error_code,
        ResponseKind::ConsumerGroupHeartbeat(r) => r.error_code,
        ResponseKind::ConsumerGroupDescribe(r) => first(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::ShareGroupHeartbeat(r) => r.error_code,
        ResponseKind::DescribeShareGroupOffsets(r) => first(r.groups.iter().flat_map(|g| {
            std::iter::once(g.error_code).chain(
                g.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            )
        })),
        ResponseKind::AlterShareGroupOffsets(r) => first(
            std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DeleteShareGroupOffsets(r) => {
            first(std::iter::once(r.error_code).chain(r.responses.iter().map(|t| t.error_code)))
        }
        ResponseKind::ShareGroupDescribe(r) => first(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::ShareFetch(r) => first(std::iter::once(r.error_code).chain(
            r.responses.iter().flat_map(|t| {
                t.partitions
                    .iter()
                    .flat_map(|p| [p.error_code, p.acknowledge_error_code])
            }),
        )),
        ResponseKind::ShareAcknowledge(r) => first(
            std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DeleteGroups(r) => first(r.results.iter().map(|g| g.error_code)),
        ResponseKind::OffsetDelete(r) => first(
            std::iter::once(r.error_code).chain(
                r.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::DeleteRecords(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::CreateTopics(r) => first(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DeleteTopics(r) => first(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::CreatePartitions(r) => first(r.results.iter().map(|t| t.error_code)),
        ResponseKind::DescribeConfigs(r) => first(r.results.iter().map(|t| t.error_code)),
        ResponseKind::AlterConfigs(r) => first(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::DescribeLogDirs(r) => {
            first(std::iter::once(r.error_code).chain(r.results.iter().map(|d| d.error_code)))
        }
        ResponseKind::AlterReplicaLogDirs(r) => first(
            r.results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::ElectLeaders(r) => first(
            std::iter::once(r.error_code).chain(
                r.replica_election_results
                    .iter()
                    .flat_map(|t| t.partition_result.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::ListPartitionReassignments(r) => r.error_code,
        ResponseKind::AlterPartitionReassignments(r) => first(
            std::iter::once(r.error_code).chain(
                r.responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
            ),
        ),
        ResponseKind::IncrementalAlterConfigs(r) => first(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::InitProducerId(r) => r.error_code,
        ResponseKind::AddPartitionsToTxn(r) => {
            first(r.results_by_topic_v3_and_below.iter().flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            }))
        }
        ResponseKind::AddOffsetsToTxn(r) => r.error_code,
        ResponseKind::TxnOffsetCommit(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::EndTxn(r) => r.error_code,
        ResponseKind::CreateAcls(r) => first(r.results.iter().map(|c| c.error_code)),
        ResponseKind::DescribeAcls(r) => r.error_code,
        ResponseKind::DescribeCluster(r) => r.error_code,
        ResponseKind::DeleteAcls(r) => first(r.filter_results.iter().map(|f| f.error_code)),
        ResponseKind::DescribeProducers(r) => first(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::DescribeTransactions(r) => {
            first(r.transaction_states.iter().map(|t| t.error_code))
        }
        ResponseKind::ListTransactions(r) => r.error_code,
        ResponseKind::DescribeUserScramCredentials(r) => {
            first(std::iter::once(r.error_code).chain(r.results.iter().map(|u| u.error_code)))
        }
        ResponseKind::AlterUserScramCredentials(r) => first(r.results.iter().map(|u| u.error_code)),
        ResponseKind::SaslHandshake(r) => r.error_code,
        ResponseKind::SaslAuthenticate(r) => r.error_code,
        _ => 0,
    }
}

/// The error code answering a transaction coordinator step; failures other than a
/// refusal are logged with the transactional id and the API.
fn logged(
    transactional_id: &str,
    api: &str,
    outcome: Result<(), crate::coordinator::transactions::TxnError>,
) -> i16 {
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            if !matches!(e, crate::coordinator::transactions::TxnError::Refused(_)) {
                tracing::warn!(transactional_id, api, error = %e, "transaction step failed");
            }
            e.code()
        }
    }
}

/// `items` grouped by name, each name once, in the order it first comes (a request that
/// names a user twice is refused for it).
fn grouped<'a, T>(items: impl IntoIterator<Item = (&'a str, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&'a str, Vec<T>)> = Vec::new();
    let mut index: std::collections::HashMap<&'a str, usize> = std::collections::HashMap::new();
    for (name, item) in items {
        let at = *index.entry(name).or_insert_with(|| {
            groups.push((name, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(item);
    }
    groups
}

/// The first non-zero code of `codes`, or 0.
fn first(mut codes: impl Iterator<Item = i16>) -> i16 {
    codes.find(|c| *c != 0).unwrap_or(0)
}

/// An error code with the message that goes with it, for an answer's `error_code` and
/// `error_message`.
pub(crate) type Refused = (i16, String);

/// A protocol string.
pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
