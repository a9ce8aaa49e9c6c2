//! Lists written once: every sentence of the docs, the doc comments and the WIT that
//! lists the built-in backends or the plugin contract's versions names all of them,
//! as `sandlot::providers()` and `SUPPORTED_API_VERSIONS` have them. A backend or a
//! contract version added later fails here until every such list says so.
//!
//! A sentence lists the backends when it names `wasm` and two more of them in code
//! style (`` `docker` ``, ``` ``docker`` ```, `` `"docker"` ``); one that gives
//! examples (it ends its list with `...`) is not a list of all. A sentence lists the
//! contract versions when it names 0.1 and two more.

use sandlot::plugin::PluginKind;
use std::path::{Path, PathBuf};

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The built-in backends, in `auto`'s order.
fn backends() -> Vec<String> {
    sandlot::providers()
        .iter()
        .map(|provider| provider.name().to_string())
        .collect()
}

/// The contract versions as sentences write them: `0.1`, `0.2`, ...
fn versions() -> Vec<String> {
    as_written(sandlot::plugin::SUPPORTED_API_VERSIONS)
}

/// Versions as prose writes them: `0.4`, not `0.4.0`.
fn as_written(versions: &[&str]) -> Vec<String> {
    versions
        .iter()
        .map(|v| v.trim_end_matches(".0").to_string())
        .collect()
}

/// Every file whose prose lists things: Markdown, Rust (its doc comments), WIT (its
/// doc comments) and Python (its docstrings), outside build output, vendored
/// packages, generated components and test fixtures.
fn files() -> Vec<PathBuf> {
    let root = repository();
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                let skipped = name.starts_with('.')
                    || matches!(
                        name.as_str(),
                        "target" | "node_modules" | "dist" | "builtin" | "hostile" | "fixtures"
                    );
                if !skipped {
                    dirs.push(path);
                }
            } else if ["md", "rs", "wit", "py"]
                .iter()
                .any(|ext| path.extension().is_some_and(|e| e == *ext))
                && path != root.join("tests/lists.rs")
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The prose of `text` as paragraphs, each with the line it starts on: Markdown's
/// blocks and the runs of doc comments of Rust and WIT (in both, a list item or a
/// table row is a paragraph of its own), and for Python every run of lines
/// (docstrings and comments: code lists names in plain quotes, which do not count).
fn paragraphs(path: &Path, text: &str) -> Vec<(usize, String)> {
    let extension = path.extension().unwrap_or_default().to_string_lossy();
    let mut paragraphs = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let prose = match extension.as_ref() {
            "rs" | "wit" => {
                let trimmed = line.trim_start();
                ["//!", "///"]
                    .iter()
                    .find_map(|prefix| trimmed.strip_prefix(prefix))
                    .map(str::trim)
            }
            _ => Some(line.trim()),
        };
        let starts_item = prose.is_some_and(|p| {
            extension != "py" && (p.starts_with("- ") || p.starts_with("* ") || p.starts_with('|'))
        });
        match prose {
            Some(p) if !p.is_empty() && !starts_item => match &mut current {
                Some((_, paragraph)) => {
                    paragraph.push(' ');
                    paragraph.push_str(p);
                }
                None => current = Some((index + 1, p.to_string())),
            },
            Some(p) if starts_item => {
                paragraphs.extend(current.take());
                current = Some((index + 1, p.to_string()));
            }
            _ => paragraphs.extend(current.take()),
        }
    }
    paragraphs.extend(current);
    paragraphs
}

/// `paragraph`'s sentences: split after a full stop that ends a word.
fn sentences(paragraph: &str) -> Vec<&str> {
    let mut sentences = Vec::new();
    let mut start = 0;
    let bytes = paragraph.as_bytes();
    for (i, _) in paragraph.match_indices(". ") {
        let word_before =
            i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || b"`)\"".contains(&bytes[i - 1]));
        let next_starts = bytes
            .get(i + 2)
            .is_some_and(|b| b.is_ascii_uppercase() || b"`[".contains(b));
        if word_before && next_starts {
            sentences.push(&paragraph[start..=i]);
            start = i + 2;
        }
    }
    sentences.push(&paragraph[start..]);
    sentences
}

/// Whether `sentence` names backend `name` in code style.
fn names_backend(sentence: &str, name: &str) -> bool {
    [
        format!("`{name}`"),
        format!("``{name}``"),
        format!("`\"{name}\"`"),
    ]
    .iter()
    .any(|form| sentence.contains(form.as_str()))
}

