//! The dashboard: the files of this directory, compiled into the binary and served as
//! written — `index.html` at `/`, every other file at `/ui/<name>` — with no build step,
//! so `cargo build` needs nothing but Rust. It signs in with a token kept in the tab's
//! session and reads only the public `/v1` API with it, so it can show nothing that
//! token could not read itself (README.md here lists its pages).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
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
pub(super) async fn index() -> Response {
    serve("index.html")
}

/// `GET /ui/{name}`: one of its files.
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    serve(&name)
}

fn serve(name: &str) -> Response {
    let Some((_, content_type, body)) = FILES.iter().find(|(file, _, _)| *file == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mut response = (*body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // A new host's files replace the old ones at once: no stale page after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

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
