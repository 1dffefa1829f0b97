//! What of the layering the compiler cannot check: inside each crate of the workspace no
//! module imports another that imports it back (at any depth of the module tree), the
//! bridge (`crates/bridge/`) reaches the fronts only through their ports, management
//! (`crates/management/`) reaches them only through their admin modules, the Kafka API
//! handlers (`crates/kafka/src/api/`) leave the store to the front's operations, and the
//! admin commands (`crates/admin/`) depend on no crate of the server. A change
//! that breaks one of these fails here, naming the import. Between the workspace's crates the
//! compiler refuses an import against an arrow, so that needs no test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The source folder of every library crate of the workspace: `src/` (without the `ferry`
/// binary in `src/cli/`) and each `crates/*/src/`.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        sources.push(entry.unwrap().path().join("src"));
    }
    sources
}

/// Every module of the crate whose source folder is `src`, by path (`api::fetch`), with the
/// modules it names (`crate::…` and `super::…` paths, outside its unit tests).
fn crate_imports(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut modules = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        // The binary, and the test-only modules (unit tests may reach anywhere).
        let test_only = relative
            .iter()
            .any(|p| p == "tests" || p == "test_fixture.rs");
        if relative.starts_with("cli") || test_only {
            continue;
        }
        let mut path: Vec<String> = relative
            .with_extension("")
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if path
            .last()
            .is_some_and(|last| last == "mod" || last == "lib")
        {
            path.pop();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests may reach anywhere; they sit at the end of their file.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        modules.insert(path.clone(), names_used(&path, code));
    }
    modules
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The module paths `code` (the module at `path`) names with `crate::` or `super::`.
fn names_used(path: &[String], code: &str) -> BTreeSet<Vec<String>> {
    let mut used = BTreeSet::new();
    for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| w.starts_with("crate::") || w.starts_with("super::"))
            .collect();
        for word in words {
            let mut parts: Vec<&str> = word.split("::").filter(|p| !p.is_empty()).collect();
            let mut base: Vec<String> = if parts[0] == "crate" {
                parts.remove(0);
                Vec::new()
            } else {
                path.to_vec()
            };
            while parts.first() == Some(&"super") {
                parts.remove(0);
                base.pop();
            }
            base.extend(parts.iter().map(|p| (*p).to_owned()));
            used.insert(base);
        }
    }
    used
}

/// The module graph with each path cut to its first `depth` names; edges inside one node
/// and between a node and its own descendants are left out.
fn graph_at(
    modules: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    depth: usize,
) -> BTreeMap<String, BTreeSet<String>> {
    let node = |p: &[String]| p[..p.len().min(depth)].join("::");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, used) in modules {
        let a = node(from);
        for to in used {
            let b = node(to);
            let nested = a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"));
            if a != b && !a.is_empty() && !b.is_empty() && !nested {
                edges.entry(a.clone()).or_default().insert(b);
            }
        }
    }
    edges
}

/// A cycle of `edges`, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        at: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == at) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(at.to_owned());
            return Some(cycle);
        }
        if !done.insert(at.to_owned()) {
            return None;
        }
        stack.push(at.to_owned());
        for next in edges.get(at).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|start| visit(start, edges, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let sources = crate_sources();
    assert!(sources.len() > 10, "the workspace's crates were found");
    let mut found = 0;
    for src in sources {
        let modules = crate_imports(&src);
        found += modules.len();
        for depth in 1..=4 {
            if let Some(cycle) = find_cycle(&graph_at(&modules, depth)) {
                panic!(
                    "an import circle in {}: {}",
                    src.display(),
                    cycle.join(" -> ")
                );
            }
        }
    }
    assert!(found > 200, "the crates' modules were found");
}

/// Every path `crates/<krate>/src` names that begins with one of `prefixes`
/// (`ferry_amqp::`), outside unit tests and comments, with the file that names it.
fn paths_named(krate: &str, prefixes: &[&str]) -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(krate)
        .join("src");
    let files = rust_files(&src);
    assert!(files.len() > 10, "the {krate} crate's modules were found");
    let mut named = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests may reach anywhere; they sit at the end of their file.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            let words = line.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'));
            for word in words.filter(|w| prefixes.iter().any(|p| w.starts_with(p))) {
                named.push((file.clone(), word.to_owned()));
            }
        }
    }
    named
}

#[test]
fn the_bridge_reaches_the_fronts_only_through_their_ports() {
    for (file, word) in paths_named("bridge", &["ferry_amqp::", "ferry_kafka::"]) {
        assert!(
            word.split("::").nth(1) == Some("port"),
            "{} uses {word}, which is not a front's port",
            file.display()
        );
    }
}

#[test]
fn management_reaches_the_fronts_only_through_their_admin_modules() {
    let named = paths_named("management", &["ferry_amqp::", "ferry_kafka::"]);
    for front in ["ferry_amqp::", "ferry_kafka::"] {
        assert!(
            named.iter().any(|(_, word)| word.starts_with(front)),
            "management's uses of {front} were found"
        );
    }
    for (file, word) in named {
        assert!(
            word.split("::").nth(1) == Some("admin"),
            "{} uses {word}, which is not a front's admin module",
            file.display()
        );
    }
}

#[test]
fn the_admin_commands_are_a_client_of_the_http_api_only() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/admin/Cargo.toml");
    let manifest = std::fs::read_to_string(manifest).unwrap();
    let dependencies = manifest
        .split("[dependencies]")
        .nth(1)
        .expect("the admin crate's dependencies were found");
    let names: Vec<&str> = dependencies
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .collect();
    assert!(
        names.contains(&"ureq"),
        "the admin crate's dependencies were read: {names:?}"
    );
    for name in names {
        assert!(
            !name.starts_with("ferry"),
            "crates/admin depends on {name}: the admin commands reach the daemon through its \
             management API only"
        );
    }
}

/// What a Kafka API handler may not name: handlers translate between wire messages and the
/// front's operations, and only those operations touch the store (docs/architecture.md).
const STORE_ACCESS: &[&str] = &["ctx.db", ".db()", ".begin()", "ferry_store::"];

/// The first of [`STORE_ACCESS`] that `code` names outside comments, whitespace removed
/// (so `ctx` and `.db` on two lines are caught).
fn store_access(code: &str) -> Option<&'static str> {
    let code: String = code
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    STORE_ACCESS.iter().copied().find(|p| code.contains(p))
}

#[test]
fn kafka_api_handlers_leave_the_store_to_the_fronts_operations() {
    assert_eq!(
        store_access("let tx = ctx\n    .db\n    .begin()?;"),
        Some("ctx.db"),
        "a handler's own transaction is caught"
    );
    let api = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/kafka/src/api");
    // The in-process tests of the handlers (`api/tests/`) may set up and inspect the store.
    let files: Vec<PathBuf> = rust_files(&api)
        .into_iter()
        .filter(|f| !f.strip_prefix(&api).unwrap().starts_with("tests"))
        .collect();
    assert!(files.len() > 30, "the Kafka API handlers were found");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Some(access) = store_access(&text) {
            panic!(
                "{} names `{access}`: a Kafka API handler calls the front's operations \
                 (partition reads, sequencers, producers, coordinators …), which touch the store",
                file.display()
            );
        }
    }
}
