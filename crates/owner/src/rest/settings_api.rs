//! A database's settings document on its owner (`hearth_ground::settings`,
//! docs/settings.md): the two settings of Firebase's CLI and the ruleset history, read and
//! changed through `hearth_ground::rest::settings_api`'s endpoints. A change is made to a
//! copy, kept, and logged whole after the rules it puts in effect (if any), so that a crash
//! between the two records leaves the rules in effect right and only the history behind.

use std::sync::Arc;

use hearth_config::ServeConfig;
use hearth_ground::rest::{RestResponse, SettingName, SettingsEndpoint};
use hearth_ground::settings::{
    AppCheckMode, AuditSetting, DatabaseSettings, Labels, Quotas, Ruleset, SettingsError,
    WriteSizeTier,
};
use hearth_net::time::now_ms;
use hearth_rules::Rules;
use hearth_sync::{Access, Effects};
use hearth_triggers::event::rfc3339;
use serde_json::{json, Value};

use crate::effects::route_effects;
use crate::state::Owner;

/// Who a change through the REST API is recorded as made by: only admins may make one, and
/// an admin credential names nobody.
pub const BY_REST: &str = "an admin, over REST";

/// Answers a request of the settings document.
pub fn answer(
    owner: &Owner,
    namespace: &str,
    endpoint: &SettingsEndpoint,
    body: &[u8],
    who: &str,
) -> RestResponse {
    let result = match endpoint {
        SettingsEndpoint::Get(name) => Ok(read(owner, namespace, |s| {
            setting(s, *name, owner.config())
        })),
        SettingsEndpoint::Put(name) => put_setting(owner, namespace, *name, body),
        SettingsEndpoint::Stage => stage(owner, namespace, body, who),
        SettingsEndpoint::List => Ok(read(owner, namespace, history)),
        SettingsEndpoint::Ruleset(id) => read(owner, namespace, |s| s.ruleset(id).map(full))
            .ok_or_else(|| {
                RestResponse::error(404, SettingsError::UnknownRuleset(id.clone()).to_string())
            }),
        SettingsEndpoint::Labels => Ok(read(owner, namespace, |s| labels(&s.labels))),
        SettingsEndpoint::SetLabels => set_labels(owner, namespace, body, who),
    };
    match result {
        Ok(value) => RestResponse::json(200, value.to_string()),
        Err(response) => response,
    }
}

fn read<T>(owner: &Owner, namespace: &str, f: impl FnOnce(&DatabaseSettings) -> T) -> T {
    owner.with_database(namespace, |database| f(database.settings()))
}

/// A setting's value as `GET` shows it: the default when it was never set.
fn setting(settings: &DatabaseSettings, name: SettingName, config: &ServeConfig) -> Value {
    let enforced_by_default = config.app_check_enforced;
    let audit = &config.audit;
    match name {
        SettingName::DefaultWriteSizeLimit => {
            json!(settings
                .default_write_size_limit
                .unwrap_or(WriteSizeTier::Unlimited))
        }
        SettingName::StrictTriggerValidation => json!(settings.strict_triggers()),
        SettingName::AppCheck => json!(if settings.app_check_enforced(enforced_by_default) {
            AppCheckMode::Enforced
        } else {
            AppCheckMode::Unenforced
        }),
        SettingName::Audit => json!({
            "enabled": settings.audited(audit.by_default),
            "retentionDays": settings.audit_retention(audit.retention_days),
        }),
        SettingName::Quotas => {
            let quotas = settings.quotas;
            json!({
                "connections": quotas.connections,
                "writesPerSecond": quotas.writes_per_second,
                "writeBytesPerMinute": quotas.write_bytes_per_minute,
                "storedBytes": quotas.stored_bytes,
            })
        }
    }
}

fn put_setting(
    owner: &Owner,
    namespace: &str,
    name: SettingName,
    body: &[u8],
) -> Result<Value, RestResponse> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| RestResponse::error(400, "the body must be a JSON value"))?;
    let config = owner.config().clone();
    change_settings(owner, namespace, |settings, _| {
        match name {
            SettingName::DefaultWriteSizeLimit => {
                let tier = serde_json::from_value(value.clone()).map_err(|_| {
                    RestResponse::error(
                        400,
                        "defaultWriteSizeLimit must be \"small\", \"medium\", \"large\" or \"unlimited\"",
                    )
                })?;
                settings.default_write_size_limit = Some(tier);
            }
            SettingName::StrictTriggerValidation => {
                let Value::Bool(strict) = value else {
                    return Err(RestResponse::error(
                        400,
                        "strictTriggerValidation must be true or false",
                    ));
                };
                settings.strict_trigger_validation = Some(strict);
            }
            SettingName::Quotas => {
                // `null` for a quota is none, as `GET` shows it. (serde would take a list
                // for the struct too: only an object is one.)
                if !value.is_object() {
                    return Err(RestResponse::error(400, "the quotas must be a JSON object"));
                }
                let quotas: Quotas = serde_json::from_value(value.clone()).map_err(|error| {
                    RestResponse::error(
                        400,
                        format!("the quotas must be an object of connections, writesPerSecond, writeBytesPerMinute and storedBytes: {error}"),
                    )
                })?;
                quotas
                    .check()
                    .map_err(|reason| RestResponse::error(400, reason))?;
                settings.quotas = quotas;
            }
            SettingName::Audit => {
                if !value.is_object() {
                    return Err(RestResponse::error(
                        400,
                        "the audit setting must be a JSON object",
                    ));
                }
                let audit: AuditSetting = serde_json::from_value(value.clone()).map_err(|error| {
                    RestResponse::error(
                        400,
                        format!("the audit setting must be an object of enabled (true, false or null) and retentionDays (days, or null): {error}"),
                    )
                })?;
                audit
                    .check()
                    .map_err(|reason| RestResponse::error(400, reason))?;
                if audit.enabled == Some(true) && owner.audit_trail().is_none() {
                    return Err(RestResponse::error(
                        400,
                        "this server keeps no audit trail: it runs without a data directory (--durability none)",
                    ));
                }
                settings.audit = audit;
            }
            SettingName::AppCheck => {
                let mode = serde_json::from_value(value.clone()).map_err(|_| {
                    RestResponse::error(400, "appCheck must be \"enforced\" or \"unenforced\"")
                })?;
                settings.app_check = Some(mode);
            }
        }
        Ok((setting(settings, name, &config), None))
    })
}

