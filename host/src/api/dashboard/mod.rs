//! The dashboard: the files of this directory, compiled into the binary and served as
//! written — `index.html` at `/`, every other file at `/ui/<name>` — with no build step,
//! so `cargo build` needs nothing but Rust. It signs in with a token kept in the tab's
//! session and reads only the public `/v1` API with it, so it can show nothing that
//! token could not read itself (README.md here lists its pages).

use std::io::Write as _;
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The files, by name, with their content types.
const FILES: &[(&str, &str, &str)] = &[
    ("index.html", "text/html; charset=utf-8", include_str!("index.html")),
    ("style.css", "text/css; charset=utf-8", include_str!("style.css")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_str!("api.js")),
    ("ui.js", "text/javascript; charset=utf-8", include_str!("ui.js")),
    ("jobs.js", "text/javascript; charset=utf-8", include_str!("jobs.js")),
    ("bulk.js", "text/javascript; charset=utf-8", include_str!("bulk.js")),
    ("job.js", "text/javascript; charset=utf-8", include_str!("job.js")),
    ("kinds.js", "text/javascript; charset=utf-8", include_str!("kinds.js")),
    ("queues.js", "text/javascript; charset=utf-8", include_str!("queues.js")),
    ("schedules.js", "text/javascript; charset=utf-8", include_str!("schedules.js")),
    ("operator.js", "text/javascript; charset=utf-8", include_str!("operator.js")),
];

/// The page's own policy, as its `<meta>` says it too: nothing but this origin.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                      img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the page.
pub(super) async fn index(request: HeaderMap) -> Response {
    serve("index.html", &request)
}

/// `GET /ui/{name}`: one of its files.
pub(super) async fn asset(Path(name): Path<String>, request: HeaderMap) -> Response {
    serve(&name, &request)
}

/// Each file gzipped, made once: the files are about a sixth of their size gzipped,
/// which a browser on a slow link to a host feels on every first load.
fn gzipped(index: usize) -> &'static [u8] {
    static GZIPPED: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    let all = GZIPPED.get_or_init(|| {
        FILES
            .iter()
            .map(|(_, _, body)| {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                // Writing to a Vec cannot fail.
                let _ = encoder.write_all(body.as_bytes());
                encoder.finish().unwrap_or_default()
            })
            .collect()
    });
    &all[index]
}

/// Whether the request's `Accept-Encoding` takes gzip (and does not refuse it, `q=0`).
fn accepts_gzip(request: &HeaderMap) -> bool {
    request.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |item| {
            let mut parts = item.split(';').map(str::trim);
            let coding = parts.next().unwrap_or_default();
            let refused = parts.any(|p| p.strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()) == Some(0.0));
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        },
    )
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(index) = FILES.iter().position(|(file, _, _)| *file == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let (_, content_type, body) = FILES[index];
    let gzip = accepts_gzip(request);
    let mut response = if gzip { gzipped(index).into_response() } else { body.into_response() };
    let headers = response.headers_mut();
    if gzip {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // A new host's files replace the old ones at once: no stale page after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A browser that takes gzip gets each file gzipped (and whole once inflated); a
    /// client that does not, or refuses it, gets the file as written.
    #[test]
    fn files_go_gzipped_to_whoever_takes_gzip() {
        use std::io::Read as _;
        let asking = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
            headers
        };
        for (value, takes) in [
            ("gzip, deflate, br", true),
            ("br;q=1.0, gzip;q=0.8", true),
            ("gzip;q=0", false),
            ("gzip; q=0.0", false),
            ("identity", false),
        ] {
            assert_eq!(accepts_gzip(&asking(value)), takes, "{value}");
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
        let total: usize = FILES.iter().map(|(_, _, body)| body.len()).sum();
        let sent: usize = (0..FILES.len()).map(|i| gzipped(i).len()).sum();
        assert!(sent * 3 < total, "gzipped {sent} of {total} bytes");
        for (i, (name, _, body)) in FILES.iter().enumerate() {
            let mut inflated = String::new();
            flate2::read::GzDecoder::new(gzipped(i)).read_to_string(&mut inflated).unwrap();
            assert_eq!(inflated, *body, "{name}");
        }
        let response = serve("app.js", &asking("gzip"));
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert!(serve("app.js", &HeaderMap::new()).headers().get(header::CONTENT_ENCODING).is_none());
    }

    /// Every file the page loads is served, and nothing the directory lacks is.
    #[test]
    fn the_page_loads_only_files_it_is_served() {
        let index = FILES[0].2;
        for (name, _, body) in FILES {
            if name.ends_with(".js") {
                assert!(!body.is_empty(), "{name}");
            }
        }
        for referenced in index.split("=\"/ui/").skip(1).filter_map(|rest| rest.split('"').next()) {
            assert!(FILES.iter().any(|(name, _, _)| *name == referenced), "{referenced} is not served");
        }
        for (name, _, body) in FILES.iter().filter(|(name, _, _)| name.ends_with(".js")) {
            for import in body.split("from './").skip(1).filter_map(|rest| rest.split('\'').next()) {
                assert!(
                    FILES.iter().any(|(file, _, _)| *file == import),
                    "{name} imports {import}, which is not served"
                );
            }
        }
    }
}
