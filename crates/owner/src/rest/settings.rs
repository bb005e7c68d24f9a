//! The emulator's rules endpoint, `/.settings/rules.json` (spec §16): the rules of a namespace
//! as uploaded, comments included. Only admins may read or replace them. A new document is
//! compiled and takes effect at once: listens it no longer allows are revoked. Each is kept in
//! the database's ruleset history (`settings_api`).

use hearth_rules::Rules;
use hearth_sync::Access;
use serde_json::json;

use super::settings_api::change_settings;
use crate::state::Owner;
use hearth_ground::rest::RestResponse;

/// What `GET` shows for a database without a rules document.
const OPEN_RULES: &str = "{\"rules\":{\".read\":true,\".write\":true}}";
const LOCKED_RULES: &str = "{\"rules\":{\".read\":false,\".write\":false}}";

/// `GET`: the text as uploaded, or with `format=strict` as plain JSON without comments.
pub fn get_rules(owner: &Owner, namespace: &str, strict: bool) -> RestResponse {
    let text = owner.with_database(namespace, |database| match database.access() {
        Access::Open => OPEN_RULES.to_owned(),
        Access::Locked => LOCKED_RULES.to_owned(),
        Access::Rules(rules) if strict => rules.strict_json().to_owned(),
        Access::Rules(rules) => rules.source().to_owned(),
    });
    RestResponse::json(200, text)
}

/// `PUT`: compiles the document (400 with line and column when it is refused) and makes it
/// the database's rules: a deploy, kept in its ruleset history as a new stable ruleset.
pub fn put_rules(owner: &Owner, namespace: &str, text: String, who: &str) -> RestResponse {
    let rules = match Rules::parse(&text) {
        Ok(rules) => rules,
        Err(error) => return RestResponse::error(400, error.to_string()),
    };
    let deployed = change_settings(owner, namespace, |settings, now| {
        settings.deploy(text.clone(), now, who);
        Ok((json!({ "status": "ok" }), Some((rules, text))))
    });
    match deployed {
        Ok(answer) => RestResponse::json(200, answer.to_string()),
        Err(response) => response,
    }
}

/// The rules coverage report of a database (spec: the emulator's `/.inspect/coverage?ns=`):
/// JSON, or an HTML page. Kept only in development (`--dev`), for databases with rules.
pub fn coverage(owner: &Owner, namespace: &str, html: bool) -> RestResponse {
    if !owner.config().dev {
        return RestResponse::error(
            404,
            "rules coverage is kept only in development mode (hearth serve --dev)",
        );
    }
    let title = html.then_some(namespace);
    match owner.with_database(namespace, |database| database.coverage_report(title)) {
        Some(report) if html => RestResponse {
            content_type: Some("text/html; charset=utf-8"),
            ..RestResponse::json(200, report)
        },
        Some(report) => RestResponse::json(200, report),
        // Open (or locked) without a rules document: no expressions to report.
        None if html => RestResponse {
            content_type: Some("text/html; charset=utf-8"),
            ..RestResponse::json(
                200,
                "<!doctype html>\n<p>This database has no rules document: nothing to report.</p>\n",
            )
        },
        None => RestResponse::json(200, "{\"rules\":\"\",\"exprs\":[]}"),
    }
}

#[cfg(test)]
mod tests {
    use hearth_rules::Rules;

    #[test]
    fn refusals_name_line_and_column() {
        let error = Rules::parse("{\n \"rules\": {\".read\": \"auth.uid ==\"}}")
            .expect_err("an incomplete expression");
        assert!(error.to_string().starts_with("line 2, column"), "{error}");
    }
}
