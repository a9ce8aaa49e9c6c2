//! Python on the in-process wasm backend: no daemon, no container, state kept from
//! one run to the next like notebook cells.
//!
//! ```sh
//! sandlot runtimes install python   # once: CPython for WASI, pinned by hash
//! cargo run -p sandlot --example wasm
//! ```

use std::time::Duration;

fn main() -> Result<(), sandlot::Error> {
    let sandlot = sandlot::from_environment()?;
    let mut session = sandlot
        .session("python")
        .backend("wasm")
        .timeout(Duration::from_secs(30))
        .open()?;
    session.run("import statistics\nsamples = [2, 4, 4, 4, 5, 5, 7, 9]")?;
    let run = session.run("print(statistics.pstdev(samples))")?;
    assert!(run.success(), "{}", run.stderr_text());
    assert_eq!(run.stdout_text().trim(), "2.0");
    println!(
        "population standard deviation: {}",
        run.stdout_text().trim()
    );

    // The code's files come back; their names are checked sandbox paths, written
    // below a folder through a handle on it, never joined as strings.
    let run = session.run("open('output/report.txt', 'w').write('mean 5\\n')")?;
    let folder = tempfile::tempdir().map_err(|e| sandlot::Error::Io {
        context: "making a folder for the report".into(),
        source: e,
    })?;
    run.write_artifacts(folder.path())?;
    let report = std::fs::read_to_string(folder.path().join("report.txt")).map_err(|e| {
        sandlot::Error::Io {
            context: "reading the report back".into(),
            source: e,
        }
    })?;
    assert_eq!(report, "mean 5\n");
    session.close();
    Ok(())
}
