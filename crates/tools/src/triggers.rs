//! `hearth triggers status|dead|retry|drop`: a running server's declared triggers, through
//! `/.admin/triggers` (docs/triggers.md), admins only. Each node answers for its own outbox.

use serde_json::Value;

use super::client::{Call, Client, ServerArgs};
use super::error::{Result, ToolsError};

/// `hearth triggers status`: each trigger's counts and lag (a table, or the server's JSON).
pub fn triggers_status(server: &ServerArgs, json: bool) -> Result<()> {
    let answer = Client::new(server)?.json(Call::new("GET", "/.admin/triggers"))?;
    if json {
        println!("{answer}");
        return Ok(());
    }
    print!("{}", status_table(&answer)?);
    Ok(())
}

fn status_table(answer: &Value) -> Result<String> {
    let triggers = answer
        .get("triggers")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ToolsError::Usage("the answer to GET /.admin/triggers has no triggers".into())
        })?;
    if triggers.is_empty() {
        return Ok("no trigger is declared (hearth serve --triggers FILE)\n".into());
    }
    let header = [
        "TRIGGER",
        "DELIVERED",
        "FAILED",
        "DEAD",
        "DROPPED",
        "PENDING",
        "LAG (s)",
        "LAST ERROR",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| (*h).to_owned()).collect()];
    for trigger in triggers {
        let number = |field: &str| {
            trigger
                .get(field)
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        let last_error = trigger
            .get("databases")
            .and_then(Value::as_array)
            .and_then(|databases| {
                databases
                    .iter()
                    .find_map(|d| d.get("lastError").and_then(Value::as_str))
            })
            .unwrap_or("-");
        rows.push(vec![
            trigger
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned(),
            number("delivered"),
            number("failed"),
            number("deadLetters"),
            number("dropped"),
            number("pending"),
            number("lagSeconds"),
            last_error.to_owned(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    Ok(out)
}

/// `hearth triggers dead NAME`: its dead letters, a JSON object per line.
pub fn triggers_dead(server: &ServerArgs, name: &str) -> Result<()> {
    let answer = dead_letters_call(server, "GET", name, "dead")?;
    for letter in answer.as_array().into_iter().flatten() {
        println!("{letter}");
    }
    Ok(())
}

/// `hearth triggers retry NAME`: sends its dead letters again.
pub fn triggers_retry(server: &ServerArgs, name: &str) -> Result<()> {
    let answer = dead_letters_call(server, "POST", name, "retry")?;
    let count = answer.get("retried").and_then(Value::as_u64).unwrap_or(0);
    println!("{count} dead letters of {name} sent again");
    let kept = answer
        .get("keptForOtherOwners")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if kept > 0 {
        println!(
            "{kept} kept: their databases are owned by another node now (send them again there, or after this node owns them)"
        );
    }
    Ok(())
}

/// `hearth triggers drop NAME`: drops its dead letters.
pub fn triggers_drop(server: &ServerArgs, name: &str) -> Result<()> {
    let answer = dead_letters_call(server, "DELETE", name, "dead")?;
    let count = answer.get("dropped").and_then(Value::as_u64).unwrap_or(0);
    println!("{count} dead letters of {name} dropped");
    Ok(())
}

/// `METHOD /.admin/triggers/NAME/ACTION`, its JSON answer.
fn dead_letters_call(server: &ServerArgs, method: &str, name: &str, action: &str) -> Result<Value> {
    let path = format!("/.admin/triggers/{}/{action}", checked(name)?);
    Client::new(server)?.json(Call::new(method, &path))
}

/// `hearth triggers get`: the triggers file in effect on the server.
pub fn triggers_get(server: &ServerArgs) -> Result<()> {
    let text = Client::new(server)?.text(Call::new("GET", DECLARATION))?;
    println!("{}", text.trim_end());
    Ok(())
}

/// `hearth triggers set FILE`: declares the triggers of FILE on the server (checked whole,
/// written to its triggers file, applied at once).
pub fn triggers_set(server: &ServerArgs, file: &std::path::Path) -> Result<()> {
    let body = std::fs::read(file)
        .map_err(|error| ToolsError::Usage(format!("reading {}: {error}", file.display())))?;
    let answer = Client::new(server)?.json(Call::new("PUT", DECLARATION).body(&body))?;
    let count = answer.get("declared").and_then(Value::as_u64).unwrap_or(0);
    println!("{count} triggers declared");
    Ok(())
}

const DECLARATION: &str = "/.admin/triggers/declaration";

/// A trigger's name as the triggers file allows it (so that it is a path segment).
fn checked(name: &str) -> Result<&str> {
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(name)
    } else {
        Err(ToolsError::Usage(format!(
            "{name:?} is not a trigger's name"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_a_table() -> Result<()> {
        let answer = serde_json::json!({"triggers": [{
            "name": "notify", "delivered": 12, "failed": 3, "deadLetters": 1, "dropped": 0,
            "pending": 2, "lagSeconds": 1.5,
            "databases": [{"database": "chat", "lastError": "http status: 500"}]
        }]});
        let table = status_table(&answer)?;
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("TRIGGER"));
        assert!(lines[1].starts_with("notify"));
        assert!(lines[1].contains("1.5") && lines[1].ends_with("http status: 500"));
        assert!(status_table(&serde_json::json!({"triggers": []}))?.contains("no trigger"));
        assert!(checked("a/b").is_err());
        Ok(())
    }
}
