//! `ferry validate` (and `ferry run` on a bad config) driven as an operator would: exit
//! codes and the exact one-line messages naming the key at fault.
//!
//! Unwritable store paths as root: root bypasses permission bits, so a `chmod 0555`
//! directory is writable for it and cannot stand for "not writable" here. These tests use
//! two cases that refuse root too: a path below a regular file, and a path in `/proc`,
//! where no file can be created.

use crate::common::daemon::shipped_config as shipped;
use crate::common::process::{Ferry, Outcome, Ports, free_port};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Upper bound on one `ferry validate`.
const TIMEOUT: Duration = Duration::from_secs(30);

/// `ferry validate --config CONFIG` in `cwd`.
fn validate(cwd: &Path, config: &Path, env: &[(&str, &str)]) -> Outcome {
    let config = config.to_str().unwrap();
    Ferry::spawn(cwd, &["validate", "--config", config], env).wait(TIMEOUT)
}

/// `ferry validate` of the shipped file with `env`, from an empty working directory;
/// asserts it fails with exit code 2 and returns its standard error.
fn rejected(env: &[(&str, &str)]) -> String {
    let cwd = tempfile::tempdir().unwrap();
    let outcome = validate(cwd.path(), &shipped(), env);
    assert_eq!(outcome.status.code(), Some(2), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, "");
    outcome.stderr
}

/// A config file holding `text` in `dir`.
fn config_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("ferry.toml");
    fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_tls_listener_without_a_certificate_or_with_an_unreadable_one_is_named() {
    assert_eq!(
        rejected(&[("FERRY__AMQP__TLS_LISTEN", "127.0.0.1:5671")]),
        "error: amqp.tls_listen: a TLS listener needs a certificate: set tls.cert_file and \
         tls.key_file\n"
    );
    let missing = "/nonexistent/ferry/server.pem";
    let stderr = rejected(&[
        ("FERRY__KAFKA__LISTENERS", "SSL://127.0.0.1:9093"),
        ("FERRY__TLS__CERT_FILE", missing),
        ("FERRY__TLS__KEY_FILE", missing),
    ]);
    assert!(
        stderr.starts_with(&format!("error: tls.cert_file: cannot read '{missing}': ")),
        "{stderr}"
    );
}

#[test]
fn shipped_config_is_ok() {
    let cwd = tempfile::tempdir().unwrap();
    let outcome = validate(cwd.path(), &shipped(), &[]);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert_eq!(
        outcome.stdout,
        format!("config OK: {}\n", shipped().display())
    );
    // The standard ports may be taken on this machine (a RabbitMQ on 5672): warnings
    // about them, and nothing else.
    for line in outcome.stderr.lines() {
        assert!(
            line.starts_with("warning: ") && line.contains(" is in use by another process; set "),
            "{}",
            outcome.stderr
        );
    }
    // Preflight probes the store directory's parent but leaves nothing behind.
    assert_eq!(fs::read_dir(cwd.path()).unwrap().count(), 0);
}

#[test]
fn config_defaults_to_config_ferry_toml() {
    let cwd = tempfile::tempdir().unwrap();
    fs::create_dir(cwd.path().join("config")).unwrap();
    fs::copy(shipped(), cwd.path().join("config/ferry.toml")).unwrap();
    let outcome = Ferry::spawn(cwd.path(), &["validate"], &[]).wait(TIMEOUT);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert_eq!(outcome.stdout, "config OK: config/ferry.toml\n");
}

#[test]
fn missing_file_is_named() {
    let cwd = tempfile::tempdir().unwrap();
    let missing = cwd.path().join("absent.toml");
    let outcome = validate(cwd.path(), &missing, &[]);
    assert_eq!(outcome.status.code(), Some(2));
    let expected = format!("error: cannot read config file '{}': ", missing.display());
    assert!(outcome.stderr.starts_with(&expected), "{}", outcome.stderr);
}

#[test]
fn unparsable_file_is_named_on_one_line() {
    let cwd = tempfile::tempdir().unwrap();
    let file = config_file(cwd.path(), "[store\npath = \"x\"\n");
    let outcome = validate(cwd.path(), &file, &[]);
    assert_eq!(outcome.status.code(), Some(2));
    let expected = format!(
        "error: config file '{}' is not valid TOML: line 1",
        file.display()
    );
    assert!(outcome.stderr.starts_with(&expected), "{}", outcome.stderr);
    assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
}

