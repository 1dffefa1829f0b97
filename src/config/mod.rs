//! Configuration (skeleton).
pub mod stage;
pub mod store;
pub use stage::StageConfig;
pub use store::StoreConfig;
