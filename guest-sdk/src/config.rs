//! The kind's deployment settings and its tenant's secrets.
//!
//! Settings are plain values set per deployment (`spindle deploy KIND FILE --set
//! NAME=VALUE`). Secrets belong to the tenant, and the guest never holds one: a
//! deployment declares the names it uses (`--secret NAME@RULE`), [`secret`] hands back a
//! placeholder, and the host puts the value in its place in the headers of outbound
//! requests its policy allows (in bodies too, if the deployment opted in).
//! [`hmac_sha256`] signs with a secret for payloads that need a signature instead.
//!
//! ```
//! use spindle_guest::{StepError, StepResultExt, config, http};
//!
//! fn notify(order: u64) -> Result<(), StepError> {
//!     let url = config::get("webhook-url").refused_with("missing-setting", "webhook-url is not set")?;
//!     let body = serde_json::to_vec(&serde_json::json!({ "order": order }))?;
//!     let signature = config::hmac_sha256("webhook-key", &body).refused("missing-secret")?;
//!     let hex: String = signature.iter().map(|b| format!("{b:02x}")).collect();
//!     http::Request::post(url).header("x-signature", hex).body(body).send()?.error_for_status()?;
//!     Ok(())
//! }
//! # let _ = notify;
//! ```
//!
//! Off wasm (a kind's unit tests) the answers come from what the test set with
//! [`testing::set_config`](crate::testing::set_config) and
//! [`testing::set_secret`](crate::testing::set_secret); nothing is set by default.

#[cfg(target_arch = "wasm32")]
use crate::bindings::spindle::job::config as imports;
#[cfg(not(target_arch = "wasm32"))]
use crate::local_host::config as imports;

/// The deployment's setting `name`, if set.
pub fn get(name: &str) -> Option<String> {
    imports::get(name)
}

/// A placeholder standing for the tenant's secret `name`, if the deployment declared it
/// and the tenant set it. Put it in a header (`format!("Bearer {placeholder}")`); the
/// host swaps in the value when it sends a request its policy allows. The placeholder
/// is opaque and differs between calls of a step: do not store or compare it.
pub fn secret(name: &str) -> Option<String> {
    imports::secret(name)
}

/// HMAC-SHA256 of `message` under the tenant's secret `secret_name` (declared and set as
/// for [`secret`]), for signing a payload without holding the key; `None` if the secret
/// is not available.
pub fn hmac_sha256(secret_name: &str, message: impl AsRef<[u8]>) -> Option<Vec<u8>> {
    imports::hmac_sha256(secret_name, message.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn answers_from_what_the_test_set() {
        assert_eq!(get("region"), None);
        testing::set_config("region", "eu");
        testing::set_secret("key", "Jefe");
        assert_eq!(get("region").as_deref(), Some("eu"));
        assert!(secret("key").is_some_and(|placeholder| !placeholder.contains("Jefe")));
        let mac = hmac_sha256("key", "what do ya want for nothing?").expect("set");
        assert_eq!(mac[..4], [0x5b, 0xdc, 0xc1, 0x46]);
        assert_eq!((secret("other"), hmac_sha256("other", "x")), (None, None));
        testing::reset();
        assert_eq!(get("region"), None);
    }
}
