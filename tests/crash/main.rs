//! The mixed crash harness (issue 17): AMQP publishers and consumers, Kafka idempotent
//! producers and a consumer group, and a bridge route, all at once against one `ferry run`
//! killed with SIGKILL again and again; afterwards, per protocol, nothing confirmed is lost
//! and nothing is duplicated that the protocol does not mark. A small run in the default
//! suite; `scripts/test.sh --soak` runs the full one. One test binary.

use ferry_test_support as common;

mod amqp;
mod kafka;
mod mixed;
mod tally;
