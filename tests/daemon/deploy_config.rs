//! The configuration shipped in `deploy/kubernetes/ferry.toml` loads and validates, so a
//! renamed or removed key cannot break deployments silently.

use crate::deploy_metrics::{deploy_dir, files_below};
use ferry_config::Config;
use std::path::Path;

#[test]
fn kubernetes_config_loads_and_validates() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/ferry.toml");
    let config = Config::load(&path).unwrap();
    config.validate().unwrap();
    assert_eq!(config.store.path, Path::new("/var/lib/ferry/data"));
}

/// Every `SECTION.KEY` the shipped `config/ferry.toml` lists (it lists every key, a unit
/// test keeps it so).
fn shipped_keys() -> std::collections::BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ferry.toml");
    let mut section = String::new();
    let mut keys = std::collections::BTreeSet::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        if let Some(name) = line.strip_prefix('[') {
            section = name.trim_matches(['[', ']']).to_owned();
        } else if let Some((key, _)) = line.split_once(" = ")
            && !key.starts_with('#')
            && !key.contains(' ')
        {
            keys.insert(format!("{section}.{key}"));
        }
    }
    keys
}

/// Issue 33: an alert told operators to raise `stage.pop_batch`, a key that does not exist.
/// Every configuration key the files under `deploy/` name (`section.key` of a section of
/// `config/ferry.toml`) must be one Ferry reads.
#[test]
fn deploy_files_name_only_config_keys_that_exist() {
    let keys = shipped_keys();
    let sections: std::collections::BTreeSet<&str> = keys
        .iter()
        .filter_map(|k| k.split_once('.'))
        .map(|(s, _)| s)
        .collect();
    let pattern = format!(
        r"\b({})\.[a-z_]+\b",
        sections.into_iter().collect::<Vec<_>>().join("|")
    );
    let named = regex::Regex::new(&pattern).unwrap();
    let (mut checked, mut unknown) = (0, Vec::new());
    for path in files_below(&deploy_dir()) {
        let text = std::fs::read_to_string(&path).unwrap();
        for key in named.find_iter(&text).map(|m| m.as_str()) {
            checked += 1;
            if !keys.contains(key) {
                unknown.push(format!("{}: {key}", path.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "no such config key:\n{}",
        unknown.join("\n")
    );
    assert!(checked > 0, "no config key found under deploy/");
}
