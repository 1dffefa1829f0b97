//! The AMQP 0-9-1 front: driven by lapin and by raw frames in-process, and as the `ferry`
//! binary by pika, amqp-tools and crashes, in plaintext and over TLS. One test binary; one module per way of driving it.

use ferry_test_support as common;

mod clients;
mod confirm_order;
mod delayed;
mod differential;
mod disk_faults;
mod large;
mod parity;
mod permissions;
pub(crate) mod raw;
mod recovery;
mod tls;
mod with_lapin;
