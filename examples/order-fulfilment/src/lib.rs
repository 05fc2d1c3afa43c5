//! Kind `order-fulfilment`: a workflow. It fans out one `thumbnail` child job per image
//! of the order, waits for them all, then parks until the order is shipped.
//!
//! Input: `{"order_id": "A-1001", "images": ["front.jpg", "data:image/png;base64,iVBO…"],
//! "ship_timeout_secs": 86400}`; `ship_timeout_secs` may be left out (3 days).
//!
//! - `reserve` checks the order and completes with it.
//! - `thumbnails` fans out one `thumbnail` job per image (join all) and, called back,
//!   completes with their outputs, or is refused `thumbnail-failed` if any did not
//!   succeed. The `thumbnail` kind cannot fetch, so a `data:image/png;base64,` image is
//!   handed over as its PNG and any other name or URL as a 640×480 test pattern. Skipped
//!   when the order has no image.
//! - `await-shipping` waits for the signal `shipped`, whose body is
//!   `{"carrier": "…", "tracking": "…"}`, and completes with it; refused `not-shipped`
//!   if the timeout passes first.
//! - `notify` completes with a summary of the order.
//!
//! Cancellable (an order may wait days for its shipment); when a job fails after
//! `reserve`, the failure effect releases the order's reservation (here, a log line).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use spindle_guest::prelude::*;

struct OrderFulfilment;

/// How long `await-shipping` waits by default: three days.
const DEFAULT_SHIP_TIMEOUT_SECS: u32 = 3 * 24 * 3600;
/// The longest wait an order may ask for: past a month, people should look at it
/// rather than a parked job.
const MAX_SHIP_TIMEOUT_SECS: u32 = 30 * 24 * 3600;
/// Images per order: each is a child job, so an order cannot flood the queue.
const MAX_IMAGES: usize = 50;
/// The longest thumbnail edge asked of the `thumbnail` kind.
const THUMBNAIL_EDGE: u32 = 128;
/// An image given inline, handed to `thumbnail` as it is.
const PNG_DATA_URL: &str = "data:image/png;base64,";

/// The job's input: the order and its images (URLs or inline PNGs).
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Order {
    order_id: String,
    images: Vec<String>,
    #[serde(default = "default_ship_timeout")]
    ship_timeout_secs: u32,
}

fn default_ship_timeout() -> u32 {
    DEFAULT_SHIP_TIMEOUT_SECS
}

/// The body of the `shipped` signal, and `await-shipping`'s output.
#[derive(Debug, Serialize, Deserialize)]
struct Shipment {
    carrier: String,
    tracking: String,
}

/// One image's thumbnail: its `thumbnail` job and that job's output.
#[derive(Debug, Serialize, Deserialize)]
struct Thumbnail {
    image: String,
    job_id: String,
    output: Value,
}

#[derive(Debug, Serialize, Deserialize)]
struct Thumbnails {
    thumbnails: Vec<Thumbnail>,
}

impl Kind for OrderFulfilment {
    fn describe() -> KindSpec {
        KindSpec::new("order-fulfilment")
            .input::<Order>()
            .step("reserve", 1)
            .step("thumbnails", 3)
            .step("await-shipping", 1)
            .step("notify", 1)
            .cancellable()
            .failure_effect()
    }

    fn run_step(step: &mut Step) -> Result<Outcome, StepError> {
        match step.key() {
            "reserve" => reserve(step),
            "thumbnails" => thumbnails(step),
            "await-shipping" => await_shipping(step),
            "notify" => notify(step),
            other => Err(StepError::unknown_step(other)),
        }
    }

    fn on_failure(job: &JobSummary) -> Result<(), StepError> {
        // Nothing was reserved unless `reserve` completed.
        if let Some(order) = job.output::<Order>("reserve")? {
            log::warn(format!("releasing the reservation of order {}", order.order_id));
        }
        Ok(())
    }
}

fn reserve(step: &Step) -> Result<Outcome, StepError> {
    let order: Order = step.input()?;
    if order.order_id.trim().is_empty() {
        return Err(StepError::refused("invalid-input", "`order_id` is empty"));
    }
    if order.images.len() > MAX_IMAGES || order.images.iter().any(|image| image.trim().is_empty()) {
        return Err(StepError::refused("invalid-input", format!("give at most {MAX_IMAGES} images, none empty")));
    }
    if !(1..=MAX_SHIP_TIMEOUT_SECS).contains(&order.ship_timeout_secs) {
        return Err(StepError::refused("invalid-input", "`ship_timeout_secs` must be between 1 and 30 days"));
    }
    log::info(format!("reserved order {} ({} images)", order.order_id, order.images.len()));
    Ok(Outcome::complete(&order))
}

