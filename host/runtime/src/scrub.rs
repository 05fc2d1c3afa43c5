//! The last pass over what a step hands the host: every form of a secret value the step
//! could send is replaced with its placeholder in its outcome (output, cursor, messages,
//! children's inputs), its stderr tail, its log and stdio lines and the host's own detail,
//! before any of it is stored or logged. Responses were already scrubbed before the guest
//! read them (`outbound::redact`); this holds for a value the guest came by another way.

use crate::outbound::redact::Redactions;
use crate::outcome::{GuestOutcome, StepCall, StepRun};

/// `text` scrubbed, in place.
pub(crate) fn text(redactions: &Redactions, text: &mut String) {
    if let Some(replaced) = redactions.apply(text.as_bytes()) {
        *text = String::from_utf8_lossy(&replaced).into_owned();
    }
}

fn bytes(redactions: &Redactions, bytes: &mut Vec<u8>) {
    if let Some(replaced) = redactions.apply(bytes) {
        *bytes = replaced;
    }
}

fn opt(redactions: &Redactions, value: &mut Option<String>) {
    if let Some(value) = value {
        text(redactions, value);
    }
}

/// Everything in `call` scrubbed.
pub(crate) fn step_call(redactions: &Redactions, call: &mut StepCall) {
    match &mut call.run {
        StepRun::Fault { detail, .. } => text(redactions, detail),
        StepRun::Outcome(outcome) => match outcome {
            GuestOutcome::Complete(output) => bytes(redactions, output),
            GuestOutcome::Skip(reason) => text(redactions, reason),
            GuestOutcome::Retryable { code, message } | GuestOutcome::Refused { code, message } => {
                text(redactions, code);
                text(redactions, message);
            }
            GuestOutcome::More { cursor, .. } => text(redactions, cursor),
            GuestOutcome::Snooze(_) => {}
            GuestOutcome::AwaitChildren { children, cursor, .. } => {
                for child in children {
                    bytes(redactions, &mut child.input);
                    opt(redactions, &mut child.idempotency_key);
                    for key in &mut child.lease_keys {
                        text(redactions, key);
                    }
                }
                opt(redactions, cursor);
            }
            GuestOutcome::AwaitSignal { name, cursor, .. } => {
                text(redactions, name);
                opt(redactions, cursor);
            }
        },
    }
    opt(redactions, &mut call.stderr);
    for line in &mut call.lines {
        text(redactions, &mut line.message);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::lines::{GuestLine, Level, Stream};

    const VALUE: &str = "sk_live_7Hq2vX9pLmN4";
    const PLACEHOLDER: &str = "{{spindle-secret:stripe:00}}";

    #[test]
    fn no_form_of_a_secret_survives_in_what_the_host_keeps() {
        let redactions = Redactions::new([(VALUE, PLACEHOLDER.to_owned())]).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(VALUE);
        let hex = hex::encode(VALUE);
        let line = |message: String| GuestLine { at_micros: 0, level: Level::Info, stream: Stream::Stdout, message };
        let mut calls = vec![
            StepCall {
                run: StepRun::Outcome(GuestOutcome::Complete(
                    format!(r#"{{"token":"{VALUE}","b":"{b64}"}}"#).into_bytes(),
                )),
                stderr: Some(format!("panicked with {hex}")),
                lines: vec![line(format!("got {VALUE}")), line(format!("again {b64}"))],
            },
            StepCall {
                run: StepRun::Outcome(GuestOutcome::Refused { code: "bad".into(), message: format!("key {VALUE}") }),
                stderr: None,
                lines: vec![],
            },
            StepCall {
                run: StepRun::Outcome(GuestOutcome::More { cursor: VALUE.into(), done: 1, total: None }),
                stderr: None,
                lines: vec![],
            },
            StepCall {
                run: StepRun::Fault { fault: crate::SandboxFault::Panic, detail: format!("trap near {VALUE}") },
                stderr: None,
                lines: vec![],
            },
        ];
        for call in &mut calls {
            step_call(&redactions, call);
            let shown = format!("{call:?}");
            for form in [VALUE, b64.as_str(), hex.as_str()] {
                assert!(!shown.contains(form), "{form} survived in {shown}");
            }
            assert!(shown.contains(PLACEHOLDER), "{shown}");
        }
        let StepRun::Outcome(GuestOutcome::Complete(output)) = &calls[0].run else { unreachable!() };
        let output: serde_json::Value = serde_json::from_slice(output).unwrap();
        assert_eq!(output["token"], PLACEHOLDER, "the output is still the same JSON, the value replaced");
    }

    /// A value holding `"` or `\\` is escaped in a JSON output: that form is replaced too
    /// (it was stored as the guest wrote it).
    #[test]
    fn a_value_a_json_output_escapes_is_replaced_as_escaped() {
        const QUOTED: &str = r#"sk_"quoted\value_7Hq2"#;
        let redactions = Redactions::new([(QUOTED, PLACEHOLDER.to_owned())]).unwrap();
        let output = serde_json::to_vec(&serde_json::json!({ "token": QUOTED })).unwrap();
        let mut call = StepCall { run: StepRun::Outcome(GuestOutcome::Complete(output)), stderr: None, lines: vec![] };
        step_call(&redactions, &mut call);
        let StepRun::Outcome(GuestOutcome::Complete(output)) = &call.run else { unreachable!() };
        let output: serde_json::Value = serde_json::from_slice(output).unwrap();
        assert_eq!(output["token"], PLACEHOLDER, "{output}");
    }
}
