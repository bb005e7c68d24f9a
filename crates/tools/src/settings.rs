//! `hearth settings get|set` and `hearth rules history|rollback`: a database's settings and
//! ruleset history on a running server, through the endpoints Firebase's CLI uses
//! (docs/settings.md).

use serde::Deserialize;

use super::client::{Call, Client, DatabaseArgs};
use super::error::{Result, ToolsError};

/// The settings `hearth settings` knows, as the endpoints name them.
pub const SETTINGS: [&str; 5] = [
    "defaultWriteSizeLimit",
    "strictTriggerValidation",
    "appCheck",
    "quotas",
    "audit",
];

fn setting_path(name: &str) -> Result<String> {
    if !SETTINGS.contains(&name) {
        return Err(ToolsError::Usage(format!(
            "no setting {name:?}: the settings are {}",
            SETTINGS.join(", ")
        )));
    }
    Ok(format!("/.settings/{name}.json"))
}

/// `hearth settings get NAME`: prints the setting's value.
pub fn settings_get(server: &DatabaseArgs, name: &str) -> Result<()> {
    let path = setting_path(name)?;
    let value = Client::for_database(server)?.json(Call::new("GET", &path))?;
    println!("{}", plain(&value));
    Ok(())
}

/// `hearth settings set NAME VALUE`: `VALUE` as the setting takes it (`small`, `true`, or for
/// `quotas` and `audit` a JSON object).
pub fn settings_set(server: &DatabaseArgs, name: &str, value: &str) -> Result<()> {
    let path = setting_path(name)?;
    let body = match value {
        "true" | "false" => value.to_owned(),
        object if object.trim_start().starts_with('{') => object.to_owned(),
        other => serde_json::Value::String(other.to_owned()).to_string(),
    };
    let client = Client::for_database(server)?;
    let set = client.json(Call::new("PUT", &path).body(body.as_bytes()))?;
    let database = client.namespace().unwrap_or_default();
    println!("{name} = {} on {database}", plain(&set));
    Ok(())
}

/// A value as a user typed it: a string without its quotes.
fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[derive(Debug, Default, Deserialize)]
struct Labels {
    stable: Option<String>,
    canary: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Listed {
    id: String,
    #[serde(rename = "createdAt")]
    created_at: String,
    by: String,
}

#[derive(Debug, Deserialize)]
struct Release {
    at: String,
    by: String,
    stable: Option<String>,
    canary: Option<String>,
}

#[derive(Debug, Deserialize)]
struct History {
    rulesets: Vec<Listed>,
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    releases: Vec<Release>,
}

const HISTORY: &str = "/.settings/rulesets.json";
const LABELS: &str = "/.settings/ruleset_labels.json";

fn history(client: &Client) -> Result<History> {
    let value = client.json(Call::new("GET", HISTORY))?;
    serde_json::from_value(value).map_err(|error| {
        ToolsError::Usage(format!("the server's history is not understood: {error}"))
    })
}

/// `hearth rules history`: the rulesets, their labels and every change of the labels, or the
/// server's JSON.
pub fn rules_history(server: &DatabaseArgs, json: bool) -> Result<()> {
    let client = Client::for_database(server)?;
    if json {
        println!("{}", client.text(Call::new("GET", HISTORY))?);
        return Ok(());
    }
    let history = history(&client)?;
    println!("ruleset  created                   by");
    for ruleset in &history.rulesets {
        let mut labels = Vec::new();
        if history.labels.stable.as_deref() == Some(&ruleset.id) {
            labels.push("stable");
        }
        if history.labels.canary.as_deref() == Some(&ruleset.id) {
            labels.push("canary");
        }
        println!(
            "{:>7}  {:<24}  {}{}",
            ruleset.id,
            ruleset.created_at,
            ruleset.by,
            if labels.is_empty() {
                String::new()
            } else {
                format!("  [{}]", labels.join(", "))
            }
        );
    }
    println!("\nlabel changes:");
    for release in &history.releases {
        println!(
            "  {}  stable {}{}  ({})",
            release.at,
            release.stable.as_deref().unwrap_or("-"),
            release
                .canary
                .as_deref()
                .map(|canary| format!(", canary {canary}"))
                .unwrap_or_default(),
            release.by
        );
    }
    Ok(())
}

/// `hearth rules rollback [--to ID]`: makes `to`, or else the stable ruleset before the
/// current one, stable again (the canary label stays); the change is kept in the history.
pub fn rules_rollback(server: &DatabaseArgs, to: Option<&str>) -> Result<()> {
    let client = Client::for_database(server)?;
    let history = history(&client)?;
    let current = history.labels.stable.as_deref();
    let target = match to {
        Some(id) => id.to_owned(),
        None => history
            .releases
            .iter()
            .rev()
            .filter_map(|release| release.stable.as_deref())
            .find(|id| Some(*id) != current && history.rulesets.iter().any(|r| r.id == *id))
            .map(str::to_owned)
            .ok_or_else(|| {
                ToolsError::Usage(
                    "there is no earlier stable ruleset to roll back to (hearth rules history lists them)"
                        .to_owned(),
                )
            })?,
    };
    let labels = serde_json::json!({ "stable": target, "canary": history.labels.canary });
    let body = labels.to_string();
    client.json(Call::new("PUT", LABELS).body(body.as_bytes()))?;
    let database = client.namespace().unwrap_or_default();
    println!(
        "{database}: ruleset {target} is stable again (it was {})",
        current.unwrap_or("none")
    );
    Ok(())
}
