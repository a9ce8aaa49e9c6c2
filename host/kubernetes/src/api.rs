//! Calls to the API server: how long an ordinary one may take, deleting a pod at once,
//! and sending again what a broken connection lost.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use std::future::Future;
use std::time::Duration;

/// How long one ordinary API call (create, get, list, delete) may take.
pub(crate) const API_DEADLINE: Duration = Duration::from_secs(15);

/// Deletes pod `name` without a grace period: the object goes now, and a kubelet that
/// cannot be reached kills the containers of pods it no longer has when it comes back.
/// One already gone is fine.
pub(crate) async fn delete_at_once(
    api: &Api<Pod>,
    name: &str,
) -> std::result::Result<(), kube::Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// Whether `error` says a request got no answer because its connection failed: not
/// the API server refusing it, so sending it again may well work.
fn is_transport(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Service(_))
}

/// Sends a request through `send` until it gets an answer or a failure that is not
/// the connection's, or until most of `deadline` is spent (then the last failure is
/// the answer, rather than a bare timeout that would hide it).
pub(crate) async fn resend_on_transport<T, F, Fut>(
    deadline: Duration,
    mut send: F,
) -> std::result::Result<T, kube::Error>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = std::result::Result<T, kube::Error>>,
{
    let give_up = tokio::time::Instant::now() + deadline.mul_f64(0.8);
    let mut pause = Duration::from_millis(50);
    let mut resend = false;
    loop {
        match send(resend).await {
            Err(e) if is_transport(&e) && tokio::time::Instant::now() + pause < give_up => {
                tracing::debug!("resending a Kubernetes request after: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
                resend = true;
            }
            other => return other,
        }
    }
}