fn thumbnails(step: &Step) -> Result<Outcome, StepError> {
    let order: Order = step.prior("reserve")?;
    let Some(children) = step.children() else {
        if order.images.is_empty() {
            return Ok(Outcome::skip("the order has no images"));
        }
        // Keyed by this step (stable across its attempts) and the image's place, so a
        // retried attempt finds the thumbnails already made instead of making them again.
        let fan_out = order.images.iter().enumerate().fold(FanOut::all(), |fan_out, (index, image)| {
            fan_out.child(
                Child::new("thumbnail", &thumbnail_input(image))
                    .idempotency_key(format!("{}/{index}", step.idempotency_key())),
            )
        });
        return Ok(Outcome::await_children(fan_out));
    };
    let failed: Vec<String> = children
        .iter()
        .filter(|child| !child.succeeded())
        .map(|child| {
            let why = child.failure().map_or("no failure given", |failure| failure.code.as_str());
            let state = child.state().map_or("open", ChildState::as_str);
            format!("{} {state} ({why})", child.job_id())
        })
        .collect();
    if !failed.is_empty() {
        return Err(
            StepError::refused("thumbnail-failed", "a thumbnail job did not succeed").with_detail(failed.join(", "))
        );
    }
    let thumbnails = order
        .images
        .into_iter()
        .zip(children)
        .map(|(image, child)| {
            let output = child.output_as::<Value>()?.unwrap_or(Value::Null);
            Ok(Thumbnail { image, job_id: child.job_id().to_owned(), output })
        })
        .collect::<Result<Vec<_>, StepError>>()?;
    Ok(Outcome::complete(&Thumbnails { thumbnails }))
}

/// What the `thumbnail` kind is asked to do for one image.
fn thumbnail_input(image: &str) -> Value {
    match image.strip_prefix(PNG_DATA_URL) {
        Some(png) => json!({ "png_base64": png, "max_edge": THUMBNAIL_EDGE }),
        None => json!({ "width": 640, "height": 480, "max_edge": THUMBNAIL_EDGE }),
    }
}

fn await_shipping(step: &Step) -> Result<Outcome, StepError> {
    if step.signal_timed_out() {
        return Err(StepError::refused("not-shipped", "the order was not shipped in time"));
    }
    match step.signal::<Shipment>()? {
        Some(shipment) if shipment.carrier.is_empty() || shipment.tracking.is_empty() => {
            Err(StepError::refused("invalid-signal", "the shipment names no carrier or tracking number"))
        }
        Some(shipment) => Ok(Outcome::complete(&shipment)),
        None => {
            let order: Order = step.prior("reserve")?;
            Ok(Outcome::await_signal("shipped", order.ship_timeout_secs))
        }
    }
}

fn notify(step: &Step) -> Result<Outcome, StepError> {
    let order: Order = step.prior("reserve")?;
    let thumbnails = step.prior_output_as::<Thumbnails>("thumbnails")?.map_or(0, |t| t.thumbnails.len());
    let shipment: Shipment = step.prior("await-shipping")?;
    log::info(format!("order {} shipped by {} as {}", order.order_id, shipment.carrier, shipment.tracking));
    Ok(Outcome::complete(&json!({
        "order_id": order.order_id,
        "thumbnails": thumbnails,
        "carrier": shipment.carrier,
        "tracking": shipment.tracking,
    })))
}

spindle_guest::export_kind!(OrderFulfilment);

#[cfg(test)]
mod job_tests {
    use spindle_guest::testing::{self, ChildOutcome, JobRun, local_child_id, run_job};

    use super::*;

    const PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

    fn run(order: Value) -> JobRun {
        run_job::<OrderFulfilment>(order.to_string().as_bytes())
    }

    fn failure_code(run: &JobRun) -> Option<&str> {
        run.failure.as_ref().map(|failure| failure.code.as_str())
    }

    /// Stands in for the `thumbnail` kind: a fixed output naming the input's edge.
    fn thumbnail_succeeds() {
        testing::set_child_handler(|kind, input| {
            let input: Value = serde_json::from_slice(input).unwrap_or_default();
            match kind {
                "thumbnail" => ChildOutcome::succeeded(&json!({"width": input["max_edge"], "crc32": "1234abcd"})),
                _ => ChildOutcome::failed("unknown-kind", "not deployed"),
            }
        });
    }

