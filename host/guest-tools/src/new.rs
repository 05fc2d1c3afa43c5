//! `spindle new KIND --lang L`: a ready project for a job kind — the kind, its build
//! script, a README, a local test, the language's SDK and the contract's WIT — that
//! builds and deploys as it is.
//!
//! The kind a project starts from is the language's `greet` example (`examples/greet-*`),
//! renamed: the very code the test suite builds and runs on a host in every language.
//! The SDK and the WIT are copied in, so the project carries the contract it was made
//! against and needs no package registry of Spindle's.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};

include!(concat!(env!("OUT_DIR"), "/scaffolding.rs"));

/// A language `spindle new` writes projects in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectLanguage {
    /// Rust, with the Rust SDK (`cargo`, `wasm32-wasip2`).
    Rust,
    /// Python, with componentize-py.
    Python,
    /// JavaScript, with componentize-js.
    Js,
    /// TypeScript, checked and compiled by `tsc` (strict), then built as JavaScript.
    Ts,
    /// C, with clang-19, wasi-libc and cJSON.
    C,
    /// Go, with Go's wasip1 target.
    Go,
}

impl ProjectLanguage {
    /// Its name in the scaffolding's sets and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Js => "js",
            Self::Ts => "ts",
            Self::C => "c",
            Self::Go => "go",
        }
    }

    /// Its SDK's set: TypeScript is written against the JavaScript SDK.
    fn sdk_set(self) -> &'static str {
        match self {
            Self::Ts => "js",
            other => other.name(),
        }
    }

    /// Where the SDK goes in a project.
    fn sdk_dir(self) -> &'static str {
        match self {
            Self::Python => "spindle_guest",
            Self::C => "spindle",
            Self::Rust | Self::Js | Self::Ts | Self::Go => "spindle-guest",
        }
    }
}

/// Whether `kind` may name a new project: a kind name that is also an identifier in every
/// language once `-` is `_` (a lowercase letter first; letters, digits, `-`, `_`).
pub fn is_project_name(kind: &str) -> bool {
    let mut chars = kind.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && kind.len() <= 64
}

/// Writes the project of kind `kind` in `language` into `dir` (which must not exist or
/// be empty); answers the files written, relative to `dir`.
pub fn write_project(kind: &str, language: ProjectLanguage, dir: &Path) -> anyhow::Result<Vec<String>> {
    ensure!(
        is_project_name(kind),
        "{kind:?} cannot name a project: a lowercase letter first, then lowercase letters, digits, '-' or '_'"
    );
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        ensure!(entries.next().is_none(), "{} exists and is not empty", dir.display());
    }
    let module = kind.replace('-', "_");
    let lang = language.name();
    let fill = |text: &str| {
        text.replace("{{kind}}", kind).replace("{{module}}", &module).replace("{{contract}}", crate::CONTRACT_VERSION)
    };
    let mut written = Vec::new();
    let mut write = |relative: String, bytes: &[u8], executable: bool| -> anyhow::Result<()> {
        let path = dir.join(&relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        if executable {
            set_executable(&path)?;
        }
        written.push(relative);
        Ok(())
    };
    // The project's own files.
    for (path, bytes) in set(&format!("template/{lang}")) {
        let relative = match path {
            "gitignore" => ".gitignore".to_owned(),
            "sdk-Cargo.toml" => format!("{}/Cargo.toml", language.sdk_dir()),
            other => other.to_owned(),
        };
        write(relative, fill(&text(path, bytes)?).as_bytes(), path.ends_with(".sh"))?;
    }
    // The kind and its local test: the greet example, renamed.
    let example_name = format!("greet-{lang}");
    for (path, bytes) in set(&format!("example/{lang}")) {
        let Some(relative) = example_file(language, path, &module) else { continue };
        let renamed = rename(language, &text(path, bytes)?, &example_name, kind, &module);
        write(relative, renamed.as_bytes(), false)?;
    }
    // The SDK, as this binary's host speaks it.
    for (path, bytes) in set(&format!("sdk/{}", language.sdk_set())) {
        let relative = match language {
            ProjectLanguage::Rust => format!("{}/src/{path}", language.sdk_dir()),
            _ => format!("{}/{path}", language.sdk_dir()),
        };
        write(relative, bytes, path.ends_with(".sh"))?;
    }
    crate::write_wit(&dir.join("wit"))?;
    written.push("wit/".to_owned());
    written.sort();
    Ok(written)
}

/// Where an example's file goes in a project, if it goes at all: the kind and its test
/// do; the example's own build and test scripts (which find the SDK in the repository)
/// give way to the project's.
fn example_file(language: ProjectLanguage, path: &str, module: &str) -> Option<String> {
    if path.ends_with(".sh") || matches!(path, ".gitignore" | "package.json" | "go.mod" | "tsconfig.json") {
        return None;
    }
    Some(match (language, path) {
        (ProjectLanguage::Rust, path) => format!("src/{path}"),
        (ProjectLanguage::Python, "greet.py") => format!("{module}.py"),
        (ProjectLanguage::Python, "test_greet.py") => format!("test_{module}.py"),
        (ProjectLanguage::Js, "greet.js") => format!("{module}.js"),
        (ProjectLanguage::Js, "test/greet.test.js") => format!("test/{module}.test.js"),
        (ProjectLanguage::Ts, "greet.ts") => format!("{module}.ts"),
        (ProjectLanguage::Ts, "test/greet.test.ts") => format!("test/{module}.test.ts"),
        (ProjectLanguage::C, "greet.c") => format!("{module}.c"),
        (ProjectLanguage::C, "test_greet.c") => format!("test_{module}.c"),
        (ProjectLanguage::Go, path) => path.replace("greet", module),
        (_, path) => path.to_owned(),
    })
}

