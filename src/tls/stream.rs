//! One connection type for every front, over TCP or TLS: [`Stream`] and its owned halves
//! [`ReadHalf`] and [`WriteHalf`], so the AMQP and Kafka fronts run the same code on both.
//!
//! A plaintext stream splits into tokio's owned TCP halves, which share no lock, so the
//! plaintext path costs what it did before TLS existed (one match per poll). A TLS session
//! is one state machine for both directions, so its halves share it through tokio's
//! `split`, whose lock is taken per poll.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_rustls::server::TlsStream;

/// A client connection, plaintext or TLS (past its handshake).
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

/// The read half of a [`Stream`].
#[derive(Debug)]
pub enum ReadHalf {
    /// Of plain TCP.
    Plain(OwnedReadHalf),
    /// Of a TLS session.
    Tls(tokio::io::ReadHalf<Box<TlsStream<TcpStream>>>),
}

/// The write half of a [`Stream`].
#[derive(Debug)]
pub enum WriteHalf {
    /// Of plain TCP.
    Plain(OwnedWriteHalf),
    /// Of a TLS session.
    Tls(tokio::io::WriteHalf<Box<TlsStream<TcpStream>>>),
}

impl Stream {
    /// The local address the client connected to.
    ///
    /// # Errors
    /// The socket's error.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            Self::Plain(tcp) => tcp.local_addr(),
            Self::Tls(tls) => tls.get_ref().0.local_addr(),
        }
    }

    /// Splits the stream into halves that can move to different tasks.
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Self::Plain(tcp) => {
                let (r, w) = tcp.into_split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Self::Tls(tls) => {
                let (r, w) = tokio::io::split(tls);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
