//! `docs/state-machines.md` draws each machine from its table; this keeps them in sync.
//! Run with `SPINDLE_BLESS=1` to rewrite the diagrams after changing a table.

use spindle_core::breaker::BREAKER_TRANSITIONS;
use spindle_core::job::JOB_TRANSITIONS;
use spindle_core::queue::QUEUE_TRANSITIONS;
use spindle_core::schedule::SCHEDULE_TRANSITIONS;
use spindle_core::step::STEP_TRANSITIONS;
use spindle_core::table::mermaid;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/state-machines.md");

fn block(name: &str, body: &str) -> (String, String, String) {
    let begin = format!("<!-- {name}:begin (generated from the table; SPINDLE_BLESS=1 rewrites) -->\n");
    let end = format!("<!-- {name}:end -->");
    (begin, format!("```mermaid\n{body}```\n"), end)
}

#[test]
fn diagrams_match_the_tables() {
    let mut doc = std::fs::read_to_string(DOC).expect("docs/state-machines.md exists");
    let bless = std::env::var_os("SPINDLE_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, body) in [
        ("job-machine", mermaid(JOB_TRANSITIONS)),
        ("step-machine", mermaid(STEP_TRANSITIONS)),
        ("queue-machine", mermaid(QUEUE_TRANSITIONS)),
        ("breaker-machine", mermaid(BREAKER_TRANSITIONS)),
        ("schedule-machine", mermaid(SCHEDULE_TRANSITIONS)),
    ] {
        let (begin, want, end) = block(name, &body);
        let start = doc.find(&begin).unwrap_or_else(|| panic!("{name}: missing marker {begin:?}")) + begin.len();
        let stop = start + doc[start..].find(&end).unwrap_or_else(|| panic!("{name}: missing end marker"));
        if doc[start..stop] != want {
            stale.push(name);
            doc.replace_range(start..stop, &want);
        }
    }
    if bless {
        std::fs::write(DOC, doc).expect("rewrite docs/state-machines.md");
    } else {
        assert!(stale.is_empty(), "diagrams out of date: {stale:?}; run with SPINDLE_BLESS=1");
    }
}
