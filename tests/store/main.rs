//! The store and the stage: the conformance suite on every engine, durability of the
//! embedded engine under `kill -9`, its log, window and checkpoint against a model, the
//! stage's queue semantics under concurrency and injected faults, the user store (users,
//! permissions) on every engine, and backup and restore. One test binary; one module per
//! subject.

use ferry_test_support as common;

mod backup;
mod conformance;
mod definitions;
mod durability;
mod engine;
mod spill;
mod stage;
mod stage_concurrency;
mod stage_pop_exclusive;
mod user_store;
