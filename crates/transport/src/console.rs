//! The web console at `/_/console/`: its files are embedded in the binary (the page, its
//! scripts and styles, and the vendored modular `firebase` SDK it uses for the live tree), so
//! the server needs no second process and no files beside it.
//!
//! The page holds only code, so it is public; everything it reads or changes goes through
//! admin-only endpoints: REST with the admin token, `/.settings/rules.json`,
//! `/.admin/databases`, `/metrics`, and the realtime protocol with the token as its `auth`.
//! Its one endpoint of its own, the rules check, is admin-only too.

use std::sync::LazyLock;

use base64::Engine;
use hyper::body::Incoming;
use hyper::http::request::Parts;
use hyper::{Method, Response};
use sha2::{Digest, Sha256};

use hearth_config::ServeConfig;
use hearth_edge::http_body::HearthBody;
use hearth_edge::request_body::read_body;
use hearth_ground::rest::{require_admin, RestResponse};

/// Where the console lives; everything under it is the console's.
pub const CONSOLE_PATH: &str = "/_/console";

/// The endpoint that compiles a rules document without installing it: `POST` the text,
/// get `{"status":"ok"}` or a 400 whose error starts with `line L, column C:`, exactly as
/// `PUT /.settings/rules.json` would answer.
pub const RULES_CHECK_PATH: &str = "/_/console/rules-check";

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// A file of the console, named by its path below [`CONSOLE_PATH`].
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../console/", $name)),
        }
    };
}

/// Every file the console serves. The SDK files are copied unchanged from the `firebase` npm
/// package (see `console/vendor/README.md`); the page maps their CDN import to the copy.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("console.css", CSS),
    asset!("console.js", JAVASCRIPT),
    asset!("api.js", JAVASCRIPT),
    asset!("tree.js", JAVASCRIPT),
    asset!("editor.js", JAVASCRIPT),
    asset!("rules.js", JAVASCRIPT),
    asset!("audit.js", JAVASCRIPT),
    asset!("triggers.js", JAVASCRIPT),
    asset!("metrics.js", JAVASCRIPT),
    asset!("charts.js", JAVASCRIPT),
    asset!("charts-panel.js", JAVASCRIPT),
    asset!("profiler.js", JAVASCRIPT),
    asset!("diff.js", JAVASCRIPT),
    asset!("vendor/firebase-app.js", JAVASCRIPT),
    asset!("vendor/firebase-database.js", JAVASCRIPT),
    asset!("vendor/LICENSE", TEXT),
    asset!("vendor/README.md", TEXT),
];

/// The page's only inline script is its import map; the policy allows exactly that script by
/// its hash, so no injected inline script can run. Connections go to this origin only (the
/// realtime WebSocket included).
static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let index = ASSETS
        .iter()
        .find(|asset| asset.name == "index.html")
        .map_or(&b""[..], |asset| asset.body);
    let hash = import_map(index).map(|map| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(map.as_bytes()))
    });
    let script_src = match hash {
        Some(hash) => format!("'self' 'sha256-{hash}'"),
        None => "'self'".to_owned(),
    };
    format!(
        "default-src 'none'; script-src {script_src}; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
});

/// The text of the page's `<script type="importmap">`, as the browser hashes it.
fn import_map(html: &[u8]) -> Option<&str> {
    let html = std::str::from_utf8(html).ok()?;
    let open = "<script type=\"importmap\">";
    let start = html.find(open)? + open.len();
    let length = html[start..].find("</script>")?;
    Some(&html[start..start + length])
}

/// Answers a request for the console, or `None` when the path is not the console's.
pub async fn answer(
    config: &ServeConfig,
    parts: &Parts,
    body: &mut Option<Incoming>,
) -> Option<Response<HearthBody>> {
    let rest = parts.uri.path().strip_prefix(CONSOLE_PATH)?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    if parts.uri.path() == RULES_CHECK_PATH {
        return Some(check_rules(config, parts, body).await.into_http());
    }
    if parts.method != Method::GET && parts.method != Method::HEAD {
        return Some(
            RestResponse::error(405, "Method not allowed")
                .with_header("allow", "GET, HEAD")
                .into_http(),
        );
    }
    Some(static_file(rest).into_http())
}

