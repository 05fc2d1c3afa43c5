//! Which outbound requests a step may make: deny by default, three layers that must all
//! allow a request (the operator's, the tenant's, the kind deployment's), then a check
//! of the addresses its host name resolves to.
//!
//! A rule is `[METHOD ]scheme://host[:port][/path]`: the method (or `*`, or nothing for
//! any), an explicit `http` or `https`, a host that is exact, `*.example.com` (any
//! subdomain, not the apex) or `*`, a port (or `*`; none means the scheme's default), and
//! a path pattern where `*` matches any run of characters (none means any path). Query
//! strings are never matched.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// A rule that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("outbound rule `{rule}`: {why}")]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// One allowed destination pattern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rule {
    text: String,
    method: Option<String>,
    scheme: String,
    host: HostPattern,
    port: Option<u16>,
    any_port: bool,
    path: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    Any,
    Exact(String),
    SubdomainOf(String),
}

/// Longest rule accepted, in bytes.
const MAX_RULE_LEN: usize = 1024;

impl Rule {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let err = |why| RuleError { rule: text.to_owned(), why };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.len() > MAX_RULE_LEN {
            return Err(err("empty or over 1024 bytes"));
        }
        let (method, url) = match trimmed.split_once(char::is_whitespace) {
            Some((method, url)) => (Some(method), url.trim()),
            None => (None, trimmed),
        };
        let method = match method {
            None | Some("*") => None,
            Some(m) if m.chars().all(|c| c.is_ascii_alphabetic()) => Some(m.to_ascii_uppercase()),
            Some(_) => return Err(err("the method must be a word such as GET or POST, or *")),
        };
        let (scheme, rest) =
            url.split_once("://").ok_or_else(|| err("the scheme must be explicit: http:// or https://"))?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(err("the scheme must be http or https"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], Some(&rest[i..])),
            None => (rest, None),
        };
        if path.is_some_and(|p| p.contains('?') || p.contains('#')) {
            return Err(err("a rule matches paths, not queries or fragments"));
        }
        let (host, port) = split_host_port(authority).ok_or_else(|| err("the host or port is malformed"))?;
        let (port, any_port) = match port {
            None => (None, false),
            Some("*") => (None, true),
            Some(p) => (Some(p.parse::<u16>().map_err(|_| err("the port must be a number or *"))?), false),
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.is_empty() || domain.contains('*') {
                return Err(err("a wildcard host is `*.` followed by a domain"));
            }
            HostPattern::SubdomainOf(domain.to_owned())
        } else if host.is_empty() || host.contains('*') {
            return Err(err("the host is empty or has a wildcard other than a leading `*.`"));
        } else {
            HostPattern::Exact(host)
        };
        Ok(Self { text: trimmed.to_owned(), method, scheme, host, port, any_port, path: path.map(str::to_owned) })
    }

    /// Whether this rule allows `request`.
    pub fn allows(&self, request: &Target) -> bool {
        if self.method.as_deref().is_some_and(|m| m != request.method) || self.scheme != request.scheme {
            return false;
        }
        let port_ok = self.any_port || self.port.unwrap_or_else(|| default_port(&self.scheme)) == request.port;
        let host_ok = match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(h) => *h == request.host,
            HostPattern::SubdomainOf(d) => {
                request.host.len() > d.len() + 1
                    && request.host.ends_with(d.as_str())
                    && request.host.as_bytes()[request.host.len() - d.len() - 1] == b'.'
            }
        };
        let path_ok = self.path.as_deref().is_none_or(|pattern| glob(pattern, &request.path));
        port_ok && host_ok && path_ok
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl TryFrom<String> for Rule {
    type Error = RuleError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl From<Rule> for String {
    fn from(rule: Rule) -> Self {
        rule.text
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host[:port]`, with an IPv6 literal in brackets.
fn split_host_port(authority: &str) -> Option<(&str, Option<&str>)> {
    if authority.contains('@') {
        return None;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port))),
        Some(_) => None,
        None => Some((authority, None)),
    }
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// What a request is checked by: its method, scheme, host, port and path (no query).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The method exactly as it is sent: methods are case-sensitive tokens (RFC 9110),
    /// so `post` is not `POST` and matches only a rule for any method.
    pub method: String,
    /// `http` or `https`.
    pub scheme: String,
    /// Lower-case host name or IP literal (no brackets).
    pub host: String,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
    /// The path, without the query, normalised as RFC 3986 says (percent-escapes of
    /// unreserved characters decoded, dot segments removed): what rules match and what
    /// is sent, so `/hook/../admin` is `/admin` for both.
    pub path: String,
    /// The query with its `?`, or empty; sent as the guest wrote it, never matched.
    pub query: String,
}

impl Target {
    /// The target of a request to `scheme://authority/path_and_query`.
    pub fn new(method: &str, scheme: &str, authority: &str, path_and_query: &str) -> Option<Self> {
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            None => default_port(&scheme),
            Some(p) => p.parse().ok()?,
        };
        if host.is_empty() {
            return None;
        }
        let before_fragment = path_and_query.split('#').next().unwrap_or("");
        let (path, query) = match before_fragment.find('?') {
            Some(i) => before_fragment.split_at(i),
            None => (before_fragment, ""),
        };
        let path = normalize_path(path)?;
        Some(Self {
            method: method.to_owned(),
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            path,
            query: query.into(),
        })
    }

    /// The path and query as sent on the wire (origin form).
    pub fn path_and_query(&self) -> String {
        format!("{}{}", self.path, self.query)
    }
}

/// `path` as RFC 3986 normalises it: percent-escapes of unreserved characters decoded
/// (`%2e` is `.`, `%7e` is `~`), other escapes in upper case, and dot segments removed
/// (section 5.2.4; `..` never climbs above the root). None for what a server could read
/// as another path than the one matched: an escaped `/` or `\`, a raw `\`, a malformed
/// escape, or a path that does not start with `/`.
fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return Some("/".to_owned());
    }
    if !path.starts_with('/') || path.contains('\\') {
        return None;
    }
    let bytes = path.as_bytes();
    let mut decoded = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            decoded.push(char::from(bytes[i]));
            i += 1;
            continue;
        }
        let hex = path.get(i + 1..i + 3)?;
        let byte = u8::from_str_radix(hex, 16).ok()?;
        match byte {
            b'/' | b'\\' => return None,
            b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => decoded.push(char::from(b)),
            b => decoded.push_str(&format!("%{b:02X}")),
        }
        i += 3;
    }
    if !decoded.is_ascii() {
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = decoded[1..].split('/').collect();
    for (n, segment) in segments.iter().enumerate() {
        let last = n + 1 == segments.len();
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            other => out.push(other),
        }
    }
    Some(format!("/{}", out.join("/")))
}

