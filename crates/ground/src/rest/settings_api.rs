//! The endpoints of a database's settings document (`crate::settings`, docs/settings.md), as
//! Firebase's CLI reaches them:
//!
//! | request | what |
//! |---|---|
//! | `GET, PUT /.settings/defaultWriteSizeLimit.json` | `"small"`, `"medium"`, `"large"` or `"unlimited"` |
//! | `GET, PUT /.settings/strictTriggerValidation.json` | `true` or `false` |
//! | `GET, PUT /.settings/appCheck.json` | `"enforced"` or `"unenforced"` |
//! | `GET, PUT /.settings/quotas.json` | `{"connections": N, "writesPerSecond": N, ...}` |
//! | `GET, PUT /.settings/audit.json` | `{"enabled": true, "retentionDays": N}` |
//! | `POST /.settings/rulesets.json` | stages the body (a rules document): `{"id": ID}` |
//! | `GET /.settings/rulesets.json` | the history: rulesets, labels, label changes |
//! | `GET /.settings/rulesets/ID.json` | one ruleset with its source |
//! | `GET, PUT /.settings/ruleset_labels.json` | `{"stable": ID, "canary": ID}` |
//!
//! and the history's reads as Firebase's metadata API serves them
//! (`FIREBASE_RTDB_METADATA_URL`): `GET /namespaces/NS/rulesets`, `/namespaces/NS/rulesets/ID`
//! and `/namespaces/NS/ruleset_labels`. All are for admins only.

use hyper::Method;

use super::response::RestResponse;
use crate::namespace::validate;

/// The body a setting's `PUT` may send (`"unlimited"` and some whitespace).
pub const MAX_SETTING_BODY_BYTES: usize = 1024;

/// The body a `PUT` of the labels may send (two ids).
pub const MAX_LABELS_BODY_BYTES: usize = 4096;

/// The longest ruleset id a path may name (ids are numbers).
const MAX_RULESET_ID_BYTES: usize = 32;

/// One of the two settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingName {
    DefaultWriteSizeLimit,
    StrictTriggerValidation,
    /// Hearth's own: `"enforced"` or `"unenforced"` (docs/app-check.md).
    AppCheck,
    /// Hearth's own: the database's quotas, an object (docs/quotas.md).
    Quotas,
    /// Hearth's own: the audit trail, an object (docs/audit.md).
    Audit,
}

impl SettingName {
    fn from_file(file: &str) -> Option<SettingName> {
        match file {
            "defaultWriteSizeLimit.json" => Some(SettingName::DefaultWriteSizeLimit),
            "strictTriggerValidation.json" => Some(SettingName::StrictTriggerValidation),
            "appCheck.json" => Some(SettingName::AppCheck),
            "quotas.json" => Some(SettingName::Quotas),
            "audit.json" => Some(SettingName::Audit),
            _ => None,
        }
    }
}

/// What a request asks of the settings document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsEndpoint {
    Get(SettingName),
    Put(SettingName),
    /// Stages a ruleset (the body is the rules document).
    Stage,
    /// The history.
    List,
    /// One ruleset.
    Ruleset(String),
    Labels,
    SetLabels,
}

impl SettingsEndpoint {
    /// The most body bytes the request may send, or `None` when it takes no body.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            SettingsEndpoint::Put(SettingName::Quotas | SettingName::Audit) => {
                Some(MAX_LABELS_BODY_BYTES)
            }
            SettingsEndpoint::Put(_) => Some(MAX_SETTING_BODY_BYTES),
            SettingsEndpoint::Stage => Some(hearth_rules::MAX_RULES_BYTES),
            SettingsEndpoint::SetLabels => Some(MAX_LABELS_BODY_BYTES),
            _ => None,
        }
    }

    /// Whether it changes the document (and is logged).
    pub fn writes(&self) -> bool {
        matches!(
            self,
            SettingsEndpoint::Put(_) | SettingsEndpoint::Stage | SettingsEndpoint::SetLabels
        )
    }
}

fn method_not_allowed(allow: &'static str) -> RestResponse {
    RestResponse::error(405, "Method not allowed").with_header("allow", allow)
}

/// The endpoint of `/.settings/FILE` (the rules, triggers and profiler aside), or `None` if
/// the path is none of the document's.
pub(super) fn settings_document(
    method: &Method,
    path: &str,
) -> Option<Result<SettingsEndpoint, RestResponse>> {
    let file = path.strip_prefix("/.settings/")?;
    let read = *method == Method::GET || *method == Method::HEAD;
    if let Some(name) = SettingName::from_file(file) {
        return Some(match *method {
            _ if read => Ok(SettingsEndpoint::Get(name)),
            Method::PUT => Ok(SettingsEndpoint::Put(name)),
            _ => Err(method_not_allowed("GET, HEAD, PUT, OPTIONS")),
        });
    }
    if file == "rulesets.json" {
        return Some(match *method {
            _ if read => Ok(SettingsEndpoint::List),
            Method::POST => Ok(SettingsEndpoint::Stage),
            _ => Err(method_not_allowed("GET, HEAD, POST, OPTIONS")),
        });
    }
    if file == "ruleset_labels.json" {
        return Some(match *method {
            _ if read => Ok(SettingsEndpoint::Labels),
            Method::PUT => Ok(SettingsEndpoint::SetLabels),
            _ => Err(method_not_allowed("GET, HEAD, PUT, OPTIONS")),
        });
    }
    let id = file.strip_prefix("rulesets/")?.strip_suffix(".json")?;
    Some(if read {
        ruleset_id(id).map(SettingsEndpoint::Ruleset)
    } else {
        Err(method_not_allowed("GET, HEAD, OPTIONS"))
    })
}

/// The namespace and endpoint of a metadata API path (`/namespaces/NS/...`), reads only.
pub(super) fn metadata(
    method: &Method,
    path: &str,
) -> Result<(String, SettingsEndpoint), RestResponse> {
    let rest = path.strip_prefix("/namespaces/").unwrap_or_default();
    let (namespace, what) = rest.split_once('/').unwrap_or((rest, ""));
    let namespace =
        validate(namespace).map_err(|error| RestResponse::error(404, error.to_string()))?;
    let endpoint = match what.split_once('/') {
        None if what == "rulesets" => SettingsEndpoint::List,
        None if what == "ruleset_labels" => SettingsEndpoint::Labels,
        Some(("rulesets", id)) => SettingsEndpoint::Ruleset(ruleset_id(id)?),
        _ => return Err(RestResponse::error(404, format!("{path} does not exist"))),
    };
    if *method != Method::GET && *method != Method::HEAD {
        return Err(method_not_allowed("GET, HEAD, OPTIONS"));
    }
    Ok((namespace, endpoint))
}

fn ruleset_id(id: &str) -> Result<String, RestResponse> {
    if id.is_empty()
        || id.len() > MAX_RULESET_ID_BYTES
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(RestResponse::error(404, format!("no ruleset {id:?}")));
    }
    Ok(id.to_owned())
}
