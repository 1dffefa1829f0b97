//! RabbitMQ → Ferry → RabbitMQ over amqps, against a RabbitMQ node of the test's own whose
//! TLS listener requires client certificates (`verify_peer`, `fail_if_no_peer_cert`), or
//! does not, with certificates the test makes ([`Pki`]):
//! - a RabbitMQ source and a RabbitMQ sink over TLS (CA file, client certificate, server
//!   name) move every message exactly once, and RabbitMQ sees both connections as TLS
//!   authenticated by Ferry's client certificate;
//! - against a node that does not require client certificates, a source and a sink with
//!   only `ca_file` move every message exactly once, over TLS without a certificate;
//! - a CA that did not sign the broker's certificate, a server name the certificate does
//!   not carry and a missing client certificate each leave their source down in
//!   `/readyz` with the reason, while the password appears in neither `/readyz` nor the log.

use crate::common::daemon::{Daemon, Setup};
use crate::common::rabbitmq::{ClientCerts, RabbitNode, unique};
use crate::common::tls::Pki;
use crate::rabbitmq::{Rabbit, collect, receive};
use lapin::BasicProperties;
use lapin::message::Delivery;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// The only name in the broker's certificate (the URIs say 127.0.0.1).
const SERVER_NAME: &str = "rabbit.ferry.test";

/// A TLS node, its certificates and a user of its own.
struct TlsBroker {
    /// Stopped before the certificates go (fields drop in order).
    node: Arc<RabbitNode>,
    pki: Pki,
    /// Ferry's client certificate and key.
    client: (PathBuf, PathBuf),
    /// The user's password, which must never be shown.
    password: String,
}

impl TlsBroker {
    /// A node requiring client certificates, its certificate naming only [`SERVER_NAME`].
    fn start() -> Self {
        Self::start_with(ClientCerts::Required, &[SERVER_NAME])
    }

    /// A node requiring client certificates or not, its certificate naming `names`.
    fn start_with(client_certs: ClientCerts, names: &[&str]) -> Self {
        let pki = Pki::new("ferry test CA");
        pki.issue("server", SERVER_NAME, names);
        let client = pki.issue("client", "ferry-bridge", &[]);
        let node = Arc::new(RabbitNode::start_tls(pki.dir(), client_certs));
        let password = unique("password");
        for args in [
            vec!["add_user", "bridge", password.as_str()],
            vec!["set_permissions", "-p", "/", "bridge", ".*", ".*", ".*"],
        ] {
            let out = node.ctl(&args);
            assert!(out.status.success(), "rabbitmqctl {args:?}: {out:?}");
        }
        Self {
            node,
            pki,
            client,
            password,
        }
    }

    /// The amqps URI of user `bridge`.
    fn uri(&self) -> String {
        self.node
            .amqps_uri()
            .replacen("guest:guest@", &format!("bridge:{}@", self.password), 1)
    }

    /// The TLS keys of a source or sink: `ca_file`, the client certificate unless
    /// `with_cert` is false, and `server_name`.
    fn tls_keys(&self, ca_file: &Path, server_name: &str, with_cert: bool) -> String {
        let mut keys = format!(
            "ca_file = \"{}\"\nserver_name = \"{server_name}\"\n",
            ca_file.display()
        );
        if with_cert {
            keys += &format!(
                "cert_file = \"{}\"\nkey_file = \"{}\"\n",
                self.client.0.display(),
                self.client.1.display()
            );
        }
        keys
    }

    /// Asserts that neither `daemon`'s `/readyz` nor its log shows the password.
    fn assert_password_hidden(&self, daemon: &Daemon) {
        let (readyz, log) = (daemon.readyz(), daemon.log());
        assert!(!readyz.contains(&self.password), "{readyz}");
        assert!(
            !log.contains(&self.password),
            "the log shows the password:\n{log}"
        );
    }
}