/// The file at `rest` (the path after [`CONSOLE_PATH`]).
fn static_file(rest: &str) -> RestResponse {
    // Relative links in the page need the trailing slash.
    if rest.is_empty() {
        return RestResponse::empty(308).with_header("location", format!("{CONSOLE_PATH}/"));
    }
    let name = match rest.trim_start_matches('/') {
        "" => "index.html",
        name => name,
    };
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return RestResponse::error(404, format!("{CONSOLE_PATH}/{name} does not exist"));
    };
    RestResponse {
        status: 200,
        content_type: Some(asset.content_type),
        headers: Vec::new(),
        body: bytes::Bytes::from_static(asset.body),
    }
    .with_header("cache-control", "no-cache")
    .with_header("x-content-type-options", "nosniff")
    .with_header("referrer-policy", "no-referrer")
    .with_header("content-security-policy", CONTENT_SECURITY_POLICY.clone())
}

/// `POST` [`RULES_CHECK_PATH`]: compiles the body as a rules document and installs nothing.
async fn check_rules(
    config: &ServeConfig,
    parts: &Parts,
    body: &mut Option<Incoming>,
) -> RestResponse {
    if parts.method != Method::POST {
        return RestResponse::error(405, "Method not allowed").with_header("allow", "POST");
    }
    if let Err(refused) = require_admin(parts, &config.auth) {
        return refused;
    }
    let Some(incoming) = body.as_mut() else {
        return RestResponse::error(400, "the rules are missing");
    };
    let bytes = match read_body(
        incoming,
        &parts.headers,
        hearth_rules::MAX_RULES_BYTES,
        &config.http.bodies,
    )
    .await
    {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    *body = None;
    check_text(bytes)
}

fn check_text(bytes: Vec<u8>) -> RestResponse {
    let Ok(text) = String::from_utf8(bytes) else {
        return RestResponse::error(400, "the rules are not UTF-8 text");
    };
    match hearth_rules::Rules::parse(&text) {
        Ok(_) => RestResponse::json(200, "{\"status\":\"ok\"}"),
        Err(error) => RestResponse::error(400, error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_path_redirects_to_the_directory() {
        let response = static_file("");
        assert_eq!(response.status, 308);
        assert_eq!(
            response.headers,
            vec![("location", "/_/console/".to_owned())]
        );
    }

    #[test]
    fn the_page_and_its_files_are_served_with_their_types() {
        let index = static_file("/");
        assert_eq!(index.status, 200);
        assert_eq!(index.content_type, Some(HTML));
        assert!(index.body.starts_with(b"<!doctype html>"));
        let sdk = static_file("/vendor/firebase-database.js");
        assert_eq!(sdk.content_type, Some(JAVASCRIPT));
        assert!(sdk.body.len() > 100_000, "the whole SDK module");
        assert_eq!(static_file("/nope.js").status, 404);
        assert_eq!(static_file("/../Cargo.toml").status, 404);
    }

    #[test]
    fn every_module_the_page_imports_is_served() {
        for asset in ASSETS.iter().filter(|a| a.content_type == JAVASCRIPT) {
            let text = std::str::from_utf8(asset.body).expect("UTF-8");
            for import in text.split("from '").skip(1) {
                let Some(target) = import.split('\'').next() else {
                    continue;
                };
                let Some(local) = target.strip_prefix("./") else {
                    continue;
                };
                let dir = asset.name.rsplit_once('/').map_or("", |(dir, _)| dir);
                let path = if dir.is_empty() {
                    local.to_owned()
                } else {
                    format!("{dir}/{local}")
                };
                assert!(
                    ASSETS.iter().any(|a| a.name == path),
                    "{} imports {target}, which is not served",
                    asset.name
                );
            }
        }
    }

    #[test]
    fn the_policy_allows_the_import_map_by_its_hash_and_nothing_else_inline() {
        let index = static_file("/");
        let map = import_map(&index.body).expect("the page has an import map");
        assert!(
            map.contains("./vendor/firebase-app.js"),
            "the SDK's CDN import is mapped to the copy: {map}"
        );
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(map.as_bytes()));
        let policy = index
            .headers
            .iter()
            .find(|(name, _)| *name == "content-security-policy")
            .map(|(_, value)| value.clone())
            .expect("a policy");
        assert!(
            policy.contains(&format!("script-src 'self' 'sha256-{hash}';")),
            "{policy}"
        );
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        let html = std::str::from_utf8(&index.body).expect("UTF-8");
        assert_eq!(
            html.matches("<script").count(),
            2,
            "the import map and the module"
        );
    }

    #[test]
    fn a_rules_check_answers_like_a_rules_upload() {
        let ok = check_text(br#"{"rules": {".read": true}}"#.to_vec());
        assert_eq!(ok.status, 200);
        let refused = check_text(b"{\n \"rules\": {\".read\": \"auth.uid ==\"}}".to_vec());
        assert_eq!(refused.status, 400);
        let message = refused.error_message().expect("an error");
        assert!(message.starts_with("line 2, column "), "{message}");
        assert_eq!(check_text(vec![0xff]).status, 400);
    }
}
