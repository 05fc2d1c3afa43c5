//! Named points where a test stops this process so that it can kill it there
//! (SIGKILL) and check that nothing was lost or doubled, instead of hoping a kill at a
//! random moment lands in the window that matters.
//!
//! Off unless `SPINDLE_FAILPOINTS` names points (comma-separated). A named point, when
//! reached, prints `spindle failpoint reached: NAME` on standard output and never
//! returns: the task that reached it waits there until the process is killed, while the
//! rest of the host runs on. Reading the variable once costs nothing afterwards.

use std::sync::OnceLock;

/// The environment variable that arms points.
pub const ENV: &str = "SPINDLE_FAILPOINTS";

/// The line a point prints when reached (followed by its name).
pub const REACHED: &str = "spindle failpoint reached: ";

fn armed() -> &'static [String] {
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    ARMED.get_or_init(|| {
        std::env::var(ENV)
            .map(|names| names.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    })
}

/// Stops the calling task for good when `name` is armed; returns at once otherwise.
pub async fn reach(name: &'static str) {
    if armed().iter().any(|armed| armed == name) {
        println!("{REACHED}{name}");
        std::future::pending::<()>().await;
    }
}
