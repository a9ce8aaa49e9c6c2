//! Docker with a pool: sandboxes are opened and warmed ahead of the sessions that
//! take them, so a session starts in milliseconds instead of a container's start.
//!
//! ```sh
//! sandlot images build python       # once: the hardened Python image
//! cargo run -p sandlot --features docker --example docker_pool
//! ```

use sandlot::backend::pool::{Exhausted, PoolOptions};
use std::time::{Duration, Instant};

fn main() -> Result<(), sandlot::Error> {
    let plugins = sandlot::PluginHost::builder().load()?;
    let sandlot = sandlot::builder(plugins)
        .pool(
            "docker",
            PoolOptions {
                min_idle: 2,
                max_size: 4,
                when_exhausted: Exhausted::Wait,
                acquire_timeout: Duration::from_secs(60),
                ..PoolOptions::default()
            },
        )
        .build()?;
    // Waits until the first sandbox of this kind is ready.
    sandlot.session("python").backend("docker").warm()?;

    for round in 1..=3 {
        let started = Instant::now();
        let mut session = sandlot.session("python").backend("docker").open()?;
        let opened = started.elapsed();
        let run = session.run(&format!("print({round} * 7)"))?;
        assert_eq!(run.stdout_text().trim(), (round * 7).to_string());
        println!(
            "session {round}: opened in {opened:.2?}, ran in {:.2?}",
            run.duration
        );
        // Closed, its container is destroyed and the pool warms another.
        session.close();
    }
    let stats = sandlot.pool("docker")?.stats();
    println!("pool: {} hits, {} created", stats.hits, stats.created);
    // Every pooled container is gone when this returns.
    sandlot.close_pools(Duration::from_secs(10));
    Ok(())
}