/// `POST /.settings/rulesets.json`: the body is a rules document, as Firebase's CLI sends it
/// (a JSON string holding one is taken too); it must compile.
fn stage(owner: &Owner, namespace: &str, body: &[u8], who: &str) -> Result<Value, RestResponse> {
    let source = rules_source(body)?;
    change_settings(owner, namespace, |settings, now| {
        let id = settings.stage(source, now, who);
        Ok((json!({ "id": id }), None))
    })
}

fn set_labels(
    owner: &Owner,
    namespace: &str,
    body: &[u8],
    who: &str,
) -> Result<Value, RestResponse> {
    let labels: Labels = serde_json::from_slice(body).map_err(|_| {
        RestResponse::error(
            400,
            "the labels must be a JSON object {\"stable\": ID, \"canary\": ID}",
        )
    })?;
    release(owner, namespace, labels, who)
}

/// Moves the labels and puts the stable ruleset in effect; answers the labels.
pub fn release(
    owner: &Owner,
    namespace: &str,
    labels: Labels,
    who: &str,
) -> Result<Value, RestResponse> {
    change_settings(owner, namespace, |settings, now| {
        let stable = settings.set_labels(labels, now, who).map_err(refusal)?;
        let source = stable.source.clone();
        let rules = Rules::parse(&source).map_err(|error| {
            RestResponse::error(
                400,
                format!("ruleset {} does not compile: {error}", stable.id),
            )
        })?;
        Ok((self::labels(&settings.labels), Some((rules, source))))
    })
}

/// The text of a rules document sent as a body, compiled to check it.
pub fn rules_source(body: &[u8]) -> Result<String, RestResponse> {
    let text = std::str::from_utf8(body)
        .map_err(|_| RestResponse::error(400, "the rules are not UTF-8 text"))?;
    let text = match serde_json::from_str::<Value>(text) {
        Ok(Value::String(inner)) => inner,
        _ => text.to_owned(),
    };
    Rules::parse(&text).map_err(|error| RestResponse::error(400, error.to_string()))?;
    Ok(text)
}

/// Changes the settings document of `namespace` with `change` (given a copy and the time),
/// which returns the answer and, if the change puts rules in effect, the rules and their text.
/// Refused with 503 while the database refuses writes.
pub fn change_settings(
    owner: &Owner,
    namespace: &str,
    change: impl FnOnce(
        &mut DatabaseSettings,
        u64,
    ) -> Result<(Value, Option<(Rules, String)>), RestResponse>,
) -> Result<Value, RestResponse> {
    let now = now_ms();
    let mut effects = Effects::new();
    let outcome = owner.with_database(namespace, |database| {
        if let Some(reason) = database.read_only_reason() {
            return Err(RestResponse::error(503, reason));
        }
        let mut settings = database.settings().clone();
        let (answer, rules) = change(&mut settings, now)?;
        let rules = rules.map(|(rules, text)| {
            let text: Arc<str> = Arc::from(text);
            database.set_access(Access::Rules(Arc::new(rules)), now, &mut effects);
            database.set_rules(Some(text.clone()));
            text
        });
        let document = database.replace_settings(settings);
        owner.follow_audit(database);
        Ok((answer, rules, document))
    });
    let (answer, rules, document) = outcome?;
    if let Some(rules) = rules {
        owner.log_rules(namespace, &rules);
    }
    owner.log_settings(namespace, &document);
    route_effects(owner, namespace, effects);
    Ok(answer)
}

fn refusal(error: SettingsError) -> RestResponse {
    let status = match error {
        SettingsError::UnknownRuleset(_) => 404,
        SettingsError::NoStable | SettingsError::NothingToRollBackTo => 400,
    };
    RestResponse::error(status, error.to_string())
}

fn labels(labels: &Labels) -> Value {
    // `{}` when nothing is labelled: the CLI prints what is there.
    serde_json::to_value(labels).unwrap_or_else(|_| json!({}))
}

/// The history: the metadata API's `rulesets` (without sources), the labels and every kept
/// change of them.
fn history(settings: &DatabaseSettings) -> Value {
    let rulesets: Vec<Value> = settings
        .rulesets
        .iter()
        .map(|ruleset| json!({ "id": ruleset.id, "createdAt": rfc3339(ruleset.created_ms), "by": ruleset.by }))
        .collect();
    let releases: Vec<Value> = settings
        .releases
        .iter()
        .map(|release| {
            let mut value = labels(&release.labels);
            value["at"] = json!(rfc3339(release.at_ms));
            value["by"] = json!(release.by);
            value
        })
        .collect();
    json!({ "rulesets": rulesets, "labels": labels(&settings.labels), "releases": releases })
}

fn full(ruleset: &Ruleset) -> Value {
    json!({
        "id": ruleset.id,
        "createdAt": rfc3339(ruleset.created_ms),
        "by": ruleset.by,
        "source": ruleset.source,
    })
}
