//! State-machine tables: the allowed and forbidden transitions of each machine, as data.
//!
//! The tables are the code: a machine's state changes only through [`change`], which
//! looks the pair up in the machine's table and refuses, in every build, a change that
//! is not a row. The tests walk every row; `docs/state-machines.md` is generated from
//! the same rows, and a test keeps it in sync.

use thiserror::Error;

/// One allowed transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed<S: 'static> {
    /// Source state; `None` is the initial pseudo-state (creation).
    pub from: Option<S>,
    /// Target state.
    pub to: S,
    /// What makes it happen, in a few words (the diagram's edge label).
    pub trigger: &'static str,
    /// Where the requirement comes from (seed file and section).
    pub seed: &'static str,
}

/// One transition the seeds forbid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forbidden<S: 'static> {
    /// Source state.
    pub from: S,
    /// Target state that may never follow `from`.
    pub to: S,
    /// Why, in the seed's words.
    pub why: &'static str,
    /// Where the requirement comes from.
    pub seed: &'static str,
}

/// Whether `from → to` is a row of `table`.
pub fn is_allowed<S: PartialEq + Copy>(table: &[Allowed<S>], from: S, to: S) -> bool {
    table.iter().any(|row| row.from == Some(from) && row.to == to)
}

/// A state change that is not a row of its machine's table: a defect in the code that
/// asked for it, refused before anything is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("the {machine} machine has no transition {from} → {to}")]
pub struct NotInTable {
    /// Which machine (`job`, `step`, `queue`).
    pub machine: &'static str,
    /// The state it was in.
    pub from: &'static str,
    /// The state it was asked to enter.
    pub to: &'static str,
}

/// The one way a machine's state changes: `to` when `from → to` is a row of `table` (or
/// `from == to`, no change), otherwise [`NotInTable`]. Checked in release builds too.
pub fn change<S: DiagramState>(machine: &'static str, table: &[Allowed<S>], from: S, to: S) -> Result<S, NotInTable> {
    if from == to || is_allowed(table, from, to) {
        Ok(to)
    } else {
        Err(NotInTable { machine, from: from.name(), to: to.name() })
    }
}

/// A state that can be drawn in a mermaid diagram.
pub trait DiagramState: Copy + PartialEq {
    /// The state's name in the diagram.
    fn name(self) -> &'static str;
    /// Whether the state is final (drawn with an edge to `[*]`).
    fn is_final(self) -> bool;
    /// Every state, in drawing order.
    fn all() -> &'static [Self];
}

/// Renders `table` as a mermaid `stateDiagram-v2`.
pub fn mermaid<S: DiagramState>(table: &[Allowed<S>]) -> String {
    let mut out = String::from("stateDiagram-v2\n");
    for row in table {
        let from = row.from.map_or("[*]", DiagramState::name);
        out.push_str(&format!("    {from} --> {}: {}\n", row.to.name(), row.trigger));
    }
    for state in S::all() {
        if state.is_final() {
            out.push_str(&format!("    {} --> [*]\n", state.name()));
        }
    }
    out
}
