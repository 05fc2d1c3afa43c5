//! Kind `workflow`: one cancellable step, `run`, that fans out child jobs or waits for
//! signals as its input says, for the host's workflow tests (fan-out and fan-in, joins,
//! leftovers, idempotent children, signals and their timeouts).
//!
//! Fan-out input (`join`, `leftover` and `batches` may be left out: `"all"`, `"cancel"`,
//! 1; a child's `input` defaults to `{}`, `key` and `lease_keys` to none):
//!
//! ```json
//! {
//!   "children": [{"kind": "noop", "input": {}, "key": "idempotency key", "lease_keys": ["k"]}],
//!   "join": "all" | "any" | {"count": 2},
//!   "leftover": "cancel" | "keep",
//!   "batches": 1
//! }
//! ```
//!
//! or the shorthand `{"fan_out": 3, "child_kind": "noop", "child_input": {}}` for that
//! many children of one kind (`child_kind` defaults to `noop`, `child_input` to `{}`),
//! with `join`, `leftover` and `batches` as above. The first call reports
//! `await-children` with cursor `"1"`; each call back with children fans the same
//! children out again (cursor `"2"`, `"3"`, …) until `batches` fan-outs were made, then
//! completes with the last batch's children, in order:
//!
//! ```json
//! {"batches": 1,
//!  "children": [{"id": "…", "kind": "noop", "state": "succeeded" | "failed" | "cancelled" | null,
//!                "output": <the child's output as JSON, or null>, "failure": "code" | null}],
//!  "succeeded": 1, "final": 1}
//! ```
//!
//! Signal input: `{"signal": "name", "timeout_secs": 60, "waits": 1}` (`waits` may be
//! left out: 1). The step reports `await-signal` for `name` `waits` times in a row, its
//! cursor a JSON object counting the waits and carrying the bodies so far, then completes
//! with `{"signals": [<body as JSON, or null>, …], "timed_out": <whether any wait timed
//! out>}`, plus `"signal": <the one body>` when `waits` is 1.
//!
//! Input of any other shape, with fields of both forms or unknown fields, `batches` or
//! `waits` of 0, or more than 100,000 children is refused `invalid-input`. A call back
//! with what the step did not wait for is refused `unexpected-awaited`, and one without
//! the cursor the step left is refused `invalid-cursor`. Every call logs `call cursor=…
//! awaited=…` at debug.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use spindle_guest::prelude::*;

struct Workflow;

/// Children one input may ask for: enough for any limit test the host runs, few enough
/// that a typo cannot make the guest build a fan-out that exhausts its memory.
const MAX_CHILDREN: u32 = 100_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    children: Option<Vec<ChildInput>>,
    fan_out: Option<u32>,
    child_kind: Option<String>,
    child_input: Option<Value>,
    join: Option<JoinInput>,
    leftover: Option<LeftoverInput>,
    batches: Option<u32>,
    signal: Option<String>,
    timeout_secs: Option<u32>,
    waits: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChildInput {
    kind: String,
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    lease_keys: Vec<String>,
}

