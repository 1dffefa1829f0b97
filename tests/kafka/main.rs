//! The Kafka front: driven by librdkafka, kafka-python, kcat and raw requests, in-process
//! (one or more instances over one store) and as the `ferry` binary under `kill -9`. One
//! test binary; one module per subject; [`tls`] covers the SSL and SASL_SSL listeners,
//! [`large`] record batches larger than one store transaction.

use ferry_test_support as common;

mod acls;
mod admin;
mod clients;
mod compaction;
mod consumer_groups;
mod daemon;
mod disk_faults;
mod formats;
mod groups;
mod instances;
mod interop;
mod large;
mod leader_epochs;
mod old_clients;
mod overload;
mod raw;
mod recovery;
mod scram;
mod scram_credentials;
mod share_groups;
mod tls;
mod transactions;