#[test]
fn unknown_key_in_file_is_named() {
    let cwd = tempfile::tempdir().unwrap();
    let file = config_file(cwd.path(), "[metrics]\nlisn = \"127.0.0.1:1\"\n");
    let outcome = validate(cwd.path(), &file, &[]);
    assert_eq!(outcome.status.code(), Some(2));
    assert_eq!(
        outcome.stderr,
        format!(
            "error: metrics.lisn: unknown key (in config file '{}')\n",
            file.display()
        )
    );
}

#[test]
fn unknown_key_in_env_is_named_with_its_variable() {
    assert_eq!(
        rejected(&[("FERRY__METRICS__LISN", "127.0.0.1:1")]),
        "error: metrics.lisn: unknown key (set by FERRY__METRICS__LISN)\n"
    );
}

#[test]
fn bad_listen_address_from_env_is_named() {
    assert_eq!(
        rejected(&[("FERRY__METRICS__LISTEN", "nonsense")]),
        "error: metrics.listen: 'nonsense' is not a host:port address\n"
    );
}

#[test]
fn non_numeric_env_value_for_a_number_is_named() {
    let stderr = rejected(&[("FERRY__STORE__MAX_BATCH", "many")]);
    assert!(
        stderr.starts_with("error: store.max_batch: expected "),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("(set by FERRY__STORE__MAX_BATCH)\n"),
        "{stderr}"
    );
}

#[test]
fn out_of_range_float_from_env_is_named() {
    assert_eq!(
        rejected(&[("FERRY__STORE__INJECT_CONFLICT_RATE", "1.5")]),
        "error: store.inject_conflict_rate: 1.5 must be between 0 and 1\n"
    );
}

#[test]
fn numeric_and_float_env_values_parse() {
    let cwd = tempfile::tempdir().unwrap();
    let outcome = validate(
        cwd.path(),
        &shipped(),
        &[
            ("FERRY__STORE__INJECT_CONFLICT_RATE", "0.1"),
            ("FERRY__STORE__MAX_BATCH", "100"),
            ("FERRY__DAEMON__SHUTDOWN_TIMEOUT_MS", "5000"),
            ("FERRY__METRICS__LISTEN", "localhost:9100"),
        ],
    );
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
}

#[test]
fn store_path_below_a_regular_file_is_not_writable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, "").unwrap();
    let data = file.join("data");
    assert_eq!(
        rejected(&[("FERRY__STORE__PATH", data.to_str().unwrap())]),
        format!(
            "error: store.path: directory '{}' is not writable: '{}' is not a directory\n",
            data.display(),
            file.display()
        )
    );
}

#[test]
fn store_path_in_proc_is_not_writable() {
    let stderr = rejected(&[("FERRY__STORE__PATH", "/proc/ferry-test/data")]);
    assert!(
        stderr.starts_with(
            "error: store.path: directory '/proc/ferry-test/data' is not writable: \
             cannot create a file in '/proc': "
        ),
        "{stderr}"
    );
}

#[test]
fn unresolvable_listen_host_is_named() {
    let stderr = rejected(&[("FERRY__METRICS__LISTEN", "ferry-no-such-host.invalid:9464")]);
    assert!(
        stderr.starts_with(
            "error: metrics.listen: 'ferry-no-such-host.invalid:9464' does not resolve: "
        ),
        "{stderr}"
    );
}

#[test]
fn run_refuses_an_invalid_config_before_starting() {
    let cwd = tempfile::tempdir().unwrap();
    let config = shipped();
    let outcome = Ferry::spawn(
        cwd.path(),
        &["run", "--config", config.to_str().unwrap()],
        &[("FERRY__STAGE__LEASE_TTL_MS", "0")],
    )
    .wait(TIMEOUT);
    assert_eq!(outcome.status.code(), Some(2));
    assert_eq!(
        outcome.stderr,
        "error: stage.lease_ttl_ms: 0 must be at least 1\n"
    );
}

