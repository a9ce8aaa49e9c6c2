//! Reading what a sandbox sends first (a line, a request head, a TLS client hello),
//! as a whole within a deadline, and answering it.

use sandlot_core::egress::http::{self, Head};
use sandlot_core::egress::tls::{self, Hello};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

/// How long the sandbox has to say where it wants to go.
pub(super) const HEAD_DEADLINE: Duration = Duration::from_secs(30);

pub(super) type Io = std::io::Result<()>;

pub(super) fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "the sandbox said nothing")
}

/// One line of at most 64 bytes, read a byte at a time so nothing after it is taken.
pub(super) async fn read_line(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    while line.len() < 64 {
        match stream.read_u8().await? {
            b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            byte => line.push(byte),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "no header line",
    ))
}

/// Reads more of the connection into `buf`; `false` at its end.
pub(super) async fn read_more(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let n = tokio::time::timeout(HEAD_DEADLINE, stream.read(&mut chunk))
        .await
        .map_err(|_| timed_out())??;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n > 0)
}

/// Reads until a whole request head is in `buf`; `None` if the sandbox hung up or
/// sent no valid head (it was told why).
pub(super) async fn request_head(
    stream: &mut (impl AsyncRead + AsyncWrite + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<http::Request>> {
    match within(next_head(stream, buf)).await? {
        None => Ok(None),
        Some(Ok(request)) => Ok(Some(request)),
        Some(Err(why)) => {
            respond(stream, "400 Bad Request", &format!("sandlot: {why}\n")).await?;
            Ok(None)
        }
    }
}

/// Reads until a whole request head is at the start of `buf` (which may hold it
/// already): `None` if the stream ended first, why if it is not a request.
pub(super) async fn next_head(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<http::Request, String>>> {
    loop {
        match http::read_head(buf) {
            Head::Request(request) => return Ok(Some(Ok(request))),
            Head::Invalid(why) => return Ok(Some(Err(why))),
            Head::Incomplete => {
                if !read_more(stream, buf).await? {
                    return Ok(None);
                }
            }
        }
    }
}

/// Reads until the client hello at the start of `buf` is whole, or is not one.
pub(super) async fn client_hello(
    stream: &mut UnixStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Hello> {
    loop {
        match tls::client_hello(buf) {
            Hello::Incomplete => {
                if !read_more(stream, buf).await? {
                    return Ok(Hello::Malformed);
                }
            }
            other => return Ok(other),
        }
    }
}

pub(super) async fn respond(
    stream: &mut (impl AsyncWrite + Unpin),
    status: &str,
    body: &str,
) -> Io {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Reads a head or a hello, as a whole within [`HEAD_DEADLINE`] (not only each read
/// of it: a byte every few seconds would hold a connection open for ever).
pub(super) async fn within<T>(
    reading: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    tokio::time::timeout(HEAD_DEADLINE, reading)
        .await
        .map_err(|_| timed_out())?
}
