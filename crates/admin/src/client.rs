//! The management API over HTTP(S): basic auth on every request, JSON in and out, and
//! every refusal turned into one [`ClientError`] that names the request, the HTTP status
//! and the API's `reason` — never the password, which is only ever in the
//! `Authorization` header.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use ureq::http::{Method, Request};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// Upper bound on one request, connection and answer included (an import of large
/// definitions is one request).
const TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read (a definitions export of many objects).
const MAX_ANSWER: u64 = 256 * 1024 * 1024;

/// Why a command could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The API answered with an error status.
    #[error("{method} {path}: {status} {reason}")]
    Status {
        /// The request's method.
        method: Method,
        /// The request's path (no credentials are ever in it).
        path: String,
        /// The HTTP status.
        status: u16,
        /// The API's `reason`, or the status's own words when it gave none.
        reason: String,
    },
    /// The API could not be reached or did not answer in time.
    #[error("cannot reach the management API at {url}: {message}")]
    Transport {
        /// The base URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The answer is not what the API sends.
    #[error("{path}: the answer is not JSON: {message}")]
    Answer {
        /// The request's path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The `--ca-file` cannot be used.
    #[error("--ca-file {}: {message}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The command line asks for something impossible (a bad value, a missing file).
    #[error("{0}")]
    Usage(String),
}

/// Where the API is and who asks.
pub(crate) struct Connection<'a> {
    /// The base URL (`http://127.0.0.1:15672`).
    pub(crate) url: &'a str,
    /// The user name.
    pub(crate) user: &'a str,
    /// The password.
    pub(crate) password: &'a str,
    /// PEM certificates to trust for `https` instead of the built-in roots.
    pub(crate) ca_file: Option<&'a Path>,
}

/// A client of one management API.
pub(crate) struct Client {
    /// Keeps connections alive between a command's requests.
    agent: ureq::Agent,
    /// The base URL, without a trailing `/`.
    base: String,
    /// The `Authorization` header's value (it holds the password: never shown).
    authorization: String,
}

impl Client {
    /// A client of the API at `c.url` as `c.user`.
    ///
    /// # Errors
    /// [`ClientError::CaFile`] for a CA file that cannot be read or holds no certificate;
    /// [`ClientError::Usage`] for a URL that is not `http(s)://` or carries credentials.
    pub(crate) fn new(c: &Connection<'_>) -> Result<Self, ClientError> {
        let base = c.url.trim_end_matches('/').to_owned();
        let authority = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"))
            .ok_or_else(|| {
                ClientError::Usage("--url must begin with http:// or https://".into())
            })?;
        // A password in the URL would end up in error messages: it belongs in --password.
        if authority
            .split('/')
            .next()
            .unwrap_or_default()
            .contains('@')
        {
            return Err(ClientError::Usage(
                "--url must not hold credentials: give them with --user and --password".into(),
            ));
        }
        let mut tls = TlsConfig::builder();
        if let Some(path) = c.ca_file {
            tls = tls.root_certs(RootCerts::from(ca_certificates(path)?));
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(TIMEOUT))
            .tls_config(tls.build())
            .build();
        let credentials = STANDARD.encode(format!("{}:{}", c.user, c.password));
        Ok(Self {
            agent: config.into(),
            base,
            authorization: format!("Basic {credentials}"),
        })
    }

