//! What a step may reach outward: the deployment's allowances (outbound rules, declared
//! secrets, settings), the tenant's rules, and the tenant's secrets, sealed at rest with
//! the host's key and opened only to hand a step the ones its deployment declared.

use std::collections::BTreeMap;
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde::{Deserialize, Serialize};
use spindle_runtime::outbound::{Rule, RuleError, Rules};

/// Most rules, secrets or settings one deployment may carry.
pub const MAX_DEPLOYMENT_ENTRIES: usize = 64;
/// Longest setting value, in bytes.
pub const MAX_SETTING_BYTES: usize = 4096;
/// Longest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 16 * 1024;
/// Shortest secret value, in bytes. A short value can be found by guessing through a
/// destination that answers differently when it sees it (a 4-digit secret fell to 10,000
/// requests to an echo server), and short forms of it would rewrite ordinary text.
pub const MIN_SECRET_BYTES: usize = 12;

/// What a kind version's deployment allows, declares and sets
/// (`spindle deploy KIND FILE --allow … --secret … --set NAME=VALUE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Deployment {
    /// Destinations its steps may reach (the kind's layer of the policy).
    pub allow: Vec<Rule>,
    /// Tenant secrets its steps may use (as placeholders).
    pub secrets: Vec<String>,
    /// Where each secret may be sent (`--secret NAME@RULE`, repeatable): a request gets
    /// its value only if one of these rules allows it. Every secret a new deployment
    /// declares is bound; one stored before bindings has none here and may go wherever
    /// the deployment's `allow` rules let its steps reach. Not stored when empty, so a
    /// build that knows nothing of it reads the deployments it could have written (one
    /// with bindings it refuses, rather than send the secrets anywhere it allows).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub bindings: BTreeMap<String, Vec<Rule>>,
    /// Settings its steps read with `config.get`.
    pub settings: BTreeMap<String, String>,
    /// Whether secrets are put in place in request bodies, not only headers.
    pub secrets_in_body: bool,
    /// Steps of the kind running at once, on every host together (the latest
    /// deployment's limit holds for the kind).
    pub max_running: Option<u32>,
    /// What the kind keeps of its jobs (`--record lean`): a lean job is one row, with no
    /// step or history rows. Not stored when full, so that a build that knows nothing of
    /// it (and refuses unknown fields) reads the deployments it could have written.
    #[serde(skip_serializing_if = "is_full")]
    pub record: spindle_core::Record,
}

fn is_full(record: &spindle_core::Record) -> bool {
    *record == spindle_core::Record::Full
}

/// Why a deployment's allowances are refused.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// A rule does not parse.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A secret or setting name is not a valid name.
    #[error("invalid {0} name {1:?}: 1-64 characters of a-z, A-Z, 0-9, '-', '_' or '.'")]
    Name(&'static str, String),
    /// A setting's value is too long.
    #[error("setting {0:?} is over {MAX_SETTING_BYTES} bytes")]
    SettingTooLong(String),
    /// Too many entries.
    #[error("a deployment carries at most {MAX_DEPLOYMENT_ENTRIES} rules, secrets and settings each")]
    TooMany,
    /// A `--set` that is not `NAME=VALUE`.
    #[error("a setting is NAME=VALUE, not {0:?}")]
    Setting(String),
    /// A secret declared without a destination.
    #[error(
        "secret {0:?} is bound to no destination: declare it as {0}@RULE (for example {0}@https://api.example.com/*), once per destination it may be sent to"
    )]
    Unbound(String),
}

/// Whether `name` may name a secret or a setting.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Deployment {
    /// A deployment from the texts a client sends: rules, secrets bound to their
    /// destinations (`NAME@RULE`, a name once per destination), `NAME=VALUE`.
    pub fn parse(
        allow: &[String],
        secrets: &[String],
        settings: &[String],
        secrets_in_body: bool,
    ) -> Result<Self, DeploymentError> {
        let mut parsed = BTreeMap::new();
        for setting in settings {
            let (name, value) = setting.split_once('=').ok_or_else(|| DeploymentError::Setting(setting.clone()))?;
            parsed.insert(name.to_owned(), value.to_owned());
        }
        let mut names: Vec<String> = Vec::new();
        let mut bindings: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
        for text in secrets {
            let Some((name, rule)) = text.split_once('@') else {
                return Err(DeploymentError::Unbound(text.clone()));
            };
            if !names.iter().any(|n| n == name) {
                names.push(name.to_owned());
            }
            bindings.entry(name.to_owned()).or_default().push(Rule::parse(rule)?);
        }
        // One deployment, one form: the same rules, secrets and bindings in another order
        // (or written twice) are the same deployment, so deploying them again is the
        // same version, not a new one.
        let mut allow = Rules::parse(allow)?.0;
        allow.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        allow.dedup();
        names.sort();
        for rules in bindings.values_mut() {
            rules.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            rules.dedup();
        }
        let deployment = Self {
            allow,
            secrets: names,
            bindings,
            settings: parsed,
            secrets_in_body,
            max_running: None,
            record: spindle_core::Record::Full,
        };
        deployment.validate()?;
        Ok(deployment)
    }

    /// Checks the limits and names.
    pub fn validate(&self) -> Result<(), DeploymentError> {
        let bound: usize = self.bindings.values().map(Vec::len).sum();
        if [self.allow.len(), self.secrets.len(), bound, self.settings.len()]
            .iter()
            .any(|&n| n > MAX_DEPLOYMENT_ENTRIES)
        {
            return Err(DeploymentError::TooMany);
        }
        if let Some(bad) = self.secrets.iter().find(|n| !is_valid_name(n)) {
            return Err(DeploymentError::Name("secret", bad.clone()));
        }
        for (name, value) in &self.settings {
            if !is_valid_name(name) {
                return Err(DeploymentError::Name("setting", name.clone()));
            }
            if value.len() > MAX_SETTING_BYTES {
                return Err(DeploymentError::SettingTooLong(name.clone()));
            }
        }
        Ok(())
    }

    /// Whether it gives its steps nothing beyond computing: no rules, secrets or
    /// settings. Such a step needs nothing read for it.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.secrets.is_empty() && self.settings.is_empty()
    }
}

