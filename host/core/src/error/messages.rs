//! Pieces of the errors' messages that take more than a format string: lists and
//! the command that mends a missing image.

/// The command that builds `language`'s image for `engine`: Docker is the default
/// engine of `images build`, and a cluster's node is reached through it.
pub(super) fn image_build_command(engine: &str, language: &str) -> String {
    match engine {
        "podman" | "native" => format!("sandlot images build --engine {engine} {language}"),
        _ => format!("sandlot images build {language}"),
    }
}

/// `items` quoted and joined with commas, or `nothing`.
pub(super) fn list_or_nothing(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".to_string()
    } else {
        items
            .iter()
            .map(|i| format!("`{i}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