    /// `GET path`, its JSON answer.
    ///
    /// # Errors
    /// As [`Self::send`].
    pub(crate) fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.send(Method::GET, path, None)
    }

    /// `PUT path` with `body`.
    ///
    /// # Errors
    /// As [`Self::send`].
    pub(crate) fn put(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.send(Method::PUT, path, Some(body))
    }

    /// `POST path` with `body`.
    ///
    /// # Errors
    /// As [`Self::send`].
    pub(crate) fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        self.send(Method::POST, path, Some(body))
    }

    /// `DELETE path`.
    ///
    /// # Errors
    /// As [`Self::send`].
    pub(crate) fn delete(&self, path: &str) -> Result<Value, ClientError> {
        self.send(Method::DELETE, path, None)
    }

    /// `GET path`, its body copied to `out` as it arrives (a backup larger than memory);
    /// returns the answer's `header`, if it has one.
    ///
    /// # Errors
    /// As [`Self::send`]; [`ClientError::Transport`] when the body breaks off or `out`
    /// cannot be written.
    pub(crate) fn download(
        &self,
        path: &str,
        header: &str,
        out: &mut impl std::io::Write,
    ) -> Result<Option<String>, ClientError> {
        let request = self
            .request(Method::GET, path)
            .body(())
            .map_err(|e| ClientError::Usage(e.to_string()))?;
        // A download takes as long as the store is large: the answer's headers must come
        // within the usual time, its body has no deadline.
        let request = self
            .agent
            .configure_request(request)
            .timeout_global(None)
            .timeout_recv_response(Some(TIMEOUT))
            .build();
        let mut answer = self
            .agent
            .run(request)
            .map_err(|e| self.transport(e.to_string()))?;
        let status = answer.status();
        if status.is_client_error() || status.is_server_error() {
            let text = answer
                .body_mut()
                .with_config()
                .limit(MAX_ANSWER)
                .read_to_vec()
                .unwrap_or_default();
            return Err(self.refusal(Method::GET, path, status, &text));
        }
        let value = answer
            .headers()
            .get(header)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        std::io::copy(&mut answer.body_mut().as_reader(), out)
            .map_err(|e| self.transport(e.to_string()))?;
        Ok(value)
    }

    /// A request to `path` with the credentials.
    fn request(&self, method: Method, path: &str) -> ureq::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", &self.authorization)
    }

    /// The API cannot be reached, or broke off.
    fn transport(&self, message: String) -> ClientError {
        ClientError::Transport {
            url: self.base.clone(),
            message,
        }
    }

    /// An answer of 400 or more with body `text`, as the error it is.
    fn refusal(
        &self,
        method: Method,
        path: &str,
        status: ureq::http::StatusCode,
        text: &[u8],
    ) -> ClientError {
        let reason = serde_json::from_slice::<Value>(text)
            .ok()
            .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_owned))
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| status.canonical_reason().unwrap_or_default().to_owned());
        ClientError::Status {
            method,
            path: path.to_owned(),
            status: status.as_u16(),
            reason,
        }
    }

    /// Sends one request; its JSON answer (`null` for an empty one, as a 204's).
    ///
    /// # Errors
    /// [`ClientError::Status`] for an answer of 400 or more, [`ClientError::Transport`]
    /// when the API cannot be reached, [`ClientError::Answer`] for an answer that is not
    /// JSON.
    fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, ClientError> {
        let mut request = self.request(method.clone(), path);
        let bytes = match body {
            Some(body) => {
                request = request.header("content-type", "application/json");
                body.to_string().into_bytes()
            }
            None => Vec::new(),
        };
        let request = request
            .body(bytes)
            .map_err(|e| ClientError::Usage(e.to_string()))?;
        let transport = |e: ureq::Error| self.transport(e.to_string());
        let mut answer = self.agent.run(request).map_err(transport)?;
        let status = answer.status();
        let text = answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .map_err(transport)?;
        let json = if text.iter().all(u8::is_ascii_whitespace) {
            Ok(Value::Null)
        } else {
            serde_json::from_slice(&text)
        };
        if status.is_client_error() || status.is_server_error() {
            return Err(self.refusal(method, path, status, &text));
        }
        json.map_err(|e| ClientError::Answer {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }
}

/// The certificates of the PEM file at `path`.
fn ca_certificates(path: &Path) -> Result<Vec<Certificate<'static>>, ClientError> {
    let failed = |message: String| ClientError::CaFile {
        path: path.to_owned(),
        message,
    };
    let pem = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    let mut certificates = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        if let PemItem::Certificate(c) = item.map_err(|e| failed(e.to_string()))? {
            certificates.push(c);
        }
    }
    if certificates.is_empty() {
        return Err(failed("holds no PEM certificate".into()));
    }
    Ok(certificates)
}

/// `name` as one segment of a URL path: everything but RFC 3986's unreserved characters
/// percent-encoded (vhost `/` is `%2F`, as RabbitMQ's URLs have it).
pub(crate) fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("/"), "%2F");
        assert_eq!(segment("orders.v1-a_b~"), "orders.v1-a_b~");
        assert_eq!(segment("a b/é"), "a%20b%2F%C3%A9");
    }

    #[test]
    fn credentials_in_the_url_are_refused_without_being_repeated() {
        let c = Connection {
            url: "http://admin:s3cret@127.0.0.1:15672",
            user: "guest",
            password: "guest",
            ca_file: None,
        };
        let message = Client::new(&c).err().unwrap().to_string();
        assert!(message.contains("--user and --password"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
}