/// One layer of the policy: a list of rules, any of which may allow a request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rules(pub Vec<Rule>);

impl Rules {
    /// Parses each of `texts`.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Self, RuleError> {
        texts.iter().map(|t| Rule::parse(t.as_ref())).collect::<Result<_, _>>().map(Self)
    }

    /// Whether some rule allows `target`.
    pub fn allow(&self, target: &Target) -> bool {
        self.0.iter().any(|rule| rule.allows(target))
    }
}

/// The operator's layer: its rules, and which addresses names may resolve to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OperatorPolicy {
    /// Destinations any tenant may be allowed (empty: none; outbound is off).
    pub allow: Rules,
    /// Refuse loopback, private, link-local (metadata), unspecified and other special
    /// addresses, whatever the rules say, unless listed in `allow_cidrs`.
    pub block_private: bool,
    /// Special addresses the operator allows after all, e.g. `10.1.0.0/16`.
    pub allow_cidrs: Vec<IpNet>,
}

impl Default for OperatorPolicy {
    fn default() -> Self {
        Self { allow: Rules::default(), block_private: true, allow_cidrs: Vec::new() }
    }
}

impl OperatorPolicy {
    /// Whether a request may connect to `addr`.
    pub fn address_allowed(&self, addr: IpAddr) -> bool {
        if !self.block_private {
            return true;
        }
        let allowed = |addr: IpAddr| !is_special(addr) || self.allow_cidrs.iter().any(|net| net.contains(&addr));
        let addr = canonical(addr);
        // A translation form (NAT64, 6to4, Teredo, IPv4-compatible) reaches the IPv4
        // address inside it: that address answers to the IPv4 rules as well.
        allowed(addr) && embedded_ipv4(addr).into_iter().flatten().all(|v4| allowed(IpAddr::V4(v4)))
    }
}

