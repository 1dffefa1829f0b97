//! The channel's methods besides publishing: exchanges, queues, bindings, consumers,
//! basic.get, qos, acknowledgements, recover, flow, confirm and tx. Permissions are
//! checked as RabbitMQ checks them: by the virtual host for topology changes (their order
//! depends on what exists), here for consume, get, purge and queue.delete.

use super::{Channel, Exit};
use crate::consuming::settle::How;
use crate::state::direct_reply;
use crate::state::topology::args::QueueArgs;
use crate::state::topology::{Binding, Destination, Exchange, ExchangeKind, QueueSpec};
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{
    AMQPClass, access, basic, channel as ch, confirm, exchange, queue, tx,
};
use ferry_auth::access::Resource;
use ferry_auth::permissions::Access;

impl Channel {
    /// basic.ack, basic.nack, basic.reject.
    pub(super) fn on_settle(&mut self, method: &AMQPClass) -> Result<(), AmqpError> {
        let (tag, multiple, how) = match method {
            AMQPClass::Basic(basic::AMQPMethod::Ack(a)) => (a.delivery_tag, a.multiple, How::Ack),
            AMQPClass::Basic(basic::AMQPMethod::Nack(n)) => {
                (n.delivery_tag, n.multiple, requeue_or_reject(n.requeue))
            }
            AMQPClass::Basic(basic::AMQPMethod::Reject(r)) => {
                (r.delivery_tag, false, requeue_or_reject(r.requeue))
            }
            _ => return Ok(()),
        };
        let settlements = self.consumers.settle(tag, multiple, how)?;
        if self.publisher.transactional() {
            self.held_settlements.extend(settlements);
        } else {
            self.consumers.queue_settlements(settlements);
        }
        Ok(())
    }

    /// Every method that waits for the channel's publishes to be stored first.
    pub(super) async fn on_sync_method(
        &mut self,
        method: &AMQPClass,
    ) -> Result<Option<Exit>, AmqpError> {
        match method {
            AMQPClass::Exchange(m) => self.on_exchange(m).await,
            AMQPClass::Queue(m) => self.on_queue(m).await,
            AMQPClass::Basic(m) => self.on_basic(m).await,
            AMQPClass::Confirm(confirm::AMQPMethod::Select(s)) => {
                self.publisher.select_confirm()?;
                self.reply_unless(
                    s.nowait,
                    AMQPClass::Confirm(confirm::AMQPMethod::SelectOk(confirm::SelectOk {})),
                )
                .await
            }
            AMQPClass::Tx(m) => self.on_tx(m).await,
            AMQPClass::Channel(ch::AMQPMethod::Flow(f)) => {
                self.consumers.flow(f.active);
                self.reply_unless(
                    false,
                    AMQPClass::Channel(ch::AMQPMethod::FlowOk(ch::FlowOk { active: f.active })),
                )
                .await
            }
            // Obsolete, but old clients send it; RabbitMQ answers it.
            AMQPClass::Access(access::AMQPMethod::Request(_)) => {
                self.reply_unless(
                    false,
                    AMQPClass::Access(access::AMQPMethod::RequestOk(access::RequestOk {})),
                )
                .await
            }
            other => Err(not_from_client(other)),
        }
    }