/// The host's key for sealing secrets: 32 bytes, from `SPINDLE_SECRET_KEY` (64 hex
/// digits) or a 0600 file in the data directory, made on first start. Every host
/// sharing a database needs the same key.
#[derive(Clone)]
pub struct SecretKey(Key);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(…)")
    }
}

/// A secret that could not be sealed, or a sealed one that does not open.
#[derive(Debug, thiserror::Error)]
#[error("a secret could not be sealed, or does not open with this host's key (another key, or altered)")]
pub struct SealError;

impl SecretKey {
    /// The key in `hex` (64 hex digits).
    pub fn from_hex(hex_key: &str) -> anyhow::Result<Self> {
        let bytes = hex::decode(hex_key.trim()).map_err(|_| anyhow::anyhow!("SPINDLE_SECRET_KEY is not hex"))?;
        anyhow::ensure!(bytes.len() == 32, "SPINDLE_SECRET_KEY must be 32 bytes (64 hex digits)");
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| anyhow::anyhow!("SPINDLE_SECRET_KEY must be 32 bytes"))?;
        Ok(Self(Key::from(bytes)))
    }

    /// The key in `path`, made (mode 0600) if missing.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_hex(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
                file.write_all(hex::encode(key).as_bytes())?;
                Ok(Self(Key::from(key)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `plaintext` sealed for `tenant`'s secret `name` (bound to both: a sealed value
    /// moved to another row does not open).
    pub fn seal(&self, tenant: &str, name: &str, plaintext: &[u8]) -> Result<String, SealError> {
        let nonce: [u8; 12] = rand::random();
        let aad = format!("{tenant}/{name}");
        let cipher = ChaCha20Poly1305::new(&self.0);
        // Never an empty value stored in place of a secret: a failed encryption is an error.
        let sealed = cipher
            .encrypt(&Nonce::from(nonce), Payload { msg: plaintext, aad: aad.as_bytes() })
            .map_err(|_| SealError)?;
        Ok(format!("{}{}", hex::encode(nonce), hex::encode(sealed)))
    }

    /// The plaintext of a value [`seal`](Self::seal)ed for `tenant`'s `name`.
    pub fn open(&self, tenant: &str, name: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let bytes = hex::decode(sealed).map_err(|_| SealError)?;
        if bytes.len() < 12 + 16 {
            return Err(SealError);
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        let nonce: [u8; 12] = nonce.try_into().map_err(|_| SealError)?;
        let aad = format!("{tenant}/{name}");
        ChaCha20Poly1305::new(&self.0)
            .decrypt(&Nonce::from(nonce), Payload { msg: ciphertext, aad: aad.as_bytes() })
            .map_err(|_| SealError)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_row() {
        let key = SecretKey::from_hex(&"11".repeat(32)).unwrap();
        let sealed = key.seal("acme", "stripe", b"sk_live_123").expect("seal");
        assert!(!sealed.contains(&hex::encode(b"sk_live_123")));
        assert_eq!(key.open("acme", "stripe", &sealed).unwrap(), b"sk_live_123");
        assert!(key.open("globex", "stripe", &sealed).is_err(), "bound to the tenant");
        assert!(key.open("acme", "other", &sealed).is_err(), "bound to the name");
        let other = SecretKey::from_hex(&"22".repeat(32)).unwrap();
        assert!(other.open("acme", "stripe", &sealed).is_err());
        assert_ne!(
            key.seal("acme", "stripe", b"x").expect("seal"),
            key.seal("acme", "stripe", b"x").expect("seal"),
            "fresh nonces"
        );
    }

    #[test]
    fn deployments_are_parsed_and_bounded() {
        let d = Deployment::parse(
            &["POST https://api.example.com/v1/*".into(), "GET https://echo.example.com/*".into()],
            &["stripe@https://api.example.com/v1/*".into(), "stripe@https://backup.example.com/*".into()],
            &["region=eu".into()],
            false,
        )
        .unwrap();
        assert_eq!(d.settings["region"], "eu");
        assert_eq!(d.secrets, ["stripe"]);
        assert_eq!(d.bindings["stripe"].len(), 2, "bound to two destinations");
        let unbound = Deployment::parse(&[], &["stripe".into()], &[], false).unwrap_err();
        assert!(unbound.to_string().contains("stripe@RULE"), "{unbound}");
        assert!(Deployment::parse(&[], &["stripe@api.example.com".into()], &[], false).is_err(), "a rule");
        // A deployment stored before bindings reads as it was, its secrets bound to none.
        let legacy: Deployment = serde_json::from_str(
            r#"{"allow":[],"secrets":["stripe"],"settings":{},"secrets_in_body":false,"max_running":null}"#,
        )
        .unwrap();
        assert!(legacy.bindings.is_empty() && legacy.secrets == ["stripe"]);
        assert!(!serde_json::to_string(&legacy).unwrap().contains("bindings"), "not stored when empty");
        assert!(Deployment::parse(&["api.example.com".into()], &[], &[], false).is_err());
        assert!(Deployment::parse(&[], &["bad name@https://a.example/".into()], &[], false).is_err());
        assert!(Deployment::parse(&[], &[], &["novalue".into()], false).is_err());
        assert!(Deployment::default().is_empty());
    }
}
