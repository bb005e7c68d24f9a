//! A REST answer as plain data (it may come back from another shard), and its conversion into
//! an HTTP response.

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::json;

pub const JSON: &str = "application/json; charset=utf-8";
pub const JAVASCRIPT: &str = "application/javascript; charset=utf-8";

/// A complete answer.
#[derive(Debug, Clone)]
pub struct RestResponse {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl RestResponse {
    /// A JSON body.
    pub fn json(status: u16, body: impl Into<Bytes>) -> RestResponse {
        RestResponse {
            status,
            content_type: Some(JSON),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// No body (204, 304, preflights).
    pub fn empty(status: u16) -> RestResponse {
        RestResponse {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// `{"error": message}`, indented the way production writes its errors.
    pub fn error(status: u16, message: impl AsRef<str>) -> RestResponse {
        let mut body = Vec::with_capacity(message.as_ref().len() + 24);
        hearth_wire::write_value(&json!({ "error": message.as_ref() }), true, &mut body);
        body.push(b'\n');
        RestResponse::json(status, body)
    }

    /// The answer to a read that took longer than its `timeout` parameter allows.
    pub fn timed_out(timeout: std::time::Duration) -> RestResponse {
        RestResponse::error(
            400,
            format!("The read did not finish within the requested timeout of {timeout:?}."),
        )
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> RestResponse {
        self.headers.push((name, value.into()));
        self
    }

    /// The error message of an error answer (`{"error": ...}`), for tests and logs.
    pub fn error_message(&self) -> Option<String> {
        let value: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        value.get("error")?.as_str().map(str::to_owned)
    }

    /// The HTTP response, with whatever body type the server answers with. Every answer
    /// allows any origin: the data is guarded by credentials, which browsers do not attach to
    /// cross-origin requests on their own.
    pub fn into_http<B: From<Bytes>>(self) -> Response<B> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = Response::new(B::from(self.body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        if let Some(content_type) = self.content_type {
            headers.insert(
                hyper::header::CONTENT_TYPE,
                HeaderValue::from_static(content_type),
            );
        }
        for (name, value) in self.headers {
            // Values are built by this module from checked input; one that still is not a
            // valid header value is left out rather than failing the answer.
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.append(HeaderName::from_static(name), value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json_objects() {
        let response = RestResponse::error(401, "Permission denied");
        assert_eq!(response.status, 401);
        assert_eq!(
            &response.body[..],
            b"{\n  \"error\" : \"Permission denied\"\n}\n"
        );
        assert_eq!(
            response.error_message().as_deref(),
            Some("Permission denied")
        );
    }

    #[test]
    fn http_conversion_keeps_headers() {
        let http: Response<Bytes> = RestResponse::json(200, "null")
            .with_header("etag", "null_etag")
            .into_http();
        assert_eq!(http.status(), StatusCode::OK);
        assert_eq!(http.headers()["etag"], "null_etag");
        assert_eq!(http.headers()["access-control-allow-origin"], "*");
        assert_eq!(http.headers()["content-type"], JSON);
    }
}
