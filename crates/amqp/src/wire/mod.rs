//! The AMQP 0-9-1 wire: the frame codec, free of I/O ([`codec`]), the reply codes and
//! the error that carries one ([`errors`]), and the task that owns a socket's write half
//! and puts encoded frames on it ([`writer`]). Nothing here knows queues or the store.

pub mod codec;
pub(crate) mod errors;
pub(crate) mod writer;
