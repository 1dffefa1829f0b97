//! How a server ended a raw TCP connection, as its client sees it: an orderly close (a
//! FIN after everything sent) or a reset (the server dropped what it had not sent).

use std::io::ErrorKind;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// How the server ended a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// End of file after every byte sent: the server closed it in order.
    Closed,
    /// The server reset it.
    Reset,
    /// Another read error.
    Failed(ErrorKind),
}

/// Reads and discards whatever `stream` still holds until it ends, within `wait`.
///
/// # Panics
/// When it has not ended within `wait`.
pub async fn read_to_the_end(stream: &mut TcpStream, wait: Duration) -> Ending {
    tokio::time::timeout(wait, async {
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) => return Ending::Closed,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ending::Reset,
                Err(e) => return Ending::Failed(e.kind()),
            }
        }
    })
    .await
    .expect("the connection did not end within the wait")
}
