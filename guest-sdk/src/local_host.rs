//! The stand-in for the host off wasm, where the bindings' imports cannot be called:
//! the settings, secrets and HTTP handler a unit test sets through
//! [`testing`](crate::testing).
//!
//! Per thread, because the test harness runs each test on a thread of its own: one
//! test's settings never leak into another's.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use sha2::{Digest, Sha256};

use crate::http::{HttpError, Request, Response};

/// What answers outbound requests in a test.
pub(crate) type HttpHandler = Rc<dyn Fn(&Request) -> Result<Response, HttpError>>;

#[derive(Default)]
struct LocalHost {
    settings: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    http: Option<HttpHandler>,
}

thread_local! {
    static HOST: RefCell<LocalHost> = RefCell::default();
}

pub(crate) fn set_setting(name: String, value: String) {
    HOST.with_borrow_mut(|host| host.settings.insert(name, value));
}

pub(crate) fn set_secret(name: String, value: String) {
    HOST.with_borrow_mut(|host| host.secrets.insert(name, value));
}

pub(crate) fn set_http_handler(handler: HttpHandler) {
    HOST.with_borrow_mut(|host| host.http = Some(handler));
}

pub(crate) fn reset() {
    HOST.set(LocalHost::default());
}

/// Stands in for the `config` interface.
pub(crate) mod config {
    use super::{HOST, hmac, placeholder_text};

    pub(crate) fn get(name: &str) -> Option<String> {
        HOST.with_borrow(|host| host.settings.get(name).cloned())
    }

    /// A placeholder for a secret the test set; shaped like the host's, with a fixed
    /// tag in place of the host's random one.
    pub(crate) fn secret(name: &str) -> Option<String> {
        HOST.with_borrow(|host| host.secrets.contains_key(name).then(|| placeholder_text(name)))
    }

    pub(crate) fn hmac_sha256(name: &str, message: &[u8]) -> Option<Vec<u8>> {
        HOST.with_borrow(|host| host.secrets.get(name).map(|secret| hmac(secret.as_bytes(), message)))
    }
}

/// The handler, cloned out so that it may itself read settings or set new ones.
pub(crate) fn http_handler() -> Option<HttpHandler> {
    HOST.with_borrow(|host| host.http.clone())
}

fn placeholder_text(name: &str) -> String {
    format!("{{{{spindle-secret:{name}:local}}}}")
}

/// `value` with every placeholder of a set secret replaced by the secret, as the host
/// does in the headers of a request it sends.
pub(crate) fn reveal(value: &[u8]) -> Vec<u8> {
    HOST.with_borrow(|host| {
        host.secrets.iter().fold(value.to_vec(), |bytes, (name, secret)| {
            replace(&bytes, placeholder_text(name).as_bytes(), secret.as_bytes())
        })
    })
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = rest.windows(needle.len()).position(|window| window == needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// HMAC-SHA256 (RFC 2104): a test stand-in for the host's, so a kind's signatures can
/// be checked against known values without another dependency.
fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
    const BLOCK: usize = 64;
    let mut block_key = [0_u8; BLOCK];
    if key.len() > BLOCK {
        block_key[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block_key[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block_key.map(|k| k ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 2 (short key) and 6 (key longer than a block).
        assert_eq!(
            hex(&hmac(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn placeholders_are_revealed_wherever_they_occur() {
        set_secret("token".into(), "s3cr3t".into());
        let placeholder = config::secret("token").expect("set");
        assert!(!placeholder.contains("s3cr3t"));
        let header = format!("Bearer {placeholder}, again {placeholder}");
        assert_eq!(reveal(header.as_bytes()), b"Bearer s3cr3t, again s3cr3t");
        assert_eq!(placeholder_text("other"), "{{spindle-secret:other:local}}");
        assert_eq!(config::secret("other"), None);
    }
}
