//! Ferry: a broker bridge. This crate is the top of the workspace (docs/architecture.md
//! draws the crate graph): [`daemon`] runs the long-lived process over the crates below
//! (the management API `ferry-management`, the bridge `ferry-bridge`, the fronts
//! `ferry-amqp` and `ferry-kafka`, the stage and store beneath them). The `ferry` binary
//! (`src/cli/`) is the command line over this library, and holds the `ferry bench` load
//! tools.

// The library is documented for Ferry's own engineers, whose docs link private items (a
// module's constants, its private submodules); read them with
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]
// What other crates use is `pub`; everything else says how far it reaches.
#![warn(unreachable_pub)]

pub mod daemon;
#[doc(hidden)]
pub mod fuzzing;