#[test]
fn hash_password_prints_every_credential_ready_to_paste() {
    use ferry_auth::scram::{Mechanism, ScramCredential};
    let cwd = tempfile::tempdir().unwrap();
    let outcome = Ferry::spawn(cwd.path(), &["hash-password", "s3cret"], &[]).wait(TIMEOUT);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let value = |key: &str| -> String {
        let line = outcome
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} line in {}", outcome.stdout));
        line.trim_matches('"').to_owned()
    };
    assert!(
        ferry_auth::password::PasswordHash::parse(&value("password_hash"))
            .unwrap()
            .verify("s3cret")
    );
    for (key, mechanism) in [
        ("scram_sha_256", Mechanism::Sha256),
        ("scram_sha_512", Mechanism::Sha512),
    ] {
        let credential = ScramCredential::parse(mechanism, &value(key)).unwrap();
        assert!(credential.verify_password("s3cret"), "{key}");
        assert!(!credential.verify_password("s3creT"), "{key}");
    }
    assert_eq!(outcome.stdout.lines().count(), 3);
    let config = config_file(
        cwd.path(),
        &format!("[[users]]\nname = \"app\"\n{}", outcome.stdout),
    );
    assert_eq!(validate(cwd.path(), &config, &[]).status.code(), Some(0));
}

/// Issue 33: `ferry hash-password </dev/null` hashed the empty password and exited 0.
#[test]
fn hash_password_refuses_an_empty_password() {
    let cwd = tempfile::tempdir().unwrap();
    for args in [&["hash-password"][..], &["hash-password", ""]] {
        let outcome = Ferry::spawn(cwd.path(), args, &[]).wait(TIMEOUT);
        assert_eq!(outcome.status.code(), Some(1), "{args:?}");
        assert_eq!(
            outcome.stderr,
            "error: the password is empty: give it as the argument or on standard input\n"
        );
        assert_eq!(outcome.stdout, "");
    }
}

#[test]
fn malformed_password_hash_is_named() {
    let cwd = tempfile::tempdir().unwrap();
    let config = config_file(
        cwd.path(),
        "[[users]]\nname = \"app\"\npassword_hash = \"plain\"\n",
    );
    let outcome = validate(cwd.path(), &config, &[]);
    assert_eq!(outcome.status.code(), Some(2));
    assert!(
        outcome
            .stderr
            .starts_with("error: users[0].password_hash: "),
        "{}",
        outcome.stderr
    );
}

/// A config with an external RabbitMQ source whose URI carries the password `hunter2`, a
/// Kafka sink whose SASL password is `hunter3` (in `properties`), and `extra` lines.
fn config_with_secrets(dir: &Path, source_extra: &str, sink_extra: &str) -> PathBuf {
    config_file(
        dir,
        &format!(
            "[sources.rabbit-in]\nkind = \"rabbitmq\"\n\
             uri = \"amqps://bob:hunter2@rabbit.example:5671/%2f\"\nqueue = \"orders\"\n\
             {source_extra}\n\
             [sinks.kafka-out]\nkind = \"kafka\"\nbootstrap_servers = \"kafka.example:9093\"\n\
             topic = \"orders\"\n{sink_extra}\n\
             [[routes]]\nname = \"orders\"\nfrom = {{ source = \"rabbit-in\" }}\n\
             to = [{{ sink = \"kafka-out\" }}]\n"
        ),
    )
}

#[test]
fn secrets_never_appear_in_validate_output() {
    let cwd = tempfile::tempdir().unwrap();
    let sasl = "properties = { \"security.protocol\" = \"SASL_SSL\", \"sasl.mechanism\" = \
                \"SCRAM-SHA-512\", \"sasl.username\" = \"ferry\", \"sasl.password\" = \"hunter3\" }";
    let cases = [
        // Valid: only "config OK" is printed.
        ("", sasl.to_owned()),
        // A CA file that cannot be read, beside the URI's password.
        ("ca_file = \"/nonexistent/ca.pem\"", sasl.to_owned()),
        // A typed key conflicting with the property that holds the password.
        ("", format!("{sasl}\nusername = \"other\"")),
    ];
    let outcomes: Vec<Outcome> = cases
        .iter()
        .map(|(source, sink)| {
            let file = config_with_secrets(cwd.path(), source, sink);
            validate(cwd.path(), &file, &[])
        })
        .collect();
    assert_eq!(outcomes[0].status.code(), Some(0), "{}", outcomes[0].stderr);
    assert!(
        outcomes[0].stdout.starts_with("config OK: "),
        "{}",
        outcomes[0].stdout
    );
    assert_eq!(outcomes[1].status.code(), Some(2));
    assert!(
        outcomes[1].stderr.contains("sources.rabbit-in.ca_file"),
        "{}",
        outcomes[1].stderr
    );
    assert_eq!(outcomes[2].status.code(), Some(2));
    assert!(
        outcomes[2].stderr.contains("sinks.kafka-out.username"),
        "{}",
        outcomes[2].stderr
    );
    for outcome in &outcomes {
        for secret in ["hunter2", "hunter3"] {
            assert!(
                !outcome.stdout.contains(secret) && !outcome.stderr.contains(secret),
                "{secret} printed: {}{}",
                outcome.stdout,
                outcome.stderr
            );
        }
    }
}

