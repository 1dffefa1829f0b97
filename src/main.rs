//! The `ferry` binary.
fn main() {}
