//! `sandlot images` and `sandlot gc`: the container engines', the native backend's
//! and the cluster's side of sandlot.

use super::global::Global;
use super::output::Table;
use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub(super) enum ImagesCommand {
    /// Build images from the built-in recipes with mmdebstrap, from this machine's own
    /// Debian sources (no registry needed), and import them into the engine (for
    /// `native`: unpack them into its store). Each root filesystem is built once and
    /// shared by every engine.
    Build {
        /// Recipes or languages to build (default: all): python, node, jvm, cpp, go, r,
        /// ruby, polyglot.
        names: Vec<String>,
        /// The engine to import into.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
        /// Rebuild even images that are up to date.
        #[arg(long)]
        force: bool,
    },
    /// The sandlot images in the engine and whether each matches its recipe.
    List {
        /// The engine to ask.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Pull an image from a registry, showing progress (for `[images]` in sandlot.toml).
    Pull {
        /// Image reference, e.g. `python:3.12-slim`.
        reference: String,
        /// The engine to pull into.
        #[arg(long, value_enum, default_value = "docker")]
        engine: EngineArg,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum EngineArg {
    Docker,
    Podman,
    /// The native backend (bubblewrap): no engine, root filesystems in its store.
    Native,
}

impl EngineArg {
    fn engine(self) -> Result<sandlot::docker::Engine> {
        match self {
            EngineArg::Docker => Ok(sandlot::docker::Engine::Docker),
            EngineArg::Podman => Ok(sandlot::docker::Engine::Podman),
            EngineArg::Native => anyhow::bail!(
                "the native backend has no image registry: use `images build --engine native` \
                 and `images list --engine native`"
            ),
        }
    }
}

fn native() -> Result<sandlot::native::NativeBackend> {
    Ok(sandlot::native::NativeBackend::connect(
        &sandlot::native::default_dir(),
    )?)
}

/// `images build --engine native`: each recipe's tarball unpacked into the store.
fn build_native(names: &[String], force: bool) -> Result<ExitCode> {
    use sandlot::docker::images::{default_rootfs_cache, Recipe};
    let backend = native()?;
    for recipe in Recipe::select(names)? {
        let current = backend
            .store()
            .find(&recipe)
            .is_some_and(|r| r.recipe_hash == recipe.hash);
        if current && !force {
            note!("sandlot: {} is up to date for native", recipe.image);
            continue;
        }
        let started = std::time::Instant::now();
        backend.build_image(&recipe, &default_rootfs_cache(), &mut |line| {
            note!("  {line}")
        })?;
        note!(
            "sandlot: {} ready for native in {:.0} s",
            recipe.image,
            started.elapsed().as_secs_f64()
        );
    }
    for removed in backend.store().prune()? {
        note!("sandlot: removed the outdated tree {}", removed.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `images list --engine native`.
fn list_native(json: bool) -> Result<ExitCode> {
    use sandlot::docker::images::Recipe;
    let backend = native()?;
    let rows: Vec<(Recipe, Option<sandlot::native::Rootfs>)> = Recipe::all()
        .into_iter()
        .map(|r| {
            let found = backend.store().find(&r);
            (r, found)
        })
        .collect();
    let status = |recipe: &Recipe, found: &Option<sandlot::native::Rootfs>| match found {
        Some(r) if r.recipe_hash == recipe.hash => "current",
        Some(_) => "outdated",
        None => "missing",
    };
    if json {
        let listed: Vec<_> = rows
            .iter()
            .map(|(recipe, found)| {
                serde_json::json!({
                    "image": recipe.image, "recipe": recipe.name,
                    "tree": found.as_ref().map(|r| r.path.display().to_string()),
                    "status": status(recipe, found),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&listed)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(["IMAGE", "RECIPE", "TREE", "STATUS"]);
    for (recipe, found) in &rows {
        table.row([
            recipe.image.clone(),
            recipe.name.clone(),
            found
                .as_ref()
                .map(|r| r.path.display().to_string())
                .unwrap_or_else(|| "-".into()),
            match status(recipe, found) {
                "current" => "up to date".to_string(),
                other => format!(
                    "{other}: `sandlot images build --engine native {}`",
                    recipe.name
                ),
            },
        ]);
    }
    print!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn containers(global: &Global, engine: EngineArg) -> Result<sandlot::docker::ContainerBackend> {
    let config = global.config()?;
    let endpoint = match engine {
        EngineArg::Podman => config.podman_host.as_deref(),
        _ => config.docker_host.as_deref(),
    };
    Ok(sandlot::docker::ContainerBackend::connect(
        engine.engine()?,
        endpoint,
    )?)
}

pub(super) fn command(global: &Global, command: ImagesCommand) -> Result<ExitCode> {
    use sandlot::docker::images::{default_rootfs_cache, Recipe};
    match command {
        ImagesCommand::Build {
            names,
            engine,
            force,
        } => {
            if let EngineArg::Native = engine {
                return build_native(&names, force);
            }
            let backend = containers(global, engine)?;
            // What a Kubernetes node on this engine starts its pods' agents from.
            let (agent, loaded) = backend.load_agent_image()?;
            if loaded {
                note!("sandlot: loaded {agent}");
            }
            let present = backend.images()?;
            for recipe in Recipe::select(&names)? {
                let current = present
                    .iter()
                    .any(|i| i.reference == recipe.image && i.current);
                if current && !force {
                    note!("sandlot: {} is up to date", recipe.image);
                } else {
                    note!(
                        "sandlot: building {} ({})",
                        recipe.image,
                        recipe.description
                    );
                    let started = std::time::Instant::now();
                    backend.build_image(&recipe, &default_rootfs_cache(), &mut |line| {
                        note!("  {line}")
                    })?;
                    note!(
                        "sandlot: {} ready in {:.0} s",
                        recipe.image,
                        started.elapsed().as_secs_f64()
                    );
                }
                // What a Kubernetes node on this engine starts pods of this image from.
                let (variant, made) = backend.load_agent_variant(&recipe.image)?;
                if made {
                    note!("sandlot: made {variant}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ImagesCommand::List { engine, json } => {
            if let EngineArg::Native = engine {
                return list_native(json);
            }
            let backend = containers(global, engine)?;
            let images = backend.images()?;
            if json {
                let mut listed: Vec<_> = images
                    .iter()
                    .map(|i| {
                        serde_json::json!({
                            "image": i.reference, "size": i.size, "recipe": i.recipe,
                            "status": if i.current { "current" }
                                      else if i.recipe.is_some() { "outdated" }
                                      else { "foreign" },
                        })
                    })
                    .collect();
                for recipe in Recipe::all() {
                    if !images.iter().any(|i| i.reference == recipe.image) {
                        listed.push(serde_json::json!({
                            "image": recipe.image, "size": null, "recipe": recipe.name,
                            "status": "missing",
                        }));
                    }
                }
                println!("{}", serde_json::to_string_pretty(&listed)?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut table = Table::new(["IMAGE", "SIZE", "RECIPE", "STATUS"]);
            for image in &images {
                table.row([
                    image.reference.clone(),
                    format!("{} MB", image.size / 1_000_000),
                    image.recipe.clone().unwrap_or_else(|| "-".into()),
                    if image.current {
                        "up to date".into()
                    } else if image.recipe.is_some() {
                        "outdated: run `sandlot images build`".into()
                    } else {
                        "not from a recipe".to_string()
                    },
                ]);
            }
            for recipe in Recipe::all() {
                if !images.iter().any(|i| i.reference == recipe.image) {
                    table.row([
                        recipe.image.clone(),
                        "-".into(),
                        recipe.name.clone(),
                        format!("missing: `sandlot images build {}`", recipe.name),
                    ]);
                }
            }
            print!("{table}");
            Ok(ExitCode::SUCCESS)
        }
        ImagesCommand::Pull { reference, engine } => {
            let backend = containers(global, engine)?;
            backend.pull_image(&reference, &mut |line| note!("  {line}"))?;
            note!("sandlot: pulled {reference}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Where `sandlot gc` cleans.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum GcTarget {
    Docker,
    Podman,
    Kubernetes,
    Native,
}

/// Removes what killed sandlot processes left on `target`; with `json`, says what
/// as one JSON document.
pub(super) fn gc(global: &Global, target: GcTarget, all: bool, json: bool) -> Result<ExitCode> {
    // The wasm backend's workspaces of killed processes, whichever engine is named.
    let workspaces = sandlot::wasm::WasmBackend::gc();
    if !json {
        for path in &workspaces {
            println!("{}", path.display());
        }
    }
    if !workspaces.is_empty() {
        note!("sandlot: removed {} wasm workspace(s)", workspaces.len());
    }
    let (removed, what) = match target {
        GcTarget::Docker => (containers(global, EngineArg::Docker)?.gc(all)?, "container"),
        GcTarget::Podman => (containers(global, EngineArg::Podman)?.gc(all)?, "container"),
        GcTarget::Native => (native()?.gc(), "sandbox"),
        GcTarget::Kubernetes => {
            let settings = global.config()?.kubernetes;
            let cluster =
                sandlot::kubernetes::KubernetesBackend::configured(&settings)?.connect()?;
            (cluster.gc(all)?, "pod")
        }
    };
    if json {
        let document = serde_json::json!({
            "wasm_workspaces": workspaces,
            format!("{what}s"): removed,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(ExitCode::SUCCESS);
    }
    for name in &removed {
        println!("{name}");
    }
    note!("sandlot: removed {} {what}(s)", removed.len());
    Ok(ExitCode::SUCCESS)
}