/// Why a request was denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    /// No operator rule allows it.
    Operator,
    /// No rule of the tenant allows it.
    Tenant,
    /// No rule of the kind's deployment allows it.
    Kind,
    /// Its host resolves to an address the operator blocks.
    Address,
    /// The request is not an absolute http(s) URL.
    Malformed,
}

impl Denial {
    /// The layer that refused, as recorded.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator-policy",
            Self::Tenant => "tenant-policy",
            Self::Kind => "kind-policy",
            Self::Address => "blocked-address",
            Self::Malformed => "malformed-request",
        }
    }
}

/// The three layers together, for one step of one kind of one tenant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// The operator's.
    pub operator: OperatorPolicy,
    /// The tenant's.
    pub tenant: Rules,
    /// The kind deployment's.
    pub kind: Rules,
}

impl Policy {
    /// Whether every layer allows `target` (its addresses are checked once resolved).
    pub fn check(&self, target: &Target) -> Result<(), Denial> {
        if !self.operator.allow.allow(target) {
            return Err(Denial::Operator);
        }
        // The kind's layer before the tenant's: a deployment that allows nothing is the
        // likelier reason, and the one its author can change.
        if !self.kind.allow(target) {
            return Err(Denial::Kind);
        }
        if !self.tenant.allow(target) {
            return Err(Denial::Tenant);
        }
        Ok(())
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// Addresses a step must not reach unless the operator says so: every range of IANA's
/// IPv4 and IPv6 special-purpose address registries that is not globally reachable
/// (loopback, private, shared, link-local with the cloud metadata service, unspecified,
/// broadcast, multicast, documentation, benchmarking, reserved), and the IPv6 ranges
/// that carry or reach an IPv4 address by translation or tunnel (IPv4-compatible,
/// IPv4-translated, 6to4, Teredo, local-use NAT64), deprecated site-local among them.
pub fn is_special(addr: IpAddr) -> bool {
    match canonical(addr) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a, b, c) == (192, 0, 0)
                || (a, b, c) == (192, 88, 99)
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_multicast()
                || s[..6] == [0; 6] // ::/96: unspecified, loopback, IPv4-compatible
                || (s[..4] == [0; 4] && s[4] == 0xffff && s[5] == 0) // ::ffff:0:0:0/96
                || (s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001) // 64:ff9b:1::/48
                || (s[0] == 0x0100 && s[1..4] == [0; 3]) // 100::/64
                || (s[0] == 0x2001 && s[1] < 0x0200) // 2001::/23: Teredo, benchmarking, ORCHID
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || s[0] == 0x2002 // 6to4
                || (s[0] & 0xfff0) == 0x3ff0 // 3fff::/20, documentation
                || s[0] == 0x5f00 // SRv6 SIDs
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xffc0) == 0xfec0 // site-local
        }
    }
}