    async fn on_exchange(
        &mut self,
        method: &exchange::AMQPMethod,
    ) -> Result<Option<Exit>, AmqpError> {
        let vhost = self.ctx.vhost.clone();
        match method {
            exchange::AMQPMethod::Declare(d) if d.passive => {
                vhost.check_exchange(d.exchange.as_str())?;
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Exchange(exchange::AMQPMethod::DeclareOk(exchange::DeclareOk {})),
                )
                .await
            }
            exchange::AMQPMethod::Declare(d) => {
                let (kind, delayed) = ExchangeKind::declared(d.kind.as_str(), &d.arguments)?;
                let wanted = Exchange {
                    name: d.exchange.to_string(),
                    kind,
                    delayed,
                    durable: d.durable,
                    auto_delete: d.auto_delete,
                    internal: d.internal,
                    arguments: d.arguments.clone(),
                    owner: if d.durable {
                        0
                    } else {
                        self.ctx.broker.instance
                    },
                    builtin: false,
                };
                vhost
                    .declare_exchange(wanted, &*self.ctx.access.current())
                    .await?;
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Exchange(exchange::AMQPMethod::DeclareOk(exchange::DeclareOk {})),
                )
                .await
            }
            exchange::AMQPMethod::Delete(d) => {
                vhost
                    .delete_exchange(
                        d.exchange.as_str(),
                        d.if_unused,
                        &*self.ctx.access.current(),
                    )
                    .await?;
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Exchange(exchange::AMQPMethod::DeleteOk(exchange::DeleteOk {})),
                )
                .await
            }
            exchange::AMQPMethod::Bind(b) => {
                let binding = Binding {
                    source: b.source.to_string(),
                    destination: Destination::Exchange(b.destination.to_string()),
                    routing_key: b.routing_key.to_string(),
                    arguments: b.arguments.clone(),
                };
                vhost
                    .bind(binding, self.ctx.id, &*self.ctx.access.current())
                    .await?;
                self.reply_unless(
                    b.nowait,
                    AMQPClass::Exchange(exchange::AMQPMethod::BindOk(exchange::BindOk {})),
                )
                .await
            }
            exchange::AMQPMethod::Unbind(u) => {
                let binding = Binding {
                    source: u.source.to_string(),
                    destination: Destination::Exchange(u.destination.to_string()),
                    routing_key: u.routing_key.to_string(),
                    arguments: u.arguments.clone(),
                };
                vhost
                    .unbind(binding, self.ctx.id, &*self.ctx.access.current())
                    .await?;
                self.reply_unless(
                    u.nowait,
                    AMQPClass::Exchange(exchange::AMQPMethod::UnbindOk(exchange::UnbindOk {})),
                )
                .await
            }
            other => Err(not_from_client(&AMQPClass::Exchange(other.clone()))),
        }
    }

    /// The queue a method names; "" is the channel's last declared queue.
    fn queue_name(&self, name: &str) -> Result<String, AmqpError> {
        if !name.is_empty() {
            return Ok(name.to_owned());
        }
        self.last_queue
            .clone()
            .ok_or_else(|| AmqpError::not_found("no previously declared queue"))
    }

    /// Checks a permission of the connection's user.
    fn authorize(&self, access: Access, resource: Resource<'_>) -> Result<(), AmqpError> {
        crate::authorize::Authorize::check(&*self.ctx.access.current(), access, resource)
    }

    /// The queue a consume, get or purge names, once read on it is allowed (checked
    /// before the queue is looked up, as RabbitMQ does).
    fn readable_queue(
        &self,
        name: &str,
    ) -> Result<std::sync::Arc<crate::state::topology::Queue>, AmqpError> {
        let name = self.queue_name(name)?;
        self.authorize(Access::Read, Resource::Queue(&name))?;
        self.ctx.vhost.queue(&name, self.ctx.id)
    }

    async fn on_queue(&mut self, method: &queue::AMQPMethod) -> Result<Option<Exit>, AmqpError> {
        let vhost = self.ctx.vhost.clone();
        let connection = self.ctx.id;
        match method {
            queue::AMQPMethod::Declare(d)
                if d.passive && direct_reply::is_reply_queue(d.queue.as_str()) =>
            {
                // As RabbitMQ: the pseudo-queue always answers, a reply address while its
                // channel consumes it.
                let name = d.queue.as_str();
                if name != direct_reply::PSEUDO_QUEUE
                    && !self.ctx.broker.direct_replies.exists(name)
                {
                    return Err(AmqpError::not_found(format!(
                        "no queue '{name}' in vhost '{}'",
                        vhost.name
                    )));
                }
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Queue(queue::AMQPMethod::DeclareOk(queue::DeclareOk {
                        queue: d.queue.clone(),
                        message_count: 0,
                        consumer_count: 1,
                    })),
                )
                .await
            }
            queue::AMQPMethod::Declare(d) => {
                let spec = QueueSpec {
                    durable: d.durable,
                    exclusive_owner: d.exclusive.then_some(connection),
                    auto_delete: d.auto_delete,
                    // A passive declare only checks that the queue exists (as RabbitMQ's, it
                    // ignores flags and arguments), so its arguments are not even parsed.
                    args: if d.passive {
                        QueueArgs::default()
                    } else {
                        QueueArgs::parse(&d.arguments)?
                    },
                    owner: if d.exclusive {
                        connection
                    } else if d.durable {
                        0
                    } else {
                        self.ctx.broker.instance
                    },
                };
                let name = if d.passive {
                    self.queue_name(d.queue.as_str())?
                } else {
                    d.queue.to_string()
                };
                let queue = vhost
                    .declare_queue(
                        &name,
                        spec,
                        d.passive,
                        connection,
                        &*self.ctx.access.current(),
                    )
                    .await?;
                self.last_queue = Some(queue.name.clone());
                let ready = queue.stage.depth().await?.ready.max(0) as u32;
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Queue(queue::AMQPMethod::DeclareOk(queue::DeclareOk {
                        queue: queue.name.as_str().into(),
                        message_count: ready,
                        consumer_count: queue.consumers() as u32,
                    })),
                )
                .await
            }
            queue::AMQPMethod::Bind(b) => {
                let name = self.queue_name(b.queue.as_str())?;
                let routing_key =
                    if b.queue.as_str().is_empty() && b.routing_key.as_str().is_empty() {
                        name.clone()
                    } else {
                        b.routing_key.to_string()
                    };
                let binding = Binding {
                    source: b.exchange.to_string(),
                    destination: Destination::Queue(name),
                    routing_key,
                    arguments: b.arguments.clone(),
                };
                vhost
                    .bind(binding, connection, &*self.ctx.access.current())
                    .await?;
                self.reply_unless(
                    b.nowait,
                    AMQPClass::Queue(queue::AMQPMethod::BindOk(queue::BindOk {})),
                )
                .await
            }
            queue::AMQPMethod::Unbind(u) => {
                let binding = Binding {
                    source: u.exchange.to_string(),
                    destination: Destination::Queue(self.queue_name(u.queue.as_str())?),
                    routing_key: u.routing_key.to_string(),
                    arguments: u.arguments.clone(),
                };
                vhost
                    .unbind(binding, connection, &*self.ctx.access.current())
                    .await?;
                self.reply_unless(
                    false,
                    AMQPClass::Queue(queue::AMQPMethod::UnbindOk(queue::UnbindOk {})),
                )
                .await
            }
            queue::AMQPMethod::Purge(p) => {
                let queue = self.readable_queue(p.queue.as_str())?;
                let purged = queue.stage.purge().await? as u32;
                self.reply_unless(
                    p.nowait,
                    AMQPClass::Queue(queue::AMQPMethod::PurgeOk(queue::PurgeOk {
                        message_count: purged,
                    })),
                )
                .await
            }
            queue::AMQPMethod::Delete(d) => {
                let name = self.queue_name(d.queue.as_str())?;
                self.authorize(Access::Configure, Resource::Queue(&name))?;
                let count = vhost
                    .delete_queue(&name, d.if_unused, d.if_empty, connection)
                    .await?;
                self.reply_unless(
                    d.nowait,
                    AMQPClass::Queue(queue::AMQPMethod::DeleteOk(queue::DeleteOk {
                        message_count: count,
                    })),
                )
                .await
            }
            other => Err(not_from_client(&AMQPClass::Queue(other.clone()))),
        }
    }

    async fn on_basic(&mut self, method: &basic::AMQPMethod) -> Result<Option<Exit>, AmqpError> {
        match method {
            basic::AMQPMethod::Qos(q) => {
                self.consumers.qos(q.prefetch_count, q.global);
                self.reply_unless(
                    false,
                    AMQPClass::Basic(basic::AMQPMethod::QosOk(basic::QosOk {})),
                )
                .await
            }
            basic::AMQPMethod::Consume(c) if c.queue.as_str() == direct_reply::PSEUDO_QUEUE => {
                let tag = self
                    .consumers
                    .consume_replies(c.consumer_tag.as_str(), c.no_ack)?;
                self.reply_unless(
                    c.nowait,
                    AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(basic::ConsumeOk {
                        consumer_tag: tag.as_str().into(),
                    })),
                )
                .await
            }
            basic::AMQPMethod::Consume(c) => {
                let queue = self.readable_queue(c.queue.as_str())?;
                let tag = self
                    .consumers
                    .consume(queue, c.consumer_tag.as_str(), c.no_ack, c.exclusive)
                    .await?;
                let exit = self
                    .reply_unless(
                        c.nowait,
                        AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(basic::ConsumeOk {
                            consumer_tag: tag.as_str().into(),
                        })),
                    )
                    .await?;
                self.consumers.start(&tag);
                Ok(exit)
            }
            basic::AMQPMethod::Cancel(c) => {
                let out = self.consumers.cancel(c.consumer_tag.as_str()).await?;
                if let Some(exit) = self.write(out).await? {
                    return Ok(Some(exit));
                }
                self.reply_unless(
                    c.nowait,
                    AMQPClass::Basic(basic::AMQPMethod::CancelOk(basic::CancelOk {
                        consumer_tag: c.consumer_tag.clone(),
                    })),
                )
                .await
            }
            basic::AMQPMethod::Get(g) => {
                let queue = self.readable_queue(g.queue.as_str())?;
                let out = self.consumers.get(queue, g.no_ack).await?;
                self.write(out).await
            }
            basic::AMQPMethod::Recover(basic::Recover { requeue })
            | basic::AMQPMethod::RecoverAsync(basic::RecoverAsync { requeue }) => {
                if !requeue {
                    return Err(AmqpError::not_implemented("requeue=false"));
                }
                let settlements = self.consumers.recover();
                self.consumers.queue_settlements(settlements);
                self.consumers.flush().await?;
                let sync = matches!(method, basic::AMQPMethod::Recover(_));
                self.reply_unless(
                    !sync,
                    AMQPClass::Basic(basic::AMQPMethod::RecoverOk(basic::RecoverOk {})),
                )
                .await
            }
            other => Err(not_from_client(&AMQPClass::Basic(other.clone()))),
        }
    }

    async fn on_tx(&mut self, method: &tx::AMQPMethod) -> Result<Option<Exit>, AmqpError> {
        let reply = match method {
            tx::AMQPMethod::Select(_) => {
                self.publisher.select_tx()?;
                tx::AMQPMethod::SelectOk(tx::SelectOk {})
            }
            tx::AMQPMethod::Commit(_) => {
                self.require_tx()?;
                self.consumers.flush().await?;
                let settlements = std::mem::take(&mut self.held_settlements);
                self.publisher
                    .commit_tx(&self.ctx.broker, &self.ctx.vhost.name, settlements.clone())
                    .await?;
                self.consumers.settled(&settlements);
                tx::AMQPMethod::CommitOk(tx::CommitOk {})
            }
            tx::AMQPMethod::Rollback(_) => {
                self.require_tx()?;
                self.publisher.rollback_tx();
                self.held_settlements.clear();
                tx::AMQPMethod::RollbackOk(tx::RollbackOk {})
            }
            other => return Err(not_from_client(&AMQPClass::Tx(other.clone()))),
        };
        self.reply_unless(false, AMQPClass::Tx(reply)).await
    }

    fn require_tx(&self) -> Result<(), AmqpError> {
        if self.publisher.transactional() {
            Ok(())
        } else {
            Err(AmqpError::precondition_failed(
                "channel is not transactional",
            ))
        }
    }

    /// Sends `method` unless the client asked for no reply.
    async fn reply_unless(
        &mut self,
        nowait: bool,
        method: AMQPClass,
    ) -> Result<Option<Exit>, AmqpError> {
        if nowait {
            return Ok(None);
        }
        let mut out = Vec::new();
        crate::wire::codec::encode_method(&mut out, self.id, method);
        self.write(out).await
    }
}

fn requeue_or_reject(requeue: bool) -> How {
    if requeue { How::Requeue } else { How::Reject }
}

/// A method only the server sends (deliver, get-ok, the `-ok` replies, …).
fn not_from_client(method: &AMQPClass) -> AmqpError {
    AmqpError::command_invalid(format!(
        "method {}.{} cannot be sent by a client",
        method.get_amqp_class_id(),
        method.get_amqp_method_id()
    ))
}
