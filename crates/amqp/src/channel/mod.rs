//! One AMQP channel: a task that takes the channel's frames in order and runs its state
//! machine — content assembly ([`content`]), publishing ([`crate::publishing::publish`]),
//! consuming ([`crate::consuming::consumers`]), and the synchronous methods ([`methods`]).
//!
//! Publishes and acknowledgements are pipelined: they are committed in the background
//! while the channel reads on. Any other method first waits until every publish received
//! before it is stored, so methods take effect in the order the client sent them (a
//! basic.get after a publish on the same channel sees the message).
//!
//! A channel exception closes only this channel: it reports to the connection first,
//! then sends channel.close, commits what it had accepted, and returns its unacknowledged
//! deliveries. A connection exception is reported to the connection, which closes
//! everything.

pub(crate) mod content;
mod methods;

use crate::consuming::consumers::{Consumers, Work};
use crate::consuming::settle::Settlement;
use crate::message::large;
use crate::publishing::confirm_order::HeldConfirms;
use crate::publishing::publish::{Committed, Incoming, Publisher};
use crate::state::context::{ConnectionContext, Control};
use crate::wire::codec::{self, Frame};
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{AMQPClass, basic, channel as ch};
use bytes::Bytes;
use content::{Content, Segment};
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state as rabbitmq;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Batches of frames queued for a channel before the connection waits (and stops
/// reading).
const INBOUND: usize = 256;

/// Ties a content frame's exception to basic.publish, the method the content belongs to.
fn on_publish(e: AmqpError) -> AmqpError {
    e.on(&AMQPClass::Basic(basic::AMQPMethod::Publish(
        basic::Publish::default(),
    )))
}

/// The connection's handle on a channel task.
#[derive(Debug, Clone)]
pub(crate) struct ChannelHandle {
    inbound: mpsc::Sender<Vec<Frame>>,
}

impl ChannelHandle {
    /// Hands a frame to the channel, waiting while its queue is full. A channel that has
    /// ended drops it.
    pub(crate) async fn send(&self, frame: Frame) {
        self.send_all(vec![frame]).await;
    }

    /// Hands consecutive frames to the channel at once.
    pub(crate) async fn send_all(&self, frames: Vec<Frame>) {
        let _ = self.inbound.send(frames).await;
    }
}

/// Starts channel `id` of a connection (channel.open was received): it answers
/// channel.open-ok and runs until closed or `stop` is cancelled.
pub(crate) fn spawn(
    ctx: Arc<ConnectionContext>,
    id: u16,
    stop: CancellationToken,
    tasks: &mut JoinSet<()>,
) -> ChannelHandle {
    let (tx, rx) = mpsc::channel(INBOUND);
    let max = ctx.broker.config.max_message_size;
    let channel = Channel {
        consumers: Consumers::new(ctx.clone(), id),
        ctx,
        id,
        stop,
        inbound: rx,
        content: Content::new(max),
        publisher: Publisher::default(),
        held_confirms: HeldConfirms::default(),
        last_queue: None,
        held_settlements: Vec::new(),
    };
    tasks.spawn(channel.run());
    ChannelHandle { inbound: tx }
}

/// How the channel loop ended.
enum Exit {
    /// The client sent channel.close.
    ClientClosed,
    /// An exception.
    Failed(AmqpError),
    /// The connection is ending (or its socket's writer is gone).
    Stopped,
}

/// A channel's state.
struct Channel {
    ctx: Arc<ConnectionContext>,
    id: u16,
    stop: CancellationToken,
    inbound: mpsc::Receiver<Vec<Frame>>,
    content: Content,
    publisher: Publisher,
    /// Confirms waiting for the connection's consumers to deliver what they confirm.
    held_confirms: HeldConfirms,
    consumers: Consumers,
    /// The last queue declared, which "" names in later methods.
    last_queue: Option<String>,
    /// Acknowledgements held for tx.commit.
    held_settlements: Vec<Settlement>,
}

/// Keeps `ferry_amqp_channels` (and RabbitMQ's channel counts) right however the channel
/// ends.
struct Counted;

impl Counted {
    fn new() -> Self {
        metrics::gauge!(metric::CHANNELS).increment(1.0);
        rabbitmq::channel_opened();
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::gauge!(metric::CHANNELS).decrement(1.0);
        rabbitmq::channel_closed();
    }
}

impl Channel {
    async fn run(mut self) {
        let _counted = Counted::new();
        let exit = match self
            .reply(AMQPClass::Channel(ch::AMQPMethod::OpenOk(ch::OpenOk {})))
            .await
        {
            Ok(()) => self.serve().await,
            Err(e) => Exit::Failed(e),
        };
        match exit {
            Exit::ClientClosed => {
                self.close_down().await;
                let _ = self.ctx.control.send(Control::ChannelClosed(self.id));
                let _ = self
                    .reply(AMQPClass::Channel(ch::AMQPMethod::CloseOk(ch::CloseOk {})))
                    .await;
            }
            Exit::Failed(e) if e.code.closes_connection() => {
                let _ = self.ctx.control.send(Control::ConnectionFailed(e));
                self.close_down().await;
            }
            Exit::Failed(e) => {
                tracing::info!(channel = self.id, error = %e, "AMQP channel exception");
                e.count();
                let _ = self.ctx.control.send(Control::ChannelFailed(self.id));
                let _ = self
                    .reply(AMQPClass::Channel(ch::AMQPMethod::Close(ch::Close {
                        reply_code: e.code.code(),
                        reply_text: e.reply_text().into(),
                        class_id: e.class_id,
                        method_id: e.method_id,
                    })))
                    .await;
                self.close_down().await;
            }
            Exit::Stopped => {
                self.take_unread().await;
                self.close_down().await;
            }
        }
    }

    /// Handles the frames the connection read for this channel that the channel had not
    /// taken when the connection ended (the client closed it, its socket dropped, the
    /// daemon stops): the client sent them, so as with RabbitMQ its publishes are stored
    /// and its acknowledgements count. Stops at the first exception, as the channel would
    /// have.
    async fn take_unread(&mut self) {
        while let Ok(frames) = self.inbound.try_recv() {
            if !matches!(self.on_frames(frames).await, Ok(None)) {
                return;
            }
        }
    }

    async fn serve(&mut self) -> Exit {
        let mut renew = self.ctx.broker.liveness.ticker();
        loop {
            let step = tokio::select! {
                biased;
                () = self.stop.cancelled() => return Exit::Stopped,
                done = self.publisher.committed() => self.on_committed(done).await,
                frames = self.held_confirms.released() => self.write(frames).await,
                work = self.consumers.next_work() => self.on_work(work).await,
                _ = renew.tick() => {
                    self.renew().await;
                    Ok(None)
                }
                frames = self.inbound.recv(), if !self.publisher.saturated() => match frames {
                    Some(frames) => self.on_frames(frames).await,
                    None => return Exit::Stopped,
                },
            };
            match step {
                Ok(None) => {}
                Ok(Some(exit)) => return exit,
                Err(e) => return Exit::Failed(e),
            }
            self.publisher
                .start_commit(&self.ctx.broker, &self.ctx.vhost.name);
            self.consumers.start_commit();
        }
    }

    /// Renews the channel's lease holders.
    async fn renew(&self) {
        let broker = &self.ctx.broker;
        for holder in self.consumers.holders() {
            if let Err(e) = broker.holders.renew(*holder, broker.liveness.ttl()).await {
                tracing::warn!(error = %e, "cannot renew a channel's lease holder");
            }
        }
    }

    /// Takes a finished publish commit. Its confirms are held while the connection's own
    /// consumers of the queues it stored to deliver what it stored
    /// ([`crate::state::consumed`]), and behind confirms held before them.
    async fn on_committed(
        &mut self,
        done: Result<Committed, AmqpError>,
    ) -> Result<Option<Exit>, AmqpError> {
        let done = done?;
        let flushed = if self.publisher.confirming() {
            self.ctx.consumed.ask(done.stored_to())
        } else {
            None
        };
        let out =
            self.publisher
                .finish_commit(&self.ctx.broker, &self.ctx.vhost.name, self.id, done);
        match self.held_confirms.hold(out, flushed) {
            Some(out) => self.write(out).await,
            None => Ok(None),
        }
    }

    async fn on_work(&mut self, work: Work) -> Result<Option<Exit>, AmqpError> {
        match work {
            Work::Event(event) => {
                let out = self.consumers.on_event(event).await?;
                self.write(out).await
            }
            Work::Settled(done) => {
                self.consumers.finish_commit(done?)?;
                Ok(None)
            }
            Work::Due => {
                self.consumers.on_due();
                Ok(None)
            }
            Work::DeliverNow(request) => {
                self.consumers.deliver_now(request);
                Ok(None)
            }
            Work::Reply(reply) => {
                let out = self.consumers.deliver_reply(&reply);
                self.write(out).await
            }
            Work::AckDeadline => match self.consumers.ack_timed_out() {
                // RabbitMQ's words; closing the channel requeues its deliveries.
                Some(ms) => Err(AmqpError::precondition_failed(format!(
                    "delivery acknowledgement on channel {} timed out. Timeout value used: {ms} ms. \
                     This timeout value can be configured, see consumers doc guide to learn more",
                    self.id
                ))),
                None => Ok(None),
            },
        }
    }

    async fn on_frames(&mut self, frames: Vec<Frame>) -> Result<Option<Exit>, AmqpError> {
        for frame in frames {
            if let Some(exit) = self.on_frame(frame).await? {
                return Ok(Some(exit));
            }
        }
        Ok(None)
    }

    async fn on_frame(&mut self, frame: Frame) -> Result<Option<Exit>, AmqpError> {
        match frame {
            Frame::Method(_, method) => {
                if self.content.in_progress() {
                    return Err(AmqpError::unexpected_frame(format!(
                        "expected a content frame, got method {}.{}",
                        method.get_amqp_class_id(),
                        method.get_amqp_method_id()
                    ))
                    .on(&method));
                }
                self.on_method(*method).await
            }
            Frame::Header(_, header) => match self.content.header(header).map_err(on_publish)? {
                Some(incoming) => self.on_publish(incoming).await,
                None => Ok(None),
            },
            Frame::Body(_, body) => {
                let filled = self.content.body(body).map_err(on_publish)?;
                for segment in filled.segments {
                    self.spill(segment).await.map_err(on_publish)?;
                }
                match filled.message {
                    Some(incoming) => self.on_publish(incoming).await,
                    None => Ok(None),
                }
            }
            Frame::Heartbeat(_) => Ok(None),
        }
    }

    async fn on_publish(&mut self, incoming: Incoming) -> Result<Option<Exit>, AmqpError> {
        let method = AMQPClass::Basic(basic::AMQPMethod::Publish(incoming.publish.clone()));
        let mut answer = self
            .publisher
            .accept(&self.ctx, self.id, self.consumers.reply_address(), incoming)
            .map_err(|e| e.on(&method))?;
        if let Some(mut incoming) = answer.spill_first.take() {
            self.spill_body(&mut incoming)
                .await
                .map_err(|e| e.on(&method))?;
            answer = self
                .publisher
                .accept(&self.ctx, self.id, self.consumers.reply_address(), incoming)
                .map_err(|e| e.on(&method))?;
        }
        match answer.returned {
            None => self.write(answer.frames).await,
            Some((properties, spill)) => {
                large::send_content(&self.ctx, self.id, answer.frames, &properties, spill).await?;
                Ok(None)
            }
        }
    }

    /// Writes an assembled body to a spill, held by the channel's lease holder until the
    /// commit that stores its message: for a message whose copies in the queues it routes
    /// to would not fit one transaction
    /// ([`crate::publishing::publish::Answer::spill_first`], [`crate::message::large`]).
    async fn spill_body(&mut self, incoming: &mut Incoming) -> Result<(), AmqpError> {
        let holder = self.consumers.channel_holder().await?;
        self.publisher.hold_spills_as(holder);
        let spills = self.ctx.broker.stages.spills();
        incoming.spill = Some(spills.write_all(holder, &incoming.body).await?);
        incoming.body = Bytes::new();
        Ok(())
    }

    /// Writes a segment of a large body to its spill, held by the channel's lease holder
    /// until the commit that stores its message ([`crate::message::large`]).
    async fn spill(&mut self, segment: Segment) -> Result<(), AmqpError> {
        let holder = self.consumers.channel_holder().await?;
        self.publisher.hold_spills_as(holder);
        let spills = self.ctx.broker.stages.spills();
        spills
            .write(holder, segment.spill, segment.offset, &segment.bytes)
            .await?;
        Ok(())
    }

    async fn on_method(&mut self, method: AMQPClass) -> Result<Option<Exit>, AmqpError> {
        let result = match &method {
            AMQPClass::Basic(basic::AMQPMethod::Publish(p)) => {
                self.content.start(p.clone());
                Ok(None)
            }
            AMQPClass::Channel(ch::AMQPMethod::Close(_)) => Ok(Some(Exit::ClientClosed)),
            AMQPClass::Channel(ch::AMQPMethod::CloseOk(_)) => Ok(None),
            AMQPClass::Basic(
                basic::AMQPMethod::Ack(_)
                | basic::AMQPMethod::Nack(_)
                | basic::AMQPMethod::Reject(_),
            ) => self.on_settle(&method).map(|()| None),
            _ => {
                // Earlier publishes and acknowledgements take effect first (a basic.get or
                // basic.consume after a nack with requeue sees the message back in place).
                self.flush_publishes().await?;
                self.consumers.flush().await?;
                self.on_sync_method(&method).await
            }
        };
        result.map_err(|e| e.on(&method))
    }

    /// Stores every publish received so far and sends their confirms (or holds them,
    /// [`Channel::on_committed`]: waiting for them here could make two channels wait on
    /// each other).
    async fn flush_publishes(&mut self) -> Result<(), AmqpError> {
        loop {
            self.publisher
                .start_commit(&self.ctx.broker, &self.ctx.vhost.name);
            if self.publisher.idle() {
                return Ok(());
            }
            let done = self.publisher.committed().await;
            if let Some(exit) = self.on_committed(done).await? {
                return Err(match exit {
                    Exit::Failed(e) => e,
                    _ => AmqpError::internal("the connection's socket closed"),
                });
            }
        }
    }

    /// Queues encoded frames for the socket (consumers whose deliveries were among them
    /// may then lease more); a gone writer ends the channel.
    async fn write(&mut self, out: Vec<u8>) -> Result<Option<Exit>, AmqpError> {
        match self.ctx.writer.send(out).await {
            Ok(()) => {
                self.consumers.sent();
                Ok(None)
            }
            Err(_) => Ok(Some(Exit::Stopped)),
        }
    }

    /// Sends one method on this channel.
    async fn reply(&self, method: AMQPClass) -> Result<(), AmqpError> {
        let mut out = Vec::new();
        codec::encode_method(&mut out, self.id, method);
        self.ctx
            .writer
            .send(out)
            .await
            .map_err(|e| AmqpError::internal(e.to_string()))
    }

    /// Ends the channel's work: stores what it accepted, commits acknowledgements, returns
    /// unacknowledged deliveries. Sends nothing (confirms of a closing channel are moot).
    async fn close_down(&mut self) {
        while !self.publisher.idle() {
            self.publisher
                .start_commit(&self.ctx.broker, &self.ctx.vhost.name);
            let done = self.publisher.committed().await;
            if let Ok(done) = done {
                let _ = self.publisher.finish_commit(
                    &self.ctx.broker,
                    &self.ctx.vhost.name,
                    self.id,
                    done,
                );
            }
        }
        self.consumers.close().await;
    }
}