/// The IPv4 addresses an IPv6 address carries: the last 32 bits of NAT64
/// (`64:ff9b::/96`, `64:ff9b:1::/48`), IPv4-compatible and IPv4-translated forms; bits
/// 16-47 of 6to4; Teredo's server (bits 32-63) and its client (bits 96-127, inverted).
fn embedded_ipv4(addr: IpAddr) -> [Option<std::net::Ipv4Addr>; 2] {
    let IpAddr::V6(v6) = addr else { return [None, None] };
    let bits = u128::from(v6);
    let v4 = |n: u128| Some(std::net::Ipv4Addr::from((n & 0xffff_ffff) as u32));
    let s = v6.segments();
    match s {
        [0x0064, 0xff9b, ..] => [v4(bits), None],
        [0, 0, 0, 0, 0, 0, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => [v4(bits), None],
        [0x2002, ..] => [v4(bits >> 80), None],
        [0x2001, 0, ..] => [v4(bits >> 64), v4(!bits)],
        _ => [None, None],
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn target(method: &str, url: &str) -> Target {
        let (scheme, rest) = url.split_once("://").unwrap();
        let i = rest.find('/').unwrap_or(rest.len());
        Target::new(method, scheme, &rest[..i], if i == rest.len() { "/" } else { &rest[i..] }).unwrap()
    }

    fn allows(rule: &str, method: &str, url: &str) -> bool {
        Rule::parse(rule).unwrap().allows(&target(method, url))
    }

    #[test]
    fn rules_match_method_scheme_host_port_and_path() {
        let rule = "POST https://api.example.com/v1/*";
        assert!(allows(rule, "POST", "https://api.example.com/v1/charges?amount=3"));
        assert!(allows(rule, "POST", "https://API.example.com:443/v1/x/y"));
        assert!(!allows(rule, "post", "https://api.example.com/v1/x"), "methods are case-sensitive tokens");
        assert!(allows("https://api.example.com", "post", "https://api.example.com/"), "a rule for any method");
        assert!(!allows(rule, "GET", "https://api.example.com/v1/charges"));
        assert!(!allows(rule, "POST", "http://api.example.com/v1/charges"), "schemes are explicit");
        assert!(!allows(rule, "POST", "https://api.example.com:8443/v1/charges"), "the default port only");
        assert!(!allows(rule, "POST", "https://api.example.com/v2/charges"));
        assert!(!allows(rule, "POST", "https://evil.api.example.com/v1/charges"));
        assert!(allows("https://*.example.com", "GET", "https://a.b.example.com/"));
        assert!(!allows("https://*.example.com", "GET", "https://example.com/"), "not the apex");
        assert!(!allows("https://*.example.com", "GET", "https://badexample.com/"));
        assert!(allows("* http://127.0.0.1:*/hook", "PUT", "http://127.0.0.1:9999/hook"));
        assert!(!allows("* http://127.0.0.1:*/hook", "PUT", "http://127.0.0.1:9999/hook/more"));
        assert!(allows("GET http://[::1]:8080", "GET", "http://[::1]:8080/x"));
        assert!(allows("http://*", "DELETE", "http://anything.test/"));
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            "",
            "api.example.com",
            "ftp://x",
            "GET http://a*b.com",
            "https://*.",
            "https://x:port",
            "G-T http://x",
            "https://x/a?b",
        ] {
            assert!(Rule::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn every_layer_must_allow() {
        let all = Rules::parse(&["* https://*"]).unwrap();
        let policy = Policy {
            operator: OperatorPolicy { allow: all.clone(), ..OperatorPolicy::default() },
            tenant: all.clone(),
            kind: Rules::parse(&["GET https://api.example.com"]).unwrap(),
        };
        assert_eq!(policy.check(&target("GET", "https://api.example.com/x")), Ok(()));
        assert_eq!(policy.check(&target("POST", "https://api.example.com/x")), Err(Denial::Kind));
        let closed = Policy { tenant: Rules::default(), ..policy.clone() };
        assert_eq!(closed.check(&target("GET", "https://api.example.com/x")), Err(Denial::Tenant));
        let off = Policy { operator: OperatorPolicy::default(), ..policy };
        assert_eq!(off.check(&target("GET", "https://api.example.com/x")), Err(Denial::Operator));
    }

    #[test]
    fn special_addresses_are_blocked_unless_allowed_by_cidr() {
        let operator = OperatorPolicy::default();
        for addr in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!operator.address_allowed(addr.parse().unwrap()), "{addr} allowed");
        }
        for addr in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "8.8.8.8"] {
            assert!(operator.address_allowed(addr.parse().unwrap()), "{addr} blocked");
        }
        let lab = OperatorPolicy { allow_cidrs: vec!["127.0.0.0/8".parse().unwrap()], ..OperatorPolicy::default() };
        assert!(lab.address_allowed("127.0.0.1".parse().unwrap()));
        assert!(!lab.address_allowed("10.0.0.1".parse().unwrap()));
        let open = OperatorPolicy { block_private: false, ..OperatorPolicy::default() };
        assert!(open.address_allowed("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn every_special_purpose_range_and_every_embedded_ipv4_address_is_checked() {
        let operator = OperatorPolicy::default();
        for addr in [
            "::7f00:1",           // IPv4-compatible (::/96): 127.0.0.1
            "::a9fe:a9fe",        // IPv4-compatible: the metadata service
            "::ffff:0:7f00:1",    // IPv4-translated (::ffff:0:0:0/96)
            "fec0::1",            // site-local (fec0::/10)
            "100::1",             // discard-only (100::/64)
            "2002:7f00:1::1",     // 6to4 (2002::/16) of 127.0.0.1
            "2002:808:808::1",    // 6to4 of a public address: still the 6to4 range
            "2001::1",            // Teredo (2001::/32), within 2001::/23
            "2001:2::1",          // benchmarking, within 2001::/23
            "2001:db8::1",        // documentation
            "3fff::1",            // documentation (3fff::/20)
            "5f00::1",            // SRv6 SIDs (5f00::/16)
            "64:ff9b:1::1",       // local-use NAT64 (64:ff9b:1::/48)
            "64:ff9b::7f00:1",    // NAT64 of 127.0.0.1
            "64:ff9b::a9fe:a9fe", // NAT64 of the metadata service
            "ff02::1",            // multicast
            "192.88.99.1",        // the 6to4 relay anycast
        ] {
            assert!(!operator.address_allowed(addr.parse().unwrap()), "{addr} allowed");
        }
        for addr in ["64:ff9b::808:808", "192.0.32.10", "2001:4860:4860::8888"] {
            assert!(operator.address_allowed(addr.parse().unwrap()), "{addr} blocked: it is public");
        }
        // An operator who allows a translation range still has the IPv4 address inside
        // checked against the IPv4 rules.
        let relays = OperatorPolicy {
            allow_cidrs: vec!["2002::/16".parse().unwrap(), "2001::/32".parse().unwrap()],
            ..OperatorPolicy::default()
        };
        assert!(relays.address_allowed("2002:808:808::1".parse().unwrap()));
        assert!(!relays.address_allowed("2002:7f00:1::1".parse().unwrap()), "6to4 of loopback");
        assert!(!relays.address_allowed("2002:a00:1::1".parse().unwrap()), "6to4 of 10.0.0.1");
        // Teredo: the server at bits 32-63, the client inverted at bits 96-127.
        assert!(relays.address_allowed("2001:0:808:808::f7f7:f7f7".parse().unwrap()), "to 8.8.8.8 via 8.8.8.8");
        assert!(!relays.address_allowed("2001:0:808:808::80ff:fefe".parse().unwrap()), "client 127.0.1.1");
        assert!(!relays.address_allowed("2001:0:7f00:1::f7f7:f7f7".parse().unwrap()), "server 127.0.0.1");
    }

    #[test]
    fn paths_are_matched_and_sent_as_rfc_3986_normalises_them() {
        let path = |p: &str| Target::new("POST", "http", "h", p).map(|t| t.path_and_query());
        assert_eq!(path("/hook/../admin").as_deref(), Some("/admin"));
        assert_eq!(path("/hook/%2e%2e/admin").as_deref(), Some("/admin"));
        assert_eq!(path("/hook/%2E./admin?x=1").as_deref(), Some("/admin?x=1"));
        assert_eq!(path("/hook/./a/b/..").as_deref(), Some("/hook/a/"));
        assert_eq!(path("/../../etc").as_deref(), Some("/etc"), "never above the root");
        assert_eq!(path("/hook/%7euser/a%2fb%20c").as_deref(), None, "an escaped slash");
        assert_eq!(path("/hook/%7euser/a%20c%c3%a9").as_deref(), Some("/hook/~user/a%20c%C3%A9"));
        assert_eq!(path("/hook/..%2f").as_deref(), None);
        assert_eq!(path("/hook/..%5cadmin").as_deref(), None, "an escaped backslash");
        assert_eq!(path("/hook/..\\admin").as_deref(), None, "a raw backslash");
        assert_eq!(path("/hook/%zz").as_deref(), None, "a malformed escape");
        assert_eq!(path("/hook/x?a=/../b#frag").as_deref(), Some("/hook/x?a=/../b"), "queries are not paths");
        assert_eq!(path("").as_deref(), Some("/"));
        let rule = "POST http://h/hook/*";
        for sneaky in ["/hook/../admin", "/hook/%2e%2e/admin", "/hook/%2E%2E/admin", "/hook/./../admin"] {
            assert!(!allows(rule, "POST", &format!("http://h{sneaky}")), "{sneaky} passed /hook/*");
        }
        assert!(allows(rule, "POST", "http://h/hook/./deliveries/../x"));
    }

    #[test]
    fn globs_match_runs_of_characters() {
        assert!(glob("/v1/*", "/v1/"));
        assert!(glob("/a/*/c", "/a/b/b/c"));
        assert!(!glob("/a/*/c", "/a/b/d"));
        assert!(glob("*", ""));
        assert!(!glob("/x", "/xy"));
    }
}
