//! Lines for the host's structured log, tagged by the host with the job and step.
//!
//! The host caps line length and lines per call, so log what an operator needs to
//! explain an outcome, not a trace of every iteration. Unlike a failure's code and
//! message, log lines may carry detail (upstream errors, ids).
//!
//! ```
//! use spindle_guest::log;
//!
//! log::info("capturing");
//! log::warn(format!("processor said {}", 503));
//! ```

pub use crate::bindings::spindle::job::types::LogLevel as Level;

/// Writes one line at `level`.
pub fn log(level: Level, message: impl AsRef<str>) {
    write(level, message.as_ref());
}

/// Writes one line at trace level.
pub fn trace(message: impl AsRef<str>) {
    write(Level::Trace, message.as_ref());
}

/// Writes one line at debug level.
pub fn debug(message: impl AsRef<str>) {
    write(Level::Debug, message.as_ref());
}

/// Writes one line at info level.
pub fn info(message: impl AsRef<str>) {
    write(Level::Info, message.as_ref());
}

/// Writes one line at warn level.
pub fn warn(message: impl AsRef<str>) {
    write(Level::Warn, message.as_ref());
}

/// Writes one line at error level.
pub fn error(message: impl AsRef<str>) {
    write(Level::Error, message.as_ref());
}

#[cfg(target_arch = "wasm32")]
fn write(level: Level, message: &str) {
    crate::bindings::spindle::job::host::log(level, message);
}

/// Off wasm (a kind's unit tests on the build machine) the bindings' import stubs
/// panic, so lines go to stderr instead.
#[cfg(not(target_arch = "wasm32"))]
fn write(level: Level, message: &str) {
    let level = match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    eprintln!("[{level}] {message}");
}
