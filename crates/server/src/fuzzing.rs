//! Entry points for the fuzz targets in `fuzz/` (not part of the server's API).

use hyper::Request;

use hearth_auth::AuthConfig;
use hearth_ground::rest::parse_request;

/// Runs the REST request parser on a request made of `method`, `uri` and `headers`, as hyper
/// would hand it over; parts that hyper itself would refuse are skipped. Returns whether the
/// parser accepted the request.
pub fn parse_rest_request(method: &[u8], uri: &str, headers: &[(&str, &[u8])]) -> bool {
    let mut builder = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let Ok(request) = builder.body(()) else {
        return false;
    };
    let (parts, ()) = request.into_parts();
    parse_request(&parts, &AuthConfig::development(), "default").is_ok()
}