fn empty_object() -> Value {
    json!({})
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum JoinInput {
    #[default]
    All,
    Any,
    Count(u32),
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum LeftoverInput {
    #[default]
    Cancel,
    Keep,
}

/// What the input asks the step to do.
#[derive(Debug)]
enum Plan {
    FanOut { children: Vec<ChildInput>, join: JoinInput, leftover: LeftoverInput, batches: u32 },
    Signal { name: String, timeout_secs: u32, waits: u32 },
}

impl Plan {
    fn from_input(input: Input) -> Result<Self, StepError> {
        let invalid = |message: &str| Err(StepError::refused("invalid-input", message));
        let fan_out_fields = input.join.is_some() || input.leftover.is_some() || input.batches.is_some();
        let shorthand_fields = input.child_kind.is_some() || input.child_input.is_some();
        let signal_fields = input.timeout_secs.is_some() || input.waits.is_some();
        match (input.children, input.fan_out, input.signal) {
            (Some(children), None, None) if !shorthand_fields && !signal_fields => {
                Self::fan_out(children, input.join, input.leftover, input.batches)
            }
            (None, Some(count), None) if !signal_fields => {
                if count > MAX_CHILDREN {
                    return invalid("`fan_out` asks for more than 100000 children");
                }
                let child = ChildInput {
                    kind: input.child_kind.unwrap_or_else(|| "noop".into()),
                    input: input.child_input.unwrap_or_else(empty_object),
                    key: None,
                    lease_keys: Vec::new(),
                };
                let children = (0..count).map(|_| child.clone()).collect();
                Self::fan_out(children, input.join, input.leftover, input.batches)
            }
            (None, None, Some(name)) if !fan_out_fields && !shorthand_fields => {
                let Some(timeout_secs) = input.timeout_secs else {
                    return invalid("a signal wait needs `timeout_secs`");
                };
                let waits = input.waits.unwrap_or(1);
                if waits == 0 {
                    return invalid("`waits` must be at least 1");
                }
                Ok(Self::Signal { name, timeout_secs, waits })
            }
            _ => invalid("give exactly one of `children`, `fan_out` or `signal`, with only its own fields"),
        }
    }

    fn fan_out(
        children: Vec<ChildInput>,
        join: Option<JoinInput>,
        leftover: Option<LeftoverInput>,
        batches: Option<u32>,
    ) -> Result<Self, StepError> {
        if children.len() > MAX_CHILDREN as usize {
            return Err(StepError::refused("invalid-input", "`children` lists more than 100000 children"));
        }
        let batches = batches.unwrap_or(1);
        if batches == 0 {
            return Err(StepError::refused("invalid-input", "`batches` must be at least 1"));
        }
        Ok(Self::FanOut { children, join: join.unwrap_or_default(), leftover: leftover.unwrap_or_default(), batches })
    }
}

/// One child as the output reports it.
#[derive(Debug, Serialize)]
struct ChildReport {
    id: String,
    kind: String,
    state: Option<&'static str>,
    output: Value,
    failure: Option<String>,
}

/// The cursor of a signal wait: which wait this is and what the earlier ones got.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SignalCursor {
    wait: u32,
    signals: Vec<Value>,
    timed_out: bool,
}

impl Kind for Workflow {
    fn describe() -> KindSpec {
        KindSpec::new("workflow").step("run", 1).cancellable().retry(3, 10, 50)
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        if step.key() != "run" {
            return Err(StepError::unknown_step(step.key()));
        }
        let awaited = match step.awaited() {
            None => "none".to_owned(),
            Some(Awaited::Children(children)) => format!("children({})", children.len()),
            Some(Awaited::Signal(_)) => "signal".to_owned(),
            Some(Awaited::SignalTimeout) => "signal-timeout".to_owned(),
        };
        log::debug(format!("call cursor={} awaited={awaited}", step.cursor().unwrap_or("none")));
        match Plan::from_input(step.input()?)? {
            Plan::FanOut { children, join, leftover, batches } => fan_out(step, &children, join, leftover, batches),
            Plan::Signal { name, timeout_secs, waits } => wait_for_signals(step, name, timeout_secs, waits),
        }
    }
}

fn fan_out(
    step: &Step,
    children: &[ChildInput],
    join: JoinInput,
    leftover: LeftoverInput,
    batches: u32,
) -> Result<Outcome, StepError> {
    let batch = match step.awaited() {
        None => 0,
        Some(Awaited::Children(_)) => step
            .cursor()
            .and_then(|cursor| cursor.parse::<u32>().ok())
            .ok_or_else(|| StepError::refused("invalid-cursor", "called back without the batch number it left"))?,
        Some(Awaited::Signal(_) | Awaited::SignalTimeout) => {
            return Err(StepError::refused("unexpected-awaited", "called back with a signal after a fan-out"));
        }
    };
    if let Some(results) = step.children().filter(|_| batch >= batches) {
        return Ok(Outcome::complete(&fan_in(batches, results)));
    }
    let fan_out = match join {
        JoinInput::All => FanOut::all(),
        JoinInput::Any => FanOut::any(),
        JoinInput::Count(n) => FanOut::count(n),
    };
    let fan_out = match leftover {
        LeftoverInput::Cancel => fan_out.leftover_cancel(),
        LeftoverInput::Keep => fan_out.leftover_keep(),
    };
    let fan_out = children.iter().fold(fan_out, |fan_out, spec| {
        let child = Child::new(spec.kind.as_str(), &spec.input);
        let child = match &spec.key {
            Some(key) => child.idempotency_key(key.as_str()),
            None => child,
        };
        fan_out.child(spec.lease_keys.iter().fold(child, |child, key| child.lease_key(key.as_str())))
    });
    Ok(Outcome::await_children(fan_out.cursor((batch + 1).to_string())))
}

/// The output once the last batch is back.
fn fan_in(batches: u32, results: &[ChildResult]) -> Value {
    let children: Vec<ChildReport> = results
        .iter()
        .map(|child| ChildReport {
            id: child.job_id().to_owned(),
            kind: child.kind().to_owned(),
            state: child.state().map(ChildState::as_str),
            output: child.output_as::<Value>().ok().flatten().unwrap_or(Value::Null),
            failure: child.failure().map(|failure| failure.code.clone()),
        })
        .collect();
    let succeeded = results.iter().filter(|child| child.succeeded()).count();
    let settled = results.iter().filter(|child| child.is_final()).count();
    json!({ "batches": batches, "children": children, "succeeded": succeeded, "final": settled })
}

fn wait_for_signals(step: &Step, name: String, timeout_secs: u32, waits: u32) -> Result<Outcome, StepError> {
    let mut cursor = match step.awaited() {
        None => SignalCursor::default(),
        Some(Awaited::Signal(_) | Awaited::SignalTimeout) => step
            .cursor_json::<SignalCursor>()?
            .ok_or_else(|| StepError::refused("invalid-cursor", "called back without the cursor it left"))?,
        Some(Awaited::Children(_)) => {
            return Err(StepError::refused("unexpected-awaited", "called back with children after a signal wait"));
        }
    };
    if step.awaited().is_some() {
        cursor.timed_out |= step.signal_timed_out();
        // A body that is not JSON reads as null, as a timeout does.
        cursor.signals.push(step.signal::<Value>().ok().flatten().unwrap_or(Value::Null));
    }
    if cursor.wait >= waits {
        let mut output = json!({ "signals": cursor.signals, "timed_out": cursor.timed_out });
        if waits == 1 {
            output["signal"] = cursor.signals.first().cloned().unwrap_or(Value::Null);
        }
        return Ok(Outcome::complete(&output));
    }
    cursor.wait += 1;
    Ok(Outcome::await_signal(name, timeout_secs).with_cursor_json(&cursor))
}

spindle_guest::export_kind!(Workflow);

#[cfg(test)]
mod tests {
    use spindle_guest::bindings::spindle::job::types as wit;
    use spindle_guest::testing::{self, ChildOutcome, JobRun, local_child_id, run_job};

    use super::*;

    fn run(input: Value) -> JobRun {
        run_job::<Workflow>(input.to_string().as_bytes())
    }

    fn output(run: &JobRun) -> Value {
        assert!(run.succeeded(), "{:?}", run.failure);
        run.output("run").expect("run completed")
    }

    fn refused(input: Value) -> String {
        run(input).failure.map(|failure| failure.code).unwrap_or_default()
    }

    #[test]
    fn fans_out_the_listed_children_and_reports_them_in_order() {
        testing::set_child_handler(|_, input| match input {
            b"{\"fail\":true}" => ChildOutcome::failed("boom", "the child failed"),
            _ => ChildOutcome::Succeeded(Some(input.to_vec())),
        });
        let run = run(json!({"children": [
            {"kind": "noop", "input": {"n": 1}, "key": "k1", "lease_keys": ["a", "b"]},
            {"kind": "scripted", "input": {"fail": true}},
            {"kind": "noop"},
        ]}));
        assert_eq!(
            output(&run),
            json!({"batches": 1, "succeeded": 2, "final": 3, "children": [
                {"id": local_child_id(1), "kind": "noop", "state": "succeeded", "output": {"n": 1}, "failure": null},
                {"id": local_child_id(2), "kind": "scripted", "state": "failed", "output": null, "failure": "boom"},
                {"id": local_child_id(3), "kind": "noop", "state": "succeeded", "output": {}, "failure": null},
            ]})
        );
        let fan_out = &run.fan_outs[0];
        assert_eq!(
            (fan_out.join, fan_out.leftover, fan_out.cursor.as_deref()),
            (wit::Join::All, wit::Leftover::Cancel, Some("1"))
        );
        assert_eq!(fan_out.children[0].spec.idempotency_key.as_deref(), Some("k1"));
        assert_eq!(fan_out.children[0].spec.lease_keys, ["a", "b"]);
        assert_eq!(fan_out.children[1].spec.input, br#"{"fail":true}"#);
    }

    #[test]
    fn the_shorthand_makes_n_alike_children_in_batches() {
        let run =
            run(json!({"fan_out": 2, "child_input": {"x": 1}, "join": {"count": 1}, "leftover": "keep", "batches": 3}));
        let output = output(&run);
        assert_eq!(
            (output["batches"].clone(), output["succeeded"].clone(), output["final"].clone()),
            (json!(3), json!(1), json!(1))
        );
        assert_eq!(output["children"][0]["id"], json!(local_child_id(5)), "the last batch's children");
        assert_eq!(output["children"][1]["state"], Value::Null);
        assert_eq!(output["children"][0]["kind"], json!("noop"));
        let cursors: Vec<Option<&str>> = run.fan_outs.iter().map(|fan_out| fan_out.cursor.as_deref()).collect();
        assert_eq!(cursors, [Some("1"), Some("2"), Some("3")]);
        assert!(
            run.fan_outs
                .iter()
                .all(|fan_out| fan_out.join == wit::Join::Count(1) && fan_out.leftover == wit::Leftover::Keep)
        );
    }

    #[test]
    fn join_any_reports_the_rest_open() {
        let output = output(&run(json!({"fan_out": 3, "child_kind": "thumbnail", "join": "any"})));
        let states: Vec<&Value> = output["children"].as_array().expect("a list").iter().map(|c| &c["state"]).collect();
        assert_eq!(states, [&json!("succeeded"), &Value::Null, &Value::Null]);
        assert_eq!((output["succeeded"].clone(), output["final"].clone()), (json!(1), json!(1)));
    }

    #[test]
    fn an_empty_fan_out_is_reported_as_is() {
        let run = run(json!({"children": []}));
        assert_eq!(output(&run), json!({"batches": 1, "children": [], "succeeded": 0, "final": 0}));
        assert_eq!(run.fan_outs.len(), 1);
    }

    #[test]
    fn waits_for_one_signal() {
        testing::send_signal("go", r#"{"ok": true}"#);
        let run = run(json!({"signal": "go", "timeout_secs": 5}));
        assert_eq!(output(&run), json!({"signal": {"ok": true}, "signals": [{"ok": true}], "timed_out": false}));
        assert_eq!(run.signal_waits[0].timeout_secs, 5);

        let timed_out = self::run(json!({"signal": "go", "timeout_secs": 5}));
        assert_eq!(output(&timed_out), json!({"signal": null, "signals": [null], "timed_out": true}));
    }

    #[test]
    fn waits_several_times_in_a_row() {
        testing::send_signal("go", "1");
        testing::send_signal("go", "not json");
        let run = run(json!({"signal": "go", "timeout_secs": 1, "waits": 3}));
        assert_eq!(output(&run), json!({"signals": [1, null, null], "timed_out": true}));
        let cursors: Vec<Value> = run
            .calls
            .iter()
            .filter_map(|call| call.cursor.as_deref())
            .map(|cursor| serde_json::from_str::<Value>(cursor).expect("JSON")["wait"].clone())
            .collect();
        assert_eq!(cursors, [json!(1), json!(2), json!(3)]);

        testing::send_signal("go", "2");
        testing::send_signal("go", "3");
        let run = self::run(json!({"signal": "go", "timeout_secs": 1, "waits": 2}));
        assert_eq!(output(&run), json!({"signals": [2, 3], "timed_out": false}));
    }

    #[test]
    fn malformed_input_is_refused() {
        for input in [
            json!("fan out"),
            json!({}),
            json!({"children": [], "fan_out": 2}),
            json!({"children": [], "signal": "go", "timeout_secs": 1}),
            json!({"fan_out": 2, "signal": "go"}),
            json!({"children": [{"input": {}}]}),
            json!({"children": [{"kind": "noop", "extra": 1}]}),
            json!({"children": [], "child_kind": "noop"}),
            json!({"fan_out": 2, "join": "some"}),
            json!({"fan_out": 2, "join": {"count": -1}}),
            json!({"fan_out": 2, "leftover": "drop"}),
            json!({"fan_out": 2, "batches": 0}),
            json!({"fan_out": 2, "timeout_secs": 1}),
            json!({"fan_out": 100_001}),
            json!({"signal": "go"}),
            json!({"signal": "go", "timeout_secs": 1, "waits": 0}),
            json!({"signal": "go", "timeout_secs": 1, "join": "all"}),
            json!({"signal": "go", "timeout_secs": 1, "unknown": true}),
        ] {
            assert_eq!(refused(input.clone()), "invalid-input", "{input}");
        }
    }

    #[test]
    fn a_call_back_with_the_wrong_thing_is_refused() {
        let call = |payload: Value, cursor: Option<&str>, awaited: wit::Awaited| {
            let mut step = Step::from_input(wit::StepInput {
                job_id: testing::LOCAL_JOB_ID.into(),
                step: "run".into(),
                attempt: 1,
                idempotency_key: "key".into(),
                payload: payload.to_string().into_bytes(),
                prior: Vec::new(),
                cursor: cursor.map(Into::into),
                awaited: Some(awaited),
            });
            Workflow::run_step(&mut step).map(drop).map_err(|error| error.code().to_owned())
        };
        let fan_out = json!({"fan_out": 1});
        let signal = json!({"signal": "go", "timeout_secs": 1});
        assert_eq!(call(fan_out.clone(), Some("1"), wit::Awaited::SignalTimeout), Err("unexpected-awaited".into()));
        assert_eq!(call(fan_out, None, wit::Awaited::Children(Vec::new())), Err("invalid-cursor".into()));
        assert_eq!(call(signal.clone(), None, wit::Awaited::Children(Vec::new())), Err("unexpected-awaited".into()));
        assert_eq!(call(signal, None, wit::Awaited::SignalTimeout), Err("invalid-cursor".into()));
    }
}