#[test]
fn validate_warns_about_a_listen_address_another_process_holds() {
    let cwd = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let free = |port: u16| format!("127.0.0.1:{port}");
    let (kafka, metrics, management) = (free_port(), free_port(), free_port());
    let env = [
        ("FERRY__AMQP__LISTEN", addr.as_str()),
        ("FERRY__KAFKA__LISTEN", &free(kafka)),
        ("FERRY__METRICS__LISTEN", &free(metrics)),
        ("FERRY__MANAGEMENT__LISTEN", &free(management)),
    ];
    let outcome = validate(cwd.path(), &shipped(), &env);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert_eq!(
        outcome.stderr,
        format!(
            "warning: amqp.listen: {addr} is in use by another process; set amqp.listen (or \
             FERRY__AMQP__LISTEN) to a free address\n"
        )
    );
    assert_eq!(
        outcome.stdout,
        format!("config OK: {}\n", shipped().display())
    );
}

/// The quick start (scripts/run.sh) on a machine where another process holds a standard
/// port: `ferry run --move-taken-ports` listens on the next free port, says which, and
/// serves AMQP there; without the flag the same start stops, naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn run_moves_a_taken_port_to_the_next_free_one_when_asked() {
    let cwd = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let ports = Ports::free();
    let data = cwd.path().join("data");
    let env = [
        ("FERRY__AMQP__LISTEN", addr.clone()),
        ("FERRY__KAFKA__LISTEN", format!("127.0.0.1:{}", ports.kafka)),
        (
            "FERRY__METRICS__LISTEN",
            format!("127.0.0.1:{}", ports.metrics),
        ),
        (
            "FERRY__MANAGEMENT__LISTEN",
            format!("127.0.0.1:{}", ports.management),
        ),
        ("FERRY__STORE__PATH", data.to_str().unwrap().to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let config = shipped();
    let config = config.to_str().unwrap();

    let stopped = Ferry::spawn(cwd.path(), &["run", "--config", config], &env).wait(TIMEOUT);
    assert_eq!(stopped.status.code(), Some(1), "{}", stopped.stderr);
    assert!(
        stopped
            .stderr
            .contains(&format!("amqp.listen: {addr} is in use")),
        "{}",
        stopped.stderr
    );

    let args = ["run", "--config", config, "--move-taken-ports"];
    let mut ferry = Ferry::spawn(cwd.path(), &args, &env);
    let moved = crate::common::wait::until_blocking("the moved listener", TIMEOUT, || {
        let log = ferry.log();
        let line = log
            .lines()
            .find(|l| l.starts_with("ferry: amqp.listen: "))?;
        let (_, rest) = line.split_once("listening on ")?;
        Some(rest.split_whitespace().next()?.to_owned())
    });
    assert_ne!(moved, addr);
    let uri = format!("amqp://guest:guest@{moved}/%2f");
    let (_connection, channel) =
        crate::common::wait::until_ok("AMQP on the moved port", TIMEOUT, || {
            let uri = uri.clone();
            async move {
                let connection = lapin::Connection::connect(&uri, Default::default()).await?;
                let channel = connection.create_channel().await?;
                Ok::<_, lapin::Error>((connection, channel))
            }
        })
        .await;
    channel
        .queue_declare("moved".into(), Default::default(), Default::default())
        .await
        .unwrap();
    ferry.signal(libc::SIGTERM);
    assert_eq!(ferry.wait(TIMEOUT).status.code(), Some(0));
}
