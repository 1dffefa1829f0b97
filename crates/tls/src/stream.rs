//! One connection type for every front, over TCP or TLS: [`Stream`] and its owned halves
//! [`ReadHalf`] and [`WriteHalf`], so the AMQP and Kafka fronts run the same code on both.
//!
//! A plaintext stream splits into tokio's owned TCP halves, which share no lock, so the
//! plaintext path costs what it did before TLS existed (one match per poll). A TLS session
//! is one state machine for both directions, so its halves share it through tokio's
//! `split`, whose lock is taken per poll.
//!
//! A peer that reads nothing is cut off with a reset ([`Resettable::reset_on_close`]), as
//! RabbitMQ's listeners do (`linger {true, 0}`): a plain close would queue its FIN behind
//! bytes the peer never reads, so the peer would never learn of it and the kernel would
//! keep the orphaned socket and its unsent bytes for minutes.

#![allow(unsafe_code, reason = "SO_LINGER is set with setsockopt, a libc call")]

use std::io;
use std::os::fd::{AsRawFd, RawFd};
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
    /// Of a TLS session, and its TCP socket's descriptor (the session's halves hide the
    /// socket; the read half keeps it open while this half lives).
    Tls(tokio::io::WriteHalf<Box<TlsStream<TcpStream>>>, RawFd),
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
                let socket = tls.get_ref().0.as_raw_fd();
                let (r, w) = tokio::io::split(tls);
                (ReadHalf::Tls(r), WriteHalf::Tls(w, socket))
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

/// A connection's write side that can be told to end in a reset.
pub trait Resettable {
    /// Makes closing the connection reset it (`SO_LINGER` 0): what the socket has not sent
    /// is dropped and the peer is told at once. For a peer that reads nothing; a close
    /// after an orderly goodbye keeps its FIN, so the goodbye arrives.
    ///
    /// # Errors
    /// The socket's error.
    fn reset_on_close(&self) -> io::Result<()>;
}

/// An in-memory pipe (the tests' stand-in for a socket) has no connection to reset.
impl Resettable for tokio::io::DuplexStream {
    fn reset_on_close(&self) -> io::Result<()> {
        Ok(())
    }
}

impl WriteHalf {
    /// The TCP socket's descriptor.
    fn socket(&self) -> RawFd {
        match self {
            Self::Plain(w) => w.as_ref().as_raw_fd(),
            Self::Tls(_, socket) => *socket,
        }
    }
}

impl Resettable for WriteHalf {
    fn reset_on_close(&self) -> io::Result<()> {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        let len = libc::socklen_t::try_from(std::mem::size_of::<libc::linger>())
            .expect("a linger struct's size fits socklen_t");
        // SAFETY: setsockopt reads `len` bytes from the struct it is given, on the socket
        // this half keeps open (a TLS session's socket is dropped only with both halves).
        let rc = unsafe {
            libc::setsockopt(
                self.socket(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                len,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
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
            Self::Tls(s, _) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s, _) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s, _) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
