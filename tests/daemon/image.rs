//! The container image of `deploy/container/Containerfile` as a user runs it, with no
//! registry: `scripts/image.sh` builds it from this build's `ferry` on a Debian base made
//! with debootstrap (once, then cached), podman runs it with its ports published on
//! loopback and the users of `deploy/kubernetes/base/logins.toml` added to its config, and
//! real clients use it from the host — lapin publishes with confirms and consumes, rdkafka
//! produces and consumes. The image's own HEALTHCHECK reports healthy, the process runs as
//! uid 10001, and `podman stop` (SIGTERM) ends it with exit code 0 within the grace period.
//! The container and the image are removed afterwards; the base stays cached.

use crate::common::http::get;
use crate::common::process::Ports;
use crate::common::{amqp, kafka, repository};
use rdkafka::Message;
use rdkafka::consumer::Consumer;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longest `scripts/image.sh build` may take: the first one runs debootstrap (about a
/// minute and a half here), later ones about 15 s.
const BUILD: Duration = Duration::from_secs(300);
/// Longest any other engine command may take.
const COMMAND: Duration = Duration::from_secs(60);
/// Longest from `podman run` until `/healthz` answers through the published port.
const STARTUP: Duration = Duration::from_secs(60);
/// The grace period `podman stop` gives before SIGKILL; the image's config drains in 8 s.
const GRACE_S: u64 = 15;
/// The password of the user `ferry` in `deploy/kubernetes/base/logins.toml`.
const PASSWORD: &str = "change-me";

#[test]
fn the_image_serves_amqp_and_kafka_as_uid_10001_reports_healthy_and_stops_on_sigterm() {
    let name = format!("ferry-image-test-{}", std::process::id());
    let tag = format!("localhost/{name}:test");
    let mut cleanup = Cleanup {
        container: None,
        image: None,
    };

    let started = Instant::now();
    let built = run_for(
        Command::new(script())
            .args(["build", env!("CARGO_BIN_EXE_ferry"), &tag])
            // The debug binary's debug information is most of its 300 MiB.
            .env("FERRY_IMAGE_STRIP", "1"),
        BUILD,
    );
    cleanup.image = Some(tag.clone());
    assert!(
        built.status.success(),
        "scripts/image.sh build failed (a failed debootstrap means the Debian mirror is not \
         reachable; set FERRY_DEBIAN_MIRROR):\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    eprintln!("image built in {:?}", started.elapsed());

    // The image's config with the Kubernetes example's users: guest may log in from the
    // container's own loopback only, and published ports are not that.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ferry.toml");
    let text = |path: &str| std::fs::read_to_string(repository().join(path)).unwrap();
    std::fs::write(
        &config,
        format!(
            "{}\n{}",
            text("deploy/container/ferry.toml"),
            text("deploy/kubernetes/base/logins.toml")
        ),
    )
    .unwrap();

    let ports = Ports::free();
    let publish = |host: u16, container: u16| format!("127.0.0.1:{host}:{container}");
    let mount = format!("{}:/etc/ferry/ferry.toml:ro", config.display());
    let (nofile, nproc) = ulimits();
    let run = engine(&[
        "run",
        "--detach",
        "--name",
        &name,
        "--publish",
        &publish(ports.amqp, 5672),
        "--publish",
        &publish(ports.kafka, 9092),
        "--publish",
        &publish(ports.metrics, 9464),
        "--publish",
        &publish(ports.management, 15672),
        // Kafka clients connect where Metadata says: the published port on the host.
        "--env",
        "FERRY__KAFKA__ADVERTISED_HOST=127.0.0.1",
        "--env",
        &format!("FERRY__KAFKA__ADVERTISED_PORT={}", ports.kafka),
        "--volume",
        &mount,
        // podman asks for higher limits than this machine's root, which lacks
        // CAP_SYS_RESOURCE, may set.
        "--ulimit",
        &format!("nofile={nofile}:{nofile}"),
        "--ulimit",
        &format!("nproc={nproc}:{nproc}"),
        &tag,
    ]);
    cleanup.container = Some(name.clone());
    assert!(run.status.success(), "podman run: {}", stderr(&run));

    let healthz = crate::common::wait::try_until_blocking(STARTUP, || {
        get(ports.metrics, "/healthz")
            .ok()
            .filter(|(s, _)| *s == 200)
    });
    assert!(
        healthz.is_some(),
        "/healthz did not answer through the published port within {STARTUP:?}; the log:\n{}",
        logs(&name)
    );

    // The image's HEALTHCHECK, run now rather than on its 10 s timer (which podman keeps
    // with systemd, absent here), and the status it records.
    let check = engine(&["healthcheck", "run", &name]);
    assert!(
        check.status.success(),
        "healthcheck: {}{}",
        stdout(&check),
        stderr(&check)
    );
    assert_eq!(inspect(&name, "{{.State.Health.Status}}"), "healthy");

    // Every id of the process is 10001, as the systemd unit's and Kubernetes' are, and the
    // data directory in the volume belongs to it.
    let pid = inspect(&name, "{{.State.Pid}}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    for ids in ["Uid:", "Gid:"] {
        let line = status.lines().find(|l| l.starts_with(ids)).unwrap();
        assert_eq!(
            line.split_whitespace().skip(1).collect::<Vec<_>>(),
            ["10001"; 4],
            "{line}"
        );
    }
    let owner = engine(&["exec", &name, "stat", "-c", "%u:%g", "/var/lib/ferry/data"]);
    assert_eq!(stdout(&owner).trim(), "10001:10001", "{}", stderr(&owner));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(amqp_round_trip(ports.amqp));
    runtime.block_on(kafka_round_trip(&format!("127.0.0.1:{}", ports.kafka)));

    let stopping = Instant::now();
    let stop = run_for(
        Command::new(script()).args(["engine", "stop", "--time", &GRACE_S.to_string(), &name]),
        Duration::from_secs(GRACE_S) + COMMAND,
    );
    let stopped_in = stopping.elapsed();
    assert!(stop.status.success(), "podman stop: {}", stderr(&stop));
    let log = logs(&name);
    assert_eq!(inspect(&name, "{{.State.ExitCode}}"), "0", "{log}");
    assert!(
        stopped_in < Duration::from_secs(GRACE_S),
        "stopped after {stopped_in:?}, past the {GRACE_S} s grace period (SIGKILL):\n{log}"
    );
    assert!(
        log.contains("signal=\"SIGTERM\"") && log.contains("ferry stopped"),
        "{log}"
    );
}

/// Publishes two messages with confirms to a queue as the user `ferry` and consumes them.
async fn amqp_round_trip(port: u16) {
    let uri = format!("amqp://ferry:{PASSWORD}@127.0.0.1:{port}/%2f");
    let (_connection, channel) = amqp::channel(&uri).await;
    amqp::declare(&channel, "from-the-host", Default::default()).await;
    amqp::publish_confirmed(&channel, "", "from-the-host", &["one", "two"]).await;
    let mut consumer = amqp::consume(&channel, "from-the-host", false).await;
    for body in ["one", "two"] {
        let delivery = amqp::next(&mut consumer).await;
        assert_eq!(delivery.data, body.as_bytes());
        delivery
            .ack(lapin::options::BasicAckOptions::default())
            .await
            .unwrap();
    }
}

/// Produces three records (acks=all) and reads them back in a consumer group.
async fn kafka_round_trip(bootstrap: &str) {
    let producer = kafka::producer(bootstrap, &[]);
    kafka::send_range(&producer, "from-the-host", 0, 3).await;
    let consumer = kafka::consumer(bootstrap, "image-test", &[]);
    consumer.subscribe(&["from-the-host"]).unwrap();
    let mut values = Vec::new();
    while values.len() < 3 {
        let record = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("a record within 30 s")
            .unwrap();
        values.push(String::from_utf8(record.payload().unwrap().to_vec()).unwrap());
    }
    values.sort();
    assert_eq!(values, ["0", "1", "2"]);
}

/// Removes the container and the image, also when the test fails.
struct Cleanup {
    /// The container's name, once started.
    container: Option<String>,
    /// The image's tag, once built.
    image: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(name) = &self.container {
            engine(&["rm", "--force", "--time", "0", name]);
        }
        if let Some(tag) = &self.image {
            engine(&["rmi", "--force", tag]);
        }
    }
}

/// `scripts/image.sh`.
fn script() -> PathBuf {
    repository().join("scripts/image.sh")
}

/// Runs the container engine (podman) through `scripts/image.sh engine`, which adds the
/// options this machine needs.
fn engine(args: &[&str]) -> Output {
    run_for(Command::new(script()).arg("engine").args(args), COMMAND)
}

/// `podman inspect --format FORMAT NAME`, trimmed.
fn inspect(name: &str, format: &str) -> String {
    let out = engine(&["inspect", "--format", format, name]);
    assert!(out.status.success(), "podman inspect: {}", stderr(&out));
    stdout(&out).trim().to_owned()
}

/// The container's log (Ferry logs to standard error).
fn logs(name: &str) -> String {
    let out = engine(&["logs", name]);
    format!("{}{}", stdout(&out), stderr(&out))
}

/// The open-file and process limits to give the container: this process's hard limits
/// (root here cannot raise them), the process limit at most 32768, where podman caps its own.
fn ulimits() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let hard = |name: &str| -> u64 {
        let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
        // "Max open files   20000   20000   files": the hard limit is the second number.
        let fields: Vec<&str> = line[name.len()..].split_whitespace().collect();
        fields[1].parse().unwrap_or(u64::MAX)
    };
    (
        hard("Max open files").min(1 << 20),
        hard("Max processes").min(32768),
    )
}

/// Runs `command` to its end, killing it after `limit`; its output. The output goes to
/// files, so a talkative command never blocks on a full pipe while it is polled.
fn run_for(command: &mut Command, limit: Duration) -> Output {
    use std::io::{Read, Seek};
    let (mut out, mut err) = (tempfile::tempfile().unwrap(), tempfile::tempfile().unwrap());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(err.try_clone().unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {command:?} ({e}); install with scripts/setup.sh"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break std::process::ExitStatus::default();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |file: &mut std::fs::File| {
        let mut bytes = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut bytes).unwrap();
        bytes
    };
    let output = Output {
        status,
        stdout: read(&mut out),
        stderr: read(&mut err),
    };
    assert!(
        Instant::now() <= deadline,
        "{command:?} ran past {limit:?}: {}",
        stderr(&output)
    );
    output
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
