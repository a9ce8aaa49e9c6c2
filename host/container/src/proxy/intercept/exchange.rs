//! The requests of one connection the proxy sees through TLS: each checked for its
//! host and against the request rules, the bound secrets put in, sent on; the
//! answers relayed back with the values hidden again.

use super::super::head::{next_head, respond, within, Io};
use super::super::relay::{copy, copy_back, idle_limited, Activity};
use super::super::shared::Shared;
use super::Bound;
use sandlot_core::egress::http::{Request, Target};
use sandlot_core::egress::{DenyReason, Via};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A request let through: its head, its path and query, its body's length.
struct Checked {
    request: Request,
    path: String,
    length: u64,
}

/// Why a request was not sent: the status and the text the client gets.
struct Refused(&'static str, String);

/// Serves the requests the client sends to `host:port` in turn, on one upstream
/// connection, until either side is done. A refused first request is answered;
/// after one went through, a refusal ends the connection (the answers before it
/// may still be on their way), and is reported like every denial.
pub(super) async fn exchange(
    shared: &Shared,
    mut client: impl AsyncRead + AsyncWrite + Unpin,
    upstream: impl AsyncRead + AsyncWrite + Unpin,
    (host, port): (&str, u16),
    bound: &Bound,
) -> Io {
    let mut buf = Vec::new();
    let first = match within(next_head(&mut client, &mut buf)).await? {
        None => return Ok(()),
        Some(head) => check(shared, head, (host, port)),
    };
    let checked = match first {
        Ok(checked) => checked,
        Err(Refused(status, why)) => return respond(&mut client, status, &why).await,
    };
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut server_read, server_write) = tokio::io::split(upstream);
    let activity = Activity::new();
    let sending = Sending {
        shared,
        to: (host, port),
        bound,
        activity: &activity,
    };
    let up = sending.all(&mut client_read, server_write, buf, checked);
    let down = copy_back(
        &mut server_read,
        &mut client_write,
        &activity,
        &bound.injector,
    );
    tokio::pin!(up, down);
    idle_limited(
        async {
            tokio::select! {
                done = &mut down => done,
                sent = &mut up => {
                    sent?;
                    (&mut down).await
                }
            }
        },
        &activity,
    )
    .await?
}

/// What sends one connection's requests upstream.
struct Sending<'a> {
    shared: &'a Shared,
    to: (&'a str, u16),
    bound: &'a Bound,
    activity: &'a Activity,
}

impl Sending<'_> {
    /// Sends `checked`, then each next request the client sends that passes, until
    /// the client is done or one does not; then closes `server` for writing. `buf`
    /// holds what was read of the client beyond the requests sent.
    async fn all(
        &self,
        client: &mut (impl AsyncRead + Unpin),
        mut server: impl AsyncWrite + Unpin,
        mut buf: Vec<u8>,
        mut checked: Checked,
    ) -> Io {
        let (host, port) = self.to;
        loop {
            let Checked {
                mut request,
                mut path,
                length,
            } = checked;
            buf.drain(..request.length);
            self.bound.injector.inject(host, &mut request, &mut path);
            server
                .write_all(&request.for_server_kept(host, port, &path))
                .await?;
            let buffered = buf.len().min(usize::try_from(length).unwrap_or(usize::MAX));
            server.write_all(&buf[..buffered]).await?;
            buf.drain(..buffered);
            let mut body = (&mut *client).take(length - buffered as u64);
            copy(&mut body, &mut server, self.activity, false).await?;
            // The whole request goes out before its answer is awaited.
            server.flush().await?;
            // An idle connection waits for its next request as long as a new one
            // would for its first.
            checked = match within(next_head(client, &mut buf)).await {
                Ok(Some(head)) => match check(self.shared, head, self.to) {
                    Ok(checked) => checked,
                    Err(_) => break,
                },
                Ok(None) | Err(_) => break,
            };
        }
        server.shutdown().await
    }
}

/// Whether the request `head` may go to `host`: it names that host and only it,
/// the request rules as they are now allow it (rules changed since the connection
/// opened hold from its next request), and it frames its body with a length.
fn check(
    shared: &Shared,
    head: Result<Request, String>,
    (host, port): (&str, u16),
) -> Result<Checked, Refused> {
    let request = head.map_err(|why| Refused("400 Bad Request", format!("sandlot: {why}\n")))?;
    let path = match &request.target {
        Target::Origin { path } => path.clone(),
        Target::Absolute {
            host: named, path, ..
        } if named.eq_ignore_ascii_case(host) => path.clone(),
        Target::Absolute { host: named, .. } => return Err(elsewhere(shared, named, (host, port))),
        Target::Authority { .. } => {
            return Err(Refused(
                "400 Bad Request",
                "sandlot: CONNECT inside a connection already made\n".into(),
            ))
        }
    };
    match request.host_header() {
        Some(named) if named.eq_ignore_ascii_case(host) => {}
        named => return Err(elsewhere(shared, &named.unwrap_or_default(), (host, port))),
    }
    let rules = shared.secrets().rules.clone();
    if let Some(denial) = shared
        .denials
        .rule_out(&rules, &request, (host, port), &path, Via::Https)
    {
        return Err(Refused(
            "403 Forbidden",
            format!("sandlot: egress to {denial}\n"),
        ));
    }
    let length = request
        .body_length()
        .map_err(|why| Refused("400 Bad Request", format!("sandlot: {why}\n")))?;
    Ok(Checked {
        request,
        path,
        length,
    })
}

/// A request in a connection to `host` that names another: refused and reported.
fn elsewhere(shared: &Shared, named: &str, (host, port): (&str, u16)) -> Refused {
    let denial = shared.denials.deny(
        host,
        Some(port),
        Via::Http,
        DenyReason::BoundElsewhere {
            named: named.to_string(),
        },
    );
    Refused("403 Forbidden", format!("sandlot: egress to {denial}\n"))
}
