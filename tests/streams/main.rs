//! RabbitMQ's stream protocol: Ferry's codec (`ferry-streams`) speaking to the stream
//! server of the suite's RabbitMQ node, so every frame it writes is one RabbitMQ accepts
//! and every frame RabbitMQ writes is one it reads as meant. One test binary; one module
//! per subject.

use ferry_test_support as common;

mod codec_against_rabbitmq;
