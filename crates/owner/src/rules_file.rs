//! Rules documents on disk: `--rules FILE` and `hearth rules check FILE`.

use std::path::Path;
use std::sync::Arc;

use hearth_rules::{Rules, RulesError, MAX_RULES_BYTES};
use hearth_sync::Access;

/// Why a rules file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesFileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is larger than the {MAX_RULES_BYTES}-byte limit for rules")]
    TooLarge { path: String },
    #[error("{path}: {error}")]
    Invalid { path: String, error: RulesError },
}

/// Reads and compiles a rules document.
pub fn load_rules(path: &Path) -> Result<Rules, RulesFileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RulesFileError::Read {
        path: name.clone(),
        source,
    })?;
    if text.len() > MAX_RULES_BYTES {
        return Err(RulesFileError::TooLarge { path: name });
    }
    Rules::parse(&text).map_err(|error| RulesFileError::Invalid { path: name, error })
}

/// The access every new database starts with: the `--rules` document if one was given, else
/// open rules in development mode, else locked (admins only).
pub fn default_access(rules: Option<Arc<Rules>>, dev: bool) -> Access {
    match (rules, dev) {
        (Some(rules), _) => Access::Rules(rules),
        (None, true) => Access::Open,
        (None, false) => Access::Locked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_reports_line_and_column() {
        let dir = std::env::temp_dir().join(format!("hearth-rules-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let good = dir.join("good.json");
        std::fs::write(&good, "{\n  // comment\n  \"rules\": {\".read\": true}\n}").expect("write");
        assert!(load_rules(&good).is_ok());
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"rules\": {\".read\": \"auth.uid ==\"}}").expect("write");
        let message = load_rules(&bad).expect_err("invalid").to_string();
        assert!(message.contains("line 1, column"), "{message}");
        assert!(load_rules(&dir.join("missing.json")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn defaults() {
        assert!(matches!(default_access(None, true), Access::Open));
        assert!(matches!(default_access(None, false), Access::Locked));
    }
}
