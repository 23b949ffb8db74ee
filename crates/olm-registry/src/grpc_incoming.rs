//! Accepted gRPC connections, bounded: at most `max_connections` at once (a connection over
//! the limit is closed at once), and a client must send the HTTP/2 preface and the header of
//! its SETTINGS frame within `first_bytes_timeout`. Without these a client that opens
//! connections and sends half a preface holds a file descriptor each for ever (tonic has no
//! handshake deadline); once the handshake is in, HTTP/2 keepalive and the request timeout
//! take over.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The 24-byte client preface and a 9-byte frame header (its SETTINGS).
const HANDSHAKE_BYTES: usize = 24 + 9;

/// One accepted connection: reads fail with `TimedOut` if the handshake's bytes have not all
/// arrived by the deadline; its slot is given back when it is dropped.
pub struct GuardedStream {
    stream: TcpStream,
    /// Until [`HANDSHAKE_BYTES`] have arrived.
    first_bytes: Option<Pin<Box<tokio::time::Sleep>>>,
    received: usize,
    _slot: OwnedSemaphorePermit,
}

impl AsyncRead for GuardedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.received += buf.filled().len() - before;
                if this.received >= HANDSHAKE_BYTES {
                    this.first_bytes = None;
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let expired = this.first_bytes.as_mut().is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "no HTTP/2 handshake before the deadline")))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

/// The connections `listener` accepts, guarded as the module says.
pub fn incoming(listener: TcpListener, max_connections: usize, first_bytes_timeout: Duration) -> impl Stream<Item = io::Result<GuardedStream>> {
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    futures::stream::unfold((listener, slots), move |(listener, slots)| async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!("accepting a gRPC connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "too many gRPC connections ({max_connections}); closing this one");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let guarded = GuardedStream { stream, first_bytes: Some(Box::pin(tokio::time::sleep(first_bytes_timeout))), received: 0, _slot: slot };
            return Some((Ok(guarded), (listener, slots)));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_client_that_stalls_in_the_handshake_is_cut_off_and_one_that_completes_it_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accepted = Box::pin(incoming(listener, 8, Duration::from_millis(200)));

        // Half a preface, then nothing.
        let mut stalling = TcpStream::connect(addr).await.unwrap();
        stalling.write_all(b"PRI * HTTP/2.0").await.unwrap();
        let mut server_side = accepted.next().await.unwrap().unwrap();
        let mut buf = [0u8; 64];
        let mut got = 0;
        let err = loop {
            match server_side.read(&mut buf).await {
                Ok(n) => got += n,
                Err(err) => break err,
            }
        };
        assert_eq!((got, err.kind()), (14, io::ErrorKind::TimedOut));

        let mut talking = TcpStream::connect(addr).await.unwrap();
        let mut server_side = accepted.next().await.unwrap().unwrap();
        talking.write_all(&[b'P'; HANDSHAKE_BYTES]).await.unwrap();
        let mut read = 0;
        while read < HANDSHAKE_BYTES {
            read += server_side.read(&mut buf).await.unwrap();
        }
        // After the first bytes, a pause is not the handshake's business.
        tokio::time::sleep(Duration::from_millis(300)).await;
        talking.write_all(b"x").await.unwrap();
        assert_eq!(server_side.read(&mut buf).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn connections_over_the_limit_are_closed_until_a_slot_is_free() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accepted = Box::pin(incoming(listener, 1, Duration::from_secs(5)));
        let _first = TcpStream::connect(addr).await.unwrap();
        let held = accepted.next().await.unwrap().unwrap();
        let next = tokio::spawn(async move { accepted.next().await.map(|c| c.is_ok()) });
        let mut second = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(second.read(&mut buf).await.unwrap_or(0), 0, "the second connection is closed while the first holds the slot");
        drop(held);
        let _fourth = TcpStream::connect(addr).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(5), next).await.expect("accepted once the slot is free").unwrap();
        assert_eq!(got, Some(true));
    }
}