/// Publishes `sent` to queue `from` and asserts that every body arrives at `rx` (the
/// route's destination) exactly once, and nothing more.
async fn each_arrives_once(
    rabbit: &Rabbit,
    from: &str,
    rx: &mut UnboundedReceiver<Delivery>,
    sent: Vec<(BasicProperties, Vec<u8>)>,
    daemon: &Daemon,
) {
    rabbit.publish(from, &sent).await;
    let got = receive(rx, sent.len(), Duration::from_secs(60)).await;
    assert_eq!(got.len(), sent.len(), "{}", daemon.readyz());
    let bodies: BTreeSet<Vec<u8>> = got.iter().map(|d| d.data.clone()).collect();
    let want: BTreeSet<Vec<u8>> = sent.into_iter().map(|(_, body)| body).collect();
    assert_eq!(bodies, want);
    assert!(receive(rx, 1, Duration::from_secs(2)).await.is_empty());
}

/// The line of `rabbitmqctl list_connections client_properties …` output for the
/// connection Ferry's bridge names `ferry bridge LABEL`.
fn connection_of<'a>(listing: &'a str, label: &str) -> &'a str {
    listing
        .lines()
        .find(|l| l.contains(&format!("ferry bridge {label}")))
        .unwrap_or_else(|| panic!("no connection of {label}:\n{listing}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_and_a_sink_over_amqps_with_a_client_certificate_move_every_message_once() {
    let broker = TlsBroker::start();
    let mut rabbit = Rabbit::on(broker.node.clone()).await;
    let (from, to) = (unique("tls-in"), unique("tls-out"));
    rabbit.queue(&from).await;
    rabbit.queue(&to).await;
    let mut rx = collect(broker.node.uri(), &to).await;
    let tls = broker.tls_keys(&broker.pki.ca_file(), SERVER_NAME, true);
    let uri = broker.uri();
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::config(
        dir.path(),
        &format!(
            r#"
[sources.tls-in]
kind = "rabbitmq"
uri = "{uri}"
queue = "{from}"
{tls}
[sinks.tls-out]
kind = "rabbitmq"
uri = "{uri}"
routing_key = "{to}"
{tls}
[[routes]]
name = "tls"
from = {{ source = "tls-in" }}
to = [{{ sink = "tls-out" }}]
"#
        ),
    )
    .start();

    const N: usize = 200;
    let sent: Vec<(BasicProperties, Vec<u8>)> = (0..N)
        .map(|i| {
            let properties = BasicProperties::default().with_message_id(format!("m{i}").into());
            (properties, format!("over tls {i}").into_bytes())
        })
        .collect();
    each_arrives_once(&rabbit, &from, &mut rx, sent, &daemon).await;

    // RabbitMQ's own view: both connections are TLS and authenticated by Ferry's client
    // certificate.
    let out = broker.node.ctl(&[
        "list_connections",
        "client_properties",
        "ssl",
        "ssl_protocol",
        "peer_cert_subject",
    ]);
    let listing = String::from_utf8_lossy(&out.stdout);
    for label in ["source:tls-in", "sink:tls-out"] {
        let line = connection_of(&listing, label);
        assert!(
            line.contains("\ttrue\t") && line.contains("tlsv1.3"),
            "{line}"
        );
        assert!(line.contains("CN=ferry-bridge"), "{line}");
    }
    let readyz = daemon.readyz();
    assert!(readyz.contains("source:tls-in: up"), "{readyz}");
    assert!(readyz.contains("sink:tls-out: up"), "{readyz}");
    broker.assert_password_hidden(&daemon);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_ca_a_wrong_name_and_a_missing_client_certificate_are_refused_and_shown_without_the_password()
 {
    let broker = TlsBroker::start();
    let other = Pki::new("some other CA");
    let mut rabbit = Rabbit::on(broker.node.clone()).await;
    let (queue, out) = (unique("tls-refused"), unique("tls-refused-out"));
    rabbit.queue(&queue).await;
    rabbit.queue(&out).await;
    let waiting: Vec<_> = (0..3)
        .map(|i| {
            (
                BasicProperties::default(),
                format!("waits {i}").into_bytes(),
            )
        })
        .collect();
    rabbit.publish(&queue, &waiting).await;
    let uri = broker.uri();
    let ca = broker.pki.ca_file();
    let sources = [
        (
            "wrong-ca",
            broker.tls_keys(&other.ca_file(), SERVER_NAME, true),
        ),
        ("wrong-name", broker.tls_keys(&ca, "other.ferry.test", true)),
        ("no-cert", broker.tls_keys(&ca, SERVER_NAME, false)),
    ];
    let mut toml = format!(
        "[sinks.plain-out]\nkind = \"rabbitmq\"\nuri = \"{}\"\nrouting_key = \"{out}\"\n",
        broker.node.uri()
    );
    for (name, tls) in &sources {
        toml += &format!(
            "[sources.{name}]\nkind = \"rabbitmq\"\nuri = \"{uri}\"\nqueue = \"{queue}\"\n{tls}\n\
             [[routes]]\nname = \"{name}\"\nfrom = {{ source = \"{name}\" }}\nto = [{{ sink = \"plain-out\" }}]\n"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::config(dir.path(), &toml).start();
    let redacted = format!(
        "cannot connect to {}",
        uri.replacen(&broker.password, "***", 1)
    );
    let wants = [
        ("source:wrong-ca", "invalid peer certificate: UnknownIssuer"),
        (
            "source:wrong-name",
            "certificate not valid for name \"other.ferry.test\"",
        ),
        (
            "source:no-cert",
            "received fatal alert: CertificateRequired",
        ),
    ];
    daemon.wait_for("three refusals in /readyz", Duration::from_secs(30), |d| {
        let readyz = d.readyz();
        wants.iter().all(|(label, why)| {
            readyz
                .lines()
                .any(|l| l.contains(&format!("{label}: down: {redacted}")) && l.contains(why))
        })
    });
    let readyz = daemon.readyz();
    eprintln!("/readyz:\n{readyz}");
    let log = daemon.log();
    for (label, why) in wants {
        let said = log
            .lines()
            .any(|l| l.contains("RabbitMQ source is down") && l.contains(label) && l.contains(why));
        assert!(said, "no log line says {label}: {why}:\n{log}");
    }
    broker.assert_password_hidden(&daemon);
    // Nothing was consumed over a refused connection.
    assert_eq!(rabbit.depth(&queue).await, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_and_a_sink_with_only_a_ca_file_move_every_message_once_where_client_certificates_are_optional()
 {
    // The certificate also names 127.0.0.1, the URI's host, so no server_name is needed.
    let broker = TlsBroker::start_with(ClientCerts::Optional, &[SERVER_NAME, "127.0.0.1"]);
    let mut rabbit = Rabbit::on(broker.node.clone()).await;
    let (from, to) = (unique("ca-only-in"), unique("ca-only-out"));
    rabbit.queue(&from).await;
    rabbit.queue(&to).await;
    let mut rx = collect(broker.node.uri(), &to).await;
    let uri = broker.uri();
    let ca = broker.pki.ca_file().display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::config(
        dir.path(),
        &format!(
            r#"
[sources.ca-in]
kind = "rabbitmq"
uri = "{uri}"
queue = "{from}"
ca_file = "{ca}"

[sinks.ca-out]
kind = "rabbitmq"
uri = "{uri}"
routing_key = "{to}"
ca_file = "{ca}"

[[routes]]
name = "ca-only"
from = {{ source = "ca-in" }}
to = [{{ sink = "ca-out" }}]
"#
        ),
    )
    .start();

    const N: usize = 100;
    let sent: Vec<(BasicProperties, Vec<u8>)> = (0..N)
        .map(|i| {
            (
                BasicProperties::default(),
                format!("ca only {i}").into_bytes(),
            )
        })
        .collect();
    each_arrives_once(&rabbit, &from, &mut rx, sent, &daemon).await;

    // RabbitMQ's view: both connections are TLS, neither presented a certificate.
    let out = broker.node.ctl(&[
        "list_connections",
        "client_properties",
        "ssl",
        "peer_cert_subject",
    ]);
    let listing = String::from_utf8_lossy(&out.stdout);
    for label in ["source:ca-in", "sink:ca-out"] {
        let line = connection_of(&listing, label);
        assert!(line.contains("\ttrue\t"), "{line}");
        assert!(!line.contains("CN=ferry-bridge"), "{line}");
    }
    broker.assert_password_hidden(&daemon);
}