/// An example's source renamed for a project of `kind`: its kind name, and what the
/// language names after the example's file (a Python module, a JavaScript import, a Go
/// package).
fn rename(language: ProjectLanguage, source: &str, example_name: &str, kind: &str, module: &str) -> String {
    let named = source.replace(example_name, kind);
    match language {
        ProjectLanguage::Python => named.replace("from greet import", &format!("from {module} import")),
        ProjectLanguage::Js | ProjectLanguage::Ts => named.replace("'../greet.js'", &format!("'../{module}.js'")),
        // The package is named after the example (`package greet`, `greet.Input`, a
        // stack's `greet.compose(`); prose that says "greet" stays as it is.
        ProjectLanguage::Go => go_package(&named, module),
        ProjectLanguage::Rust | ProjectLanguage::C => named,
    }
}

/// Go source with the example's package name made `module`: its clause and doc
/// comment, and every name it qualifies (`greet.Input`), never the word in prose.
fn go_package(text: &str, module: &str) -> String {
    let clause = text
        .replace("package greet\n", &format!("package {module}\n"))
        .replace("// Package greet ", &format!("// Package {module} "));
    replace_word_if(&clause, "greet", module, |after| {
        let mut chars = after.chars();
        chars.next() == Some('.') && chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
    })
}

/// `text` with every whole-word `word` (not a part of `greeting`) made `with` where
/// `followed` accepts what comes after it.
fn replace_word_if(text: &str, word: &str, with: &str, followed: impl Fn(&str) -> bool) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) || !followed(&rest[at + word.len()..]) {
            out.push_str(word);
        } else {
            out.push_str(with);
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// The files of one scaffolding set.
fn set(name: &str) -> impl Iterator<Item = (&'static str, &'static [u8])> + '_ {
    SCAFFOLDING.iter().filter(move |(set, _, _)| *set == name).map(|(_, path, bytes)| (*path, *bytes))
}

fn text(path: &str, bytes: &[u8]) -> anyhow::Result<String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) => bail!("the scaffolding file {path} is not text"),
    }
}

#[cfg(unix)]
fn set_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut permissions = std::fs::metadata(path)?.permissions();
    permissions.set_mode(permissions.mode() | 0o111);
    std::fs::set_permissions(path, permissions).with_context(|| format!("making {} executable", path.display()))
}

#[cfg(not(unix))]
fn set_executable(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// The directory a project of `kind` goes to by default: `./KIND`.
pub fn default_dir(kind: &str) -> PathBuf {
    PathBuf::from(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names_are_identifiers_in_every_language() {
        for good in ["greet", "payment-saga", "a1_b"] {
            assert!(is_project_name(good), "{good}");
        }
        for bad in ["", "1st", "Upper", "dot.ted", "sp ace"] {
            assert!(!is_project_name(bad), "{bad}");
        }
    }

    #[test]
    fn every_language_has_its_sdk_example_and_template() {
        for language in [
            ProjectLanguage::Rust,
            ProjectLanguage::Python,
            ProjectLanguage::Js,
            ProjectLanguage::Ts,
            ProjectLanguage::C,
            ProjectLanguage::Go,
        ] {
            let lang = language.name();
            for kind in ["example", "template"] {
                assert!(set(&format!("{kind}/{lang}")).next().is_some(), "{kind}/{lang} is empty");
            }
            assert!(set(&format!("sdk/{}", language.sdk_set())).next().is_some(), "the SDK of {lang} is empty");
        }
    }

    #[test]
    fn whole_words_are_renamed_and_parts_are_not() {
        assert_eq!(
            replace_word_if("package greet // the greeting: greet.Input", "greet", "hello", |_| true),
            "package hello // the greeting: hello.Input"
        );
    }

    #[test]
    fn a_go_project_renames_its_package_and_qualified_names_but_not_prose() {
        let source = "// Package greet is the greet kind.\npackage greet\n\n\"description\": \"Who to greet, and more.\",\n\
                      want := \"does not fit greet.Input\" // greet.compose(\n";
        assert_eq!(
            go_package(source, "hello_go"),
            "// Package hello_go is the greet kind.\npackage hello_go\n\n\"description\": \"Who to greet, and more.\",\n\
             want := \"does not fit hello_go.Input\" // hello_go.compose(\n"
        );
    }

    #[test]
    fn a_python_project_renames_the_example() {
        let dir = std::env::temp_dir().join(format!("spindle-new-{}", std::process::id()));
        let files = write_project("hello-world", ProjectLanguage::Python, &dir).expect("written");
        for expected in ["hello_world.py", "test_hello_world.py", "build.sh", "README.md", "spindle_guest/kind.py"] {
            assert!(files.contains(&expected.to_owned()), "{expected} in {files:?}");
        }
        let kind = std::fs::read_to_string(dir.join("hello_world.py")).expect("the kind");
        assert!(kind.contains("Kind(\"hello-world\"") && !kind.contains("greet-python"), "{kind}");
        let test = std::fs::read_to_string(dir.join("test_hello_world.py")).expect("the test");
        assert!(test.contains("from hello_world import"), "{test}");
        assert!(dir.join("wit/job.wit").is_file() && dir.join("wit/deps/http.wit").is_file());
        let refused = write_project("hello-world", ProjectLanguage::Python, &dir).expect_err("not empty");
        assert!(refused.to_string().contains("not empty"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
