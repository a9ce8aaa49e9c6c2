//! sandlot's HTTP API inside an application's own axum server: its routes nested
//! under `/sandbox`, beside the application's, behind a token. The example asks its
//! own server to run Python, then stops.
//!
//! ```sh
//! sandlot runtimes install python   # once
//! cargo run -p sandlot --features server --example axum_app
//! ```

use axum::routing::get;
use axum::Router;
use sandlot::server::manager::{ManagerSettings, SessionManager};
use sandlot::server::serve::Token;
use sandlot::service::Service;
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service =
        tokio::task::spawn_blocking(|| Service::from_environment(sandlot::providers())).await??;
    let manager = SessionManager::new(service, ManagerSettings::default())?;
    let token = "app-0123456789abcdef0123456789";
    let app = Router::new()
        .route("/", get(|| async { "the application's own page" }))
        .nest(
            "/sandbox",
            sandlot::server::serve::router(manager.clone(), vec![Token::new("app", token)])?,
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let stop = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stop.1.await;
            })
            .await
    });

    let answer: Value = reqwest::Client::new()
        .post(format!("http://{address}/sandbox/v1/run"))
        .bearer_auth(token)
        .json(&json!({ "language": "python", "backend": "wasm", "code": "print(6 * 7)" }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    println!("the sandbox said {}", answer["stdout"]);
    assert_eq!(answer["stdout"], "42\n", "{answer}");

    let _ = stop.0.send(());
    server.await??;
    // Closes every session the API opened and removes its sandbox.
    tokio::task::spawn_blocking(move || manager.shutdown()).await?;
    Ok(())
}
