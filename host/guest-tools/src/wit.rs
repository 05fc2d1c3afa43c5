//! The contract as this binary's host speaks it: `wit/job.wit` and the WASI packages it
//! depends on, compiled in, so a kind's build uses the very interfaces the host links
//! and a project written by `spindle new` carries the contract it was made against.

use std::path::Path;

use anyhow::Context;

/// The contract's version: the `spindle:job` package a kind built now targets.
pub const CONTRACT_VERSION: &str = "0.2.0";

/// The world a job kind targets.
pub const WORLD: &str = "job-kind";

/// The contract's files, relative to a WIT directory.
const FILES: &[(&str, &str)] = &[
    ("job.wit", include_str!("../../../wit/job.wit")),
    ("deps/cli.wit", include_str!("../../../wit/deps/cli.wit")),
    ("deps/clocks.wit", include_str!("../../../wit/deps/clocks.wit")),
    ("deps/filesystem.wit", include_str!("../../../wit/deps/filesystem.wit")),
    ("deps/http.wit", include_str!("../../../wit/deps/http.wit")),
    ("deps/io.wit", include_str!("../../../wit/deps/io.wit")),
    ("deps/random.wit", include_str!("../../../wit/deps/random.wit")),
    ("deps/sockets.wit", include_str!("../../../wit/deps/sockets.wit")),
];

/// Writes the contract into `dir` (`job.wit`, `deps/*.wit`), replacing what is there.
pub fn write_wit(dir: &Path) -> anyhow::Result<()> {
    for (name, text) in FILES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The contract parsed: its resolve and the `job-kind` world, from `dir` when given (a
/// project's own copy) or from the one compiled in.
pub(crate) fn resolve(dir: Option<&Path>) -> anyhow::Result<(wit_parser::Resolve, wit_parser::WorldId)> {
    let mut resolve = wit_parser::Resolve::default();
    let package = match dir {
        Some(dir) => resolve.push_dir(dir).with_context(|| format!("reading the WIT in {}", dir.display()))?.0,
        None => {
            let scratch = std::env::temp_dir().join(format!("spindle-wit-{}-{}", std::process::id(), unique()));
            write_wit(&scratch)?;
            let pushed = resolve.push_dir(&scratch).context("reading the compiled-in WIT");
            let _ = std::fs::remove_dir_all(&scratch);
            pushed?.0
        }
    };
    let world = resolve.select_world(&[package], Some(WORLD)).context("selecting the job-kind world")?;
    Ok((resolve, world))
}

/// A number no other call in this process has used, for scratch names.
fn unique() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_contract_parses_and_has_the_world() {
        let (resolve, world) = resolve(None).expect("the contract parses");
        assert_eq!(resolve.worlds[world].name, WORLD);
        let package = resolve.worlds[world].package.expect("a package");
        let name = &resolve.packages[package].name;
        assert_eq!(name.to_string(), format!("spindle:job@{CONTRACT_VERSION}"));
    }
}
