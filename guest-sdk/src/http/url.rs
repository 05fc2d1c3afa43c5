//! The parts of a URL `wasi:http` wants: scheme, authority, path with query.
//!
//! Only as much parsing as splitting needs: the host checks the destination against its
//! policy and refuses what it cannot use, so a full URL parser would buy nothing.

use wasip2::http::types::Scheme;

use super::HttpError;

/// A URL split the way an `outgoing-request` takes it.
#[derive(Debug, Clone)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code, reason = "off wasm only the parse's verdict is used"))]
pub(crate) struct Target {
    pub(crate) scheme: Scheme,
    /// `host` or `host:port`.
    pub(crate) authority: String,
    /// From the first `/` on, fragment dropped; `/` when the URL has no path.
    pub(crate) path_with_query: String,
}

/// Splits `scheme://authority/path?query#fragment`.
pub(crate) fn parse(url: &str) -> Result<Target, HttpError> {
    let invalid = |why: &str| Err(HttpError::InvalidRequest(format!("URL {url:?}: {why}")));
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return invalid("contains whitespace or control characters");
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return invalid("no scheme (expected `http://` or `https://`)");
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        "" => return invalid("empty scheme"),
        other if other.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) => Scheme::Other(other.into()),
        _ => return invalid("malformed scheme"),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    if authority.is_empty() {
        return invalid("no host");
    }
    // The host would pass credentials on in the clear and log them with the URL: secrets
    // go in headers, as `config::secret` placeholders.
    if authority.contains('@') {
        return invalid("credentials in the URL (put them in a header)");
    }
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let path_with_query = if rest.starts_with('/') { rest.to_owned() } else { format!("/{rest}") };
    Ok(Target { scheme, authority: authority.to_owned(), path_with_query })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, String, String) {
        let target = parse(url).expect("valid URL");
        let scheme = match target.scheme {
            Scheme::Http => "http".to_owned(),
            Scheme::Https => "https".to_owned(),
            Scheme::Other(other) => other,
        };
        (scheme, target.authority, target.path_with_query)
    }

    #[test]
    fn splits_scheme_authority_and_path_with_query() {
        assert_eq!(
            parts("https://api.example.com/v1/x?y=1"),
            ("https".into(), "api.example.com".into(), "/v1/x?y=1".into())
        );
        assert_eq!(parts("HTTP://127.0.0.1:8080"), ("http".into(), "127.0.0.1:8080".into(), "/".into()));
        assert_eq!(parts("http://[::1]:80?q"), ("http".into(), "[::1]:80".into(), "/?q".into()));
        assert_eq!(parts("http://h/p#frag"), ("http".into(), "h".into(), "/p".into()));
    }

    #[test]
    fn refuses_what_cannot_be_sent() {
        for url in ["api.example.com/x", "://h/x", "http:///x", "http://user:pw@h/x", "http://h/a b", "ht tp://h/"] {
            assert!(matches!(parse(url), Err(HttpError::InvalidRequest(_))), "{url}");
        }
    }
}
