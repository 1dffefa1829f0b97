//! A message as the front keeps it: its stored form in a stage body ([`stored`]), and a
//! body too large for one transaction, kept in a spill as it is published, fanned out and
//! delivered ([`large`]).

pub(crate) mod large;
pub(crate) mod stored;