    #[test]
    fn makes_thumbnails_waits_for_shipping_and_notifies() {
        thumbnail_succeeds();
        testing::send_signal("shipped", r#"{"carrier": "DHL", "tracking": "JD0001"}"#);
        let run = run(json!({"order_id": "A-1001", "images": ["front.jpg", format!("{PNG_DATA_URL}{PNG}")]}));
        assert!(run.succeeded(), "{:?}", run.failure);

        let inputs: Vec<Value> = run
            .children_of("thumbnails")
            .map(|child| serde_json::from_slice(&child.spec.input).expect("JSON"))
            .collect();
        assert_eq!(
            inputs,
            [json!({"width": 640, "height": 480, "max_edge": 128}), json!({"png_base64": PNG, "max_edge": 128})]
        );
        let keys: Vec<Option<&str>> =
            run.children_of("thumbnails").map(|child| child.spec.idempotency_key.as_deref()).collect();
        let step_key = format!("{}/thumbnails", testing::LOCAL_JOB_ID);
        assert_eq!(keys, [Some(format!("{step_key}/0").as_str()), Some(format!("{step_key}/1").as_str())]);

        let thumbnails: Thumbnails = run.output("thumbnails").expect("thumbnails completed");
        assert_eq!(thumbnails.thumbnails.len(), 2);
        assert_eq!(thumbnails.thumbnails[1].image, format!("{PNG_DATA_URL}{PNG}"));
        assert_eq!(thumbnails.thumbnails[1].job_id, local_child_id(2));
        assert_eq!(thumbnails.thumbnails[0].output, json!({"width": 128, "crc32": "1234abcd"}));

        assert_eq!(run.signal_waits[0].timeout_secs, DEFAULT_SHIP_TIMEOUT_SECS);
        assert_eq!(
            run.output::<Value>("notify"),
            Some(json!({"order_id": "A-1001", "thumbnails": 2, "carrier": "DHL", "tracking": "JD0001"}))
        );
        assert_eq!(run.hook, None);
    }

    #[test]
    fn a_failed_thumbnail_fails_the_order_and_releases_it() {
        testing::set_child_handler(|_, input| {
            if input.windows(3).any(|window| window == b"png") {
                ChildOutcome::failed("bad-image", "the image is not a PNG within the size limits")
            } else {
                ChildOutcome::succeeded(&json!({}))
            }
        });
        let run = run(json!({"order_id": "A-1002", "images": ["ok.jpg", "data:image/png;base64,bm90IGEgcG5n"]}));
        assert_eq!(failure_code(&run), Some("thumbnail-failed"));
        assert_eq!(run.hook, Some(Ok(())), "the failure effect ran");
        assert_eq!(run.signal_waits.len(), 0);
    }

    #[test]
    fn an_order_not_shipped_in_time_is_refused() {
        thumbnail_succeeds();
        let run = run(json!({"order_id": "A-1003", "images": ["a.jpg"], "ship_timeout_secs": 60}));
        assert_eq!(failure_code(&run), Some("not-shipped"));
        assert_eq!(run.signal_waits[0].timeout_secs, 60);
        assert_eq!(run.signal_waits[0].body, None);
    }

    #[test]
    fn a_malformed_shipment_is_refused() {
        testing::send_signal("shipped", r#"{"carrier": "DHL"}"#);
        assert_eq!(failure_code(&run(json!({"order_id": "A-1004", "images": []}))), Some("invalid-signal"));
        testing::send_signal("shipped", r#"{"carrier": "", "tracking": "x"}"#);
        assert_eq!(failure_code(&run(json!({"order_id": "A-1004", "images": []}))), Some("invalid-signal"));
    }

    #[test]
    fn an_order_without_images_skips_its_thumbnails() {
        testing::send_signal("shipped", r#"{"carrier": "UPS", "tracking": "1Z"}"#);
        let run = run(json!({"order_id": "A-1005", "images": []}));
        assert!(run.succeeded(), "{:?}", run.failure);
        assert!(run.fan_outs.is_empty());
        assert_eq!(run.output::<Value>("notify").map(|summary| summary["thumbnails"].clone()), Some(json!(0)));
    }

    #[test]
    fn malformed_orders_are_refused() {
        let too_many: Vec<String> = (0..=MAX_IMAGES).map(|n| format!("{n}.jpg")).collect();
        for order in [
            json!({"images": []}),
            json!({"order_id": " ", "images": []}),
            json!({"order_id": "A", "images": [""]}),
            json!({"order_id": "A", "images": too_many}),
            json!({"order_id": "A", "images": [], "ship_timeout_secs": 0}),
            json!({"order_id": "A", "images": [], "ship_timeout_secs": MAX_SHIP_TIMEOUT_SECS + 1}),
        ] {
            let run = run(order.clone());
            assert_eq!(failure_code(&run), Some("invalid-input"), "{order}");
            assert_eq!(run.calls.len(), 1, "{order}");
        }
    }
}
