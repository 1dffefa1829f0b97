//! The configuration shipped in `deploy/kubernetes/ferry.toml` loads and validates, so a
//! renamed or removed key cannot break deployments silently.

use ferry::config::Config;
use std::path::Path;

#[test]
fn kubernetes_config_loads_and_validates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/ferry.toml");
    let config = Config::load(&path).unwrap();
    config.validate().unwrap();
    assert_eq!(config.store.path, Path::new("/var/lib/ferry/data"));
}
