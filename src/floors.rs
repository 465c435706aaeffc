//! The floors of `docs/design.md` §1, checked against the source: a
//! top-level module may name (`crate::x`) only modules on its own floor or
//! below, so the import map has no circles and nothing points back up.
//!
//! Test modules are left out: a test may build its fixture from any floor.
//!
//! Inside the plugins' floor, each plugin is a leaf: a plugin's module never
//! names another plugin's (what two plugins share lives in `k8s` or the
//! framework), and `plugins/` is at most two levels deep. Test-only code
//! (`plugins/test_support.rs`, `*tests.rs`, inline `mod tests`) is exempt:
//! the shared fixtures stay shared under `#[cfg(test)]`.

use std::collections::BTreeSet;
use std::path::Path;

/// Bottom first; keep in step with the table in `docs/design.md` §1.
const FLOORS: &[&[&str]] = &[
    &["protocol", "yaml", "objects"],
    &["cache"],
    &["k8s"],
    &["dra"],
    &["framework"],
    &["plugins"],
    &["policy"],
    &["metrics"],
    &["state"],
    &["ops", "explain"],
    &["modes", "simulate"],
    &["server"],
    &["cli"],
];

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&module))
}

/// The code of a file without its test module and line comments.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(at) if text[at..].contains("mod tests") => &text[..at],
        _ => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::` paths, including
/// those in a grouped `use crate::{a, b::c}`. Macros (`crate::plugin!`)
/// live at the root and are not modules.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.insert(std::mem::take(&mut item));
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            names.insert(item);
        } else {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if !rest[end..].starts_with('!') {
                names.insert(rest[..end].to_string());
            }
        }
    }
    names
        .into_iter()
        .map(|n| n.trim().split("::").next().unwrap_or("").trim().to_string())
        .filter(|n| !n.is_empty() && n != "self")
        .collect()
}

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            visit(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            files.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_its_floor_or_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    visit(&src, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = top.trim_end_matches(".rs");
        if matches!(top, "lib" | "main" | "floors" | "testing") {
            continue;
        }
        let Some(own) = floor_of(top) else {
            wrong.push(format!("{top}: no floor (add it to FLOORS and design §1)"));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for named in named_modules(&code) {
            match floor_of(&named) {
                Some(f) if f <= own => {}
                Some(_) => wrong.push(format!("{} names {named}, a floor above", rel.display())),
                None => wrong.push(format!(
                    "{} names {named}, which has no floor",
                    rel.display()
                )),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that break the floors:\n{}",
        wrong.join("\n")
    );
}

/// The modules of the plugins' floor `code` names through
/// `crate::plugins::` paths (items of `plugins/mod.rs`, which start with a
/// capital or are the registry's own, are not plugins).
fn named_plugins(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::plugins::") {
        rest = &rest[at + "crate::plugins::".len()..];
        let group = rest.strip_prefix('{');
        let text = group.map_or(rest, |g| &g[..g.find('}').unwrap_or(g.len())]);
        let items: Vec<&str> = if group.is_some() {
            text.split(',').collect()
        } else {
            vec![text]
        };
        for item in items {
            let item = item.trim();
            let end = item
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(item.len());
            let name = &item[..end];
            if name.starts_with(|c: char| c.is_ascii_lowercase())
                && !matches!(name, "default_queue_sort" | "test_support")
            {
                names.insert(name.to_string());
            }
        }
    }
    names
}

#[test]
fn plugins_are_leaves_at_most_two_levels_deep() {
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/plugins");
    let mut files = Vec::new();
    visit(&plugins, &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&plugins).unwrap();
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let name = parts.last().unwrap();
        let test_only = name.ends_with("tests.rs") || name == "test_support.rs";
        if parts.len() > 2 {
            wrong.push(format!(
                "{}: deeper than plugins/<plugin>/<file>.rs",
                rel.display()
            ));
        }
        if parts.len() == 1 && name == "mod.rs" || test_only {
            continue;
        }
        let own = parts[0].trim_end_matches(".rs");
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for named in named_plugins(&code) {
            if named != own {
                wrong.push(format!(
                    "{} names the plugin module {named}: move what they share into k8s or the framework",
                    rel.display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "plugins that are not leaves:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn plugin_names_are_read_from_plain_and_grouped_paths() {
    let code = "use crate::plugins::{CacheNeeds, node_affinity::X, test_support};\n\
                let a = crate::plugins::volume_zone::f();";
    let names: Vec<_> = named_plugins(code).into_iter().collect();
    assert_eq!(names, ["node_affinity", "volume_zone"]);
}

#[test]
fn grouped_and_plain_paths_are_both_read() {
    let code = "use crate::{cache::Cache, state::{AppState, LivePolicy}};\n\
                let x = crate::metrics::Metrics::new();\ncrate::plugin!(A, B, [filter]);";
    let names: Vec<_> = named_modules(code).into_iter().collect();
    assert_eq!(names, ["cache", "metrics", "state"]);
}
