//! Relaying a connection both ways until both sides are done or it has been idle
//! too long.

use super::head::Io;

use sandlot_core::secret::{Echo, Injector};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// Relays both ways until both sides are done, `first` sent to the server before,
/// or until neither side said anything for [`IDLE`].
pub(super) async fn splice(client: UnixStream, upstream: TcpStream, first: Vec<u8>) -> Io {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = upstream.into_split();
    server_write.write_all(&first).await?;
    let activity = Activity::new();
    let up = copy(&mut client_read, &mut server_write, &activity, true);
    let down = copy(&mut server_read, &mut client_write, &activity, true);
    let (up, down) = idle_limited(async { tokio::join!(up, down) }, &activity).await?;
    up.and(down)
}

/// How long a relayed connection may carry nothing either way.
const IDLE: Duration = Duration::from_secs(600);

/// When a relayed connection last carried a byte.
pub(super) struct Activity {
    start: tokio::time::Instant,
    pub(super) last: std::sync::atomic::AtomicU64,
}

impl Activity {
    pub(super) fn new() -> Activity {
        Activity {
            start: tokio::time::Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last.store(now, std::sync::atomic::Ordering::Relaxed);
    }

    fn idle(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(std::sync::atomic::Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Runs `relay` until it ends or its connection has been idle for [`IDLE`].
pub(super) async fn idle_limited<T>(
    relay: impl std::future::Future<Output = T>,
    activity: &Activity,
) -> std::io::Result<T> {
    tokio::pin!(relay);
    loop {
        tokio::select! {
            done = &mut relay => return Ok(done),
            () = tokio::time::sleep(IDLE / 10) => {
                if activity.idle() >= IDLE {
                    return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle"));
                }
            }
        }
    }
}

/// [`copy`] of what a server sends back, each bound secret's value in it replaced by
/// its placeholder: an upstream that echoes a request shows the sandbox what it sent.
/// Then shuts `to` down for writing.
pub(super) async fn copy_back(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    activity: &Activity,
    secrets: &Injector,
) -> Io {
    let echo = (!secrets.is_empty()).then(|| secrets.echo());
    relay(from, to, activity, true, echo).await
}

/// Copies until `from` ends, marking each chunk as activity; then shuts `to` down
/// for writing if `close`.
pub(super) async fn copy(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    activity: &Activity,
    close: bool,
) -> Io {
    relay(from, to, activity, close, None).await
}

/// [`copy`], each chunk through `echo` if there is one.
async fn relay(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    activity: &Activity,
    close: bool,
    mut echo: Option<Echo<'_>>,
) -> Io {
    let mut buf = vec![0u8; 16 * 1024];
    let copied = loop {
        match from.read(&mut buf).await {
            Ok(0) => {
                break match echo.take() {
                    Some(echo) => to.write_all(&echo.finish()).await,
                    None => Ok(()),
                }
            }
            Ok(n) => {
                activity.touch();
                let written = match echo.as_mut() {
                    Some(echo) => to.write_all(&echo.push(&buf[..n])).await,
                    None => to.write_all(&buf[..n]).await,
                };
                // A TLS stream keeps what the socket could not take yet until it is
                // flushed: the tail of an answer would wait there for a next write
                // that a kept-alive server never makes. (A no-op on a socket.)
                if let Err(e) = written.and(to.flush().await) {
                    break Err(e);
                }
            }
            Err(e) => break Err(e),
        }
    };
    if close {
        let _ = to.shutdown().await;
    }
    copied
}
