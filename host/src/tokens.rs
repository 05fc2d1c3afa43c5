//! API tokens: random, shown once, stored only as SHA-256 hashes.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new token: `spt_` and 32 random bytes, hex.
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("spt_{}", hex::encode(bytes))
}

/// What the store keeps of a token.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert!(a.starts_with("spt_") && a.len() == 68);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), a);
    }
}
