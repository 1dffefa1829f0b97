//! A minimal HTTP/1.1 client for tests that read the daemon's `/metrics`, `/healthz` and
//! `/readyz` endpoints ([`get`]) or post a large JSON body to its management API ([`post`],
//! where a debug build takes seconds over a request of tens of MB).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// `GET path` on 127.0.0.1:`port`: the status code and the body.
pub fn get(port: u16, path: &str) -> io::Result<(u16, String)> {
    let mut stream = connect(port, Duration::from_secs(5))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    response(stream)
}

/// `POST path` of the JSON `body` on 127.0.0.1:`port` as guest (basic authentication):
/// the status code and the body.
pub fn post(port: u16, path: &str, body: &[u8]) -> io::Result<(u16, String)> {
    let mut stream = connect(port, Duration::from_secs(120))?;
    // base64("guest:guest")
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    response(stream)
}

/// A connection to 127.0.0.1:`port` whose reads and writes wait at most `patience`.
fn connect(port: u16, patience: Duration) -> io::Result<TcpStream> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(patience))?;
    stream.set_write_timeout(Some(patience))?;
    Ok(stream)
}

/// The status code and body of the response `stream` reads until it closes.
fn response(mut stream: TcpStream) -> io::Result<(u16, String)> {
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, response.clone());
    let (head, body) = response.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_owned()))
}