/// Whether `sentence` names contract version `version` (`0.4`): as `0.4`, `0.4.0`
/// or `v0.4.0`, not as part of a longer number.
fn names_version(sentence: &str, version: &str) -> bool {
    sentence.match_indices(version).any(|(i, _)| {
        let before = sentence[..i].chars().next_back();
        let after = &sentence[i + version.len()..];
        let after_ok = match after.strip_prefix(".0") {
            Some(rest) => !rest.starts_with(|c: char| c.is_ascii_digit()),
            None => {
                !after.starts_with(|c: char| c.is_ascii_digit() || c == '.')
                    || after.starts_with(". ")
                    || after == "."
            }
        };
        before.is_none_or(|c| !(c.is_ascii_digit() || c == '.')) && after_ok
    })
}

/// Where a list in `files` misses some of what `expected` says it must name:
/// `file:line: misses ...: the sentence`.
fn incomplete_lists(
    expected: impl Fn(&str) -> Vec<String>,
    lists: impl Fn(&str) -> bool,
    names: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let root = repository();
    let mut found = Vec::new();
    for path in files() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (line, paragraph) in paragraphs(&path, &text) {
            for sentence in sentences(&paragraph) {
                if !lists(sentence) {
                    continue;
                }
                let missing: Vec<String> = expected(sentence)
                    .into_iter()
                    .filter(|name| !names(sentence, name))
                    .collect();
                if !missing.is_empty() {
                    let file = path.strip_prefix(&root).unwrap_or(&path);
                    found.push(format!(
                        "{}:{line}: misses {}: {sentence}",
                        file.display(),
                        missing.join(", ")
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn every_list_of_the_backends_names_them_all() {
    let all = backends();
    assert!(all.iter().any(|name| name == "wasm"), "{all:?}");
    assert!(all.len() >= 5, "the built-in backends: {all:?}");
    let lists = |sentence: &str| {
        let named = all.iter().filter(|n| names_backend(sentence, n)).count();
        names_backend(sentence, "wasm")
            && named >= 3
            && !sentence.contains("...")
            && !sentence.contains('…')
    };
    let found = incomplete_lists(|_| all.clone(), lists, names_backend);
    assert!(
        found.is_empty(),
        "lists of the backends that miss some of {all:?}:\n{}",
        found.join("\n")
    );
}

/// The versions a sentence about `kind`'s plugins lists, as it writes them.
fn versions_of(kind: PluginKind) -> Vec<String> {
    as_written(kind.api_versions())
}

#[test]
fn every_list_of_the_contract_versions_names_them_all() {
    let all = versions();
    let lists = |sentence: &str| {
        let named = all.iter().filter(|v| names_version(sentence, v)).count();
        names_version(sentence, &all[0]) && named >= 3
    };
    // A sentence about one kind of plugin lists the versions with its world: 0.3
    // changed only handlers, 0.4 only runtimes.
    let (handlers, runtimes) = (
        versions_of(PluginKind::LanguageHandler),
        versions_of(PluginKind::Runtime),
    );
    let expected = |sentence: &str| {
        let sentence = sentence.to_lowercase();
        match (sentence.contains("handler"), sentence.contains("runtime")) {
            (true, false) => handlers.clone(),
            (false, true) => runtimes.clone(),
            _ => all.clone(),
        }
    };
    let found = incomplete_lists(expected, lists, names_version);
    assert!(
        found.is_empty(),
        "lists of the contract versions that miss some of {all:?}:\n{}",
        found.join("\n")
    );
}

/// The versions the host loads are the versions `wit/` holds, one folder each.
#[test]
fn the_supported_versions_are_the_contracts_in_wit() {
    let mut folders: Vec<String> = std::fs::read_dir(repository().join("wit"))
        .unwrap()
        .flatten()
        .filter(|entry| entry.path().join("plugin.wit").is_file())
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.trim_start_matches('v').to_string()
        })
        .collect();
    folders.sort();
    assert_eq!(folders, sandlot::plugin::SUPPORTED_API_VERSIONS);
}

#[test]
fn sentences_and_names_are_read_as_meant() {
    assert!(names_version("contract 0.4.0 and v0.1.0/", "0.4"));
    assert!(names_version("(0.1, 0.2 and 0.4; 0.3 changed", "0.1"));
    assert!(!names_version("version 0.41 or 10.4", "0.4"));
    assert!(names_backend(
        "`wasm`, ``docker`` or `\"podman\"`",
        "podman"
    ));
    assert!(!names_backend("the docker engine", "docker"));
    assert_eq!(
        sentences("One `wasm`. Two e.g. this. `Three`"),
        ["One `wasm`.", "Two e.g. this.", "`Three`"]
    );
}
