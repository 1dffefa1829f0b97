//! The files shipped in `deploy/` fit the code and each other: the configurations of the
//! Kubernetes base, its three-instance FoundationDB overlay and the container image load
//! and validate (with the base's users appended, as the init container does), both
//! kustomizations render and pass an offline schema check of the Kubernetes API, every
//! manifest runs the image `scripts/image.sh` tags, and every config key a deploy file names
//! exists — so a renamed or removed key cannot break deployments silently.

use crate::deploy_metrics::{deploy_dir, files_below};
use ferry_config::Config;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A file of the repository.
fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `config` with the base's `logins.toml` appended, as the StatefulSet's init container
/// assembles `/run/ferry/ferry.toml`, loaded from a temporary file.
fn load_with_logins(config: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ferry.toml");
    let read = |p: &str| std::fs::read_to_string(repo_file(p)).unwrap();
    let text = format!(
        "{}\n{}",
        read(config),
        read("deploy/kubernetes/base/logins.toml")
    );
    std::fs::write(&path, text).unwrap();
    Config::load(&path).unwrap_or_else(|e| panic!("{config} with logins.toml: {e}"))
}

#[test]
fn kubernetes_config_loads_and_validates() {
    let config = load_with_logins("deploy/kubernetes/base/ferry.toml");
    config.validate().unwrap();
    assert_eq!(config.store.path, Path::new("/var/lib/ferry/data"));
    // Clients come through the Service: a user that may log in from elsewhere than loopback.
    assert!(
        config.users.iter().any(|u| !u.loopback_only),
        "{:?}",
        config.users
    );
}

#[test]
fn the_fdb_overlay_config_loads_and_validates_with_the_fdb_engine() {
    let config = load_with_logins("deploy/kubernetes/overlays/fdb-3/ferry.toml");
    assert_eq!(config.store.engine, ferry_store::EngineKind::Fdb);
    let validated = config.validate();
    if cfg!(feature = "fdb") {
        validated.unwrap();
    } else {
        // This build has no FoundationDB engine; the image the overlay runs does.
        let error = validated.unwrap_err().to_string();
        assert!(
            error.contains("needs a ferry built with --features fdb"),
            "{error}"
        );
    }
}

#[test]
fn container_config_loads_and_validates() {
    let config = Config::load(repo_file("deploy/container/ferry.toml")).unwrap();
    config.validate().unwrap();
    assert_eq!(config.store.path, Path::new("/var/lib/ferry/data"));
    for listen in [
        &config.amqp.listen,
        &config.kafka.listen,
        &config.metrics.listen,
        &config.management.listen,
    ] {
        assert!(listen.starts_with("0.0.0.0:"), "{listen}");
    }
}

/// The image every manifest names: the tag `scripts/image.sh build` gives by default.
#[test]
fn manifests_run_the_image_scripts_image_sh_tags() {
    let script = std::fs::read_to_string(repo_file("scripts/image.sh")).unwrap();
    assert!(
        script.contains("tag=${2:-localhost/ferry:$version}"),
        "scripts/image.sh's default tag changed; change the manifests with it"
    );
    let image = format!("localhost/ferry:{}", env!("CARGO_PKG_VERSION"));
    let base = kustomize("deploy/kubernetes/base");
    let images: Vec<&str> = base
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .collect();
    assert_eq!(images, [image.as_str(), image.as_str()], "{base}");
    let overlay = kustomize("deploy/kubernetes/overlays/fdb-3");
    let fdb_image = format!("image: {image}-fdb");
    assert_eq!(overlay.matches(&fdb_image).count(), 2, "{overlay}");
}

/// Both kustomizations, rendered by `kubectl kustomize`, against the JSON schemas of the
/// Kubernetes API that kubernetes-validate ships (no cluster, no network), strictly: an
/// unknown or misplaced field is an error.
#[test]
fn kustomizations_render_and_pass_the_kubernetes_schema() {
    for dir in ["deploy/kubernetes/base", "deploy/kubernetes/overlays/fdb-3"] {
        let rendered = kustomize(dir);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &rendered).unwrap();
        let out = Command::new("kubernetes-validate")
            .args([
                "--strict",
                "--kubernetes-version",
                KUBERNETES_VERSION,
                "--no-warn",
            ])
            .arg(file.path())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run kubernetes-validate ({e}); install it with scripts/setup.sh")
            });
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{dir} fails the schema check:\n{report}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kinds: Vec<&str> = rendered
            .lines()
            .filter_map(|l| l.strip_prefix("kind: "))
            .collect();
        assert_eq!(
            report.matches(" passed for resource ").count(),
            kinds.len(),
            "{dir}: every resource checked ({kinds:?}):\n{report}"
        );
    }
    let overlay = kustomize("deploy/kubernetes/overlays/fdb-3");
    for expected in [
        "replicas: 3",
        "FDB_CLUSTER_FILE",
        "metadata.labels['apps.kubernetes.io/pod-index']",
        "kind: PodDisruptionBudget",
    ] {
        assert!(overlay.contains(expected), "{expected}:\n{overlay}");
    }
    assert!(!overlay.contains("volumeClaimTemplates"), "{overlay}");
}

/// The Kubernetes release whose API the manifests are checked against: 1.28 brought the
/// pod-index label the overlay reads.
const KUBERNETES_VERSION: &str = "1.32.0";

/// `kubectl kustomize DIR`: the manifests `kubectl apply -k DIR` would apply.
fn kustomize(dir: &str) -> String {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_file(dir))
        .output()
        .unwrap_or_else(|e| panic!("cannot run kubectl ({e}); kubectl kustomize renders {dir}"));
    assert!(
        out.status.success(),
        "kubectl kustomize {dir}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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
