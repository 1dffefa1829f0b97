//! The management web UI: static files compiled into the binary (`crates/management/src/ui/`,
//! plain HTML, CSS and JavaScript modules: no framework, no build step, nothing fetched
//! from elsewhere, so it works offline) served at `/` beside the API.
//!
//! The files need no login: the page asks for a user and password and sends them to the
//! API as HTTP basic credentials, which the API checks. Every answer carries an `ETag`
//! (a hash of the file) with `Cache-Control: no-cache`, so a browser revalidates with
//! `If-None-Match` and gets a 304 until a new Ferry ships other files; the page itself
//! carries a Content-Security-Policy that allows only this origin's scripts, styles and
//! API (no inline script, no framing).
//!
//! A new page is a module in `ui/js/pages/`, a line in `ui/js/pages/index.js` and a line
//! in [`ASSETS`]; a test checks that every file the page imports is in [`ASSETS`].

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

/// One file of the UI.
struct Asset {
    /// The URL path it is served at.
    path: &'static str,
    /// Its content.
    body: &'static [u8],
    /// Its `Content-Type`.
    content_type: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Declares an [`Asset`] of the file `ui/$file` at `/$file`.
macro_rules! asset {
    ($file:literal, $content_type:expr) => {
        Asset {
            path: concat!("/", $file),
            body: include_bytes!(concat!("ui/", $file)),
            content_type: $content_type,
        }
    };
}

/// Every file of the UI; `/` is the page.
const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        body: include_bytes!("ui/index.html"),
        content_type: HTML,
    },
    asset!("app.css", CSS),
    asset!("js/core.js", JAVASCRIPT),
    asset!("js/app.js", JAVASCRIPT),
    asset!("js/pages/index.js", JAVASCRIPT),
    asset!("js/pages/overview.js", JAVASCRIPT),
    asset!("js/pages/queues.js", JAVASCRIPT),
    asset!("js/pages/queue.js", JAVASCRIPT),
    asset!("js/pages/exchanges.js", JAVASCRIPT),
    asset!("js/pages/connections.js", JAVASCRIPT),
    asset!("js/pages/kafka.js", JAVASCRIPT),
    asset!("js/pages/topic.js", JAVASCRIPT),
    asset!("js/pages/group.js", JAVASCRIPT),
    asset!("js/pages/share-group.js", JAVASCRIPT),
    asset!("js/pages/routes.js", JAVASCRIPT),
    asset!("js/pages/route.js", JAVASCRIPT),
];

/// The page's Content-Security-Policy: this origin only, no inline code, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The UI's routes (`GET` and `HEAD` of each file), to merge into the management router
/// outside its authentication.
pub(crate) fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    ASSETS.iter().fold(Router::new(), |router, asset| {
        let tag = entity_tag(asset.body);
        router.route(
            asset.path,
            get(move |request: HeaderMap| async move { respond(asset, &tag, &request) }),
        )
    })
}

/// A strong entity tag of `body`: the first 16 hex digits of its SHA-256, quoted.
fn entity_tag(body: &[u8]) -> HeaderValue {
    let digest = Sha256::digest(body);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    HeaderValue::try_from(format!("\"{hex}\"")).expect("hex digits make a valid header")
}

/// The file, or 304 Not Modified when the request's `If-None-Match` names its tag.
fn respond(asset: &Asset, tag: &HeaderValue, request: &HeaderMap) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::ETAG, tag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if asset.content_type == HTML {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    if matches_tag(request, tag) {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    (headers, asset.body).into_response()
}

/// Whether `If-None-Match` lists `tag` (or is `*`).
fn matches_tag(request: &HeaderMap, tag: &HeaderValue) -> bool {
    let Some(tag) = tag.to_str().ok() else {
        return false;
    };
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|candidate| candidate.trim().trim_start_matches("W/"))
        .any(|candidate| candidate == tag || candidate == "*")
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;
    use std::collections::BTreeSet;

    fn asset(path: &str) -> &'static Asset {
        ASSETS
            .iter()
            .find(|a| a.path == path)
            .unwrap_or_else(|| panic!("no asset at {path}"))
    }

    /// `reference` (relative to the file at `from`) as an absolute URL path.
    fn resolve(from: &str, reference: &str) -> String {
        let mut parts: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
        if !from.ends_with('/') {
            parts.pop();
        }
        for segment in reference.split('/') {
            match segment {
                "." => {}
                ".." => {
                    parts.pop();
                }
                name => parts.push(name),
            }
        }
        format!("/{}", parts.join("/"))
    }

    #[test]
    fn every_file_the_page_loads_is_served() {
        let html = Regex::new(r#"(?:src|href)="([^":]+)""#).unwrap();
        let import = Regex::new(r#"(?m)^import .* from '([^']+)';"#).unwrap();
        let mut wanted = BTreeSet::new();
        for asset in ASSETS {
            let text = std::str::from_utf8(asset.body).unwrap();
            let pattern = if asset.content_type == HTML {
                &html
            } else {
                &import
            };
            for found in pattern.captures_iter(text) {
                wanted.insert(resolve(asset.path, &found[1]));
            }
        }
        assert!(wanted.contains("/js/pages/overview.js"), "{wanted:?}");
        let served: BTreeSet<String> = ASSETS.iter().map(|a| a.path.to_owned()).collect();
        let missing: Vec<_> = wanted.difference(&served).collect();
        assert!(missing.is_empty(), "loaded but not in ASSETS: {missing:?}");
        let unused: Vec<_> = served.difference(&wanted).filter(|p| *p != "/").collect();
        assert!(unused.is_empty(), "in ASSETS but never loaded: {unused:?}");
    }

    #[test]
    fn content_types_follow_the_file_names() {
        for asset in ASSETS {
            let expected = match asset.path.rsplit_once('.').map(|(_, ext)| ext) {
                Some("js") => JAVASCRIPT,
                Some("css") => CSS,
                _ => HTML,
            };
            assert_eq!(asset.content_type, expected, "{}", asset.path);
        }
    }

    #[test]
    fn the_page_has_its_security_headers_and_scripts_do_not() {
        let page = asset("/");
        let answer = respond(page, &entity_tag(page.body), &HeaderMap::new());
        assert_eq!(answer.status(), StatusCode::OK);
        let headers = answer.headers();
        assert_eq!(headers[header::CONTENT_TYPE], HTML);
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
        let script = asset("/js/app.js");
        let answer = respond(script, &entity_tag(script.body), &HeaderMap::new());
        assert_eq!(answer.headers()[header::CONTENT_TYPE], JAVASCRIPT);
        assert_eq!(answer.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(
            answer
                .headers()
                .get(header::CONTENT_SECURITY_POLICY)
                .is_none()
        );
    }

    #[test]
    fn a_known_tag_gets_not_modified_and_another_the_file() {
        let css = asset("/app.css");
        let tag = entity_tag(css.body);
        assert_eq!(tag.len(), 18, "{tag:?}");
        let mut request = HeaderMap::new();
        request.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"0000000000000000\", {}", tag.to_str().unwrap()))
                .unwrap(),
        );
        let answer = respond(css, &tag, &request);
        assert_eq!(answer.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(answer.headers()[header::ETAG], tag);

        request.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"0000000000000000\""),
        );
        let answer = respond(css, &tag, &request);
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.headers()[header::CONTENT_TYPE], CSS);
    }

    #[test]
    fn every_file_has_its_own_tag() {
        let tags: BTreeSet<_> = ASSETS
            .iter()
            .map(|a| entity_tag(a.body).to_str().unwrap().to_owned())
            .collect();
        assert_eq!(tags.len(), ASSETS.len());
    }
}
