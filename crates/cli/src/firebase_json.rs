//! `--firebase-json`: the Realtime Database settings of a Firebase project file
//! (`firebase.json`), read as the Firebase emulator reads them, so that a project moves to
//! Hearth with the file it has:
//!
//! * `database.rules`: the rules file, relative to the project file's directory; or `database`
//!   as a list of deploy targets (`[{"target": "main", "rules": "…"}]`, `instance` instead of
//!   `target` also allowed), each with its rules file;
//! * `emulators.database.host` and `emulators.database.port`: where to listen.
//!
//! Every other section is ignored. Flags (and their variables and config-file keys) win over
//! the file: it only fills in `--rules` and `--listen` when they were not given.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What the project file says about the Realtime Database.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FirebaseJson {
    /// The rules file, resolved against the project file's directory.
    pub rules: Option<PathBuf>,
    /// `emulators.database.host`.
    pub host: Option<String>,
    /// `emulators.database.port`.
    pub port: Option<u16>,
}

/// The largest project file read (they are a few KB; this only stops a wrong path, such as a
/// device or a data dump, from being read whole).
const MAX_FIREBASE_JSON_BYTES: u64 = 4 * 1024 * 1024;

/// The emulator's port when the file names only a host.
const EMULATOR_DEFAULT_PORT: u16 = 9000;

/// The host when the file names only a port: both loopback addresses, as Hearth's default.
const DEFAULT_HOST: &str = "localhost";

#[derive(Debug, thiserror::Error)]
pub enum FirebaseJsonError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is larger than {MAX_FIREBASE_JSON_BYTES} bytes: is it a Firebase project file?"
    )]
    TooLarge { path: PathBuf },
    #[error("{path} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {what}")]
    Shape { path: PathBuf, what: String },
}

impl FirebaseJson {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<FirebaseJson, FirebaseJsonError> {
        let read_error = |source| FirebaseJsonError::Read {
            path: path.to_owned(),
            source,
        };
        let size = std::fs::metadata(path).map_err(read_error)?.len();
        if size > MAX_FIREBASE_JSON_BYTES {
            return Err(FirebaseJsonError::TooLarge {
                path: path.to_owned(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        let base = path.parent().unwrap_or(Path::new(""));
        FirebaseJson::parse(&text, base).map_err(|error| match error {
            ParseError::Json(source) => FirebaseJsonError::Json {
                path: path.to_owned(),
                source,
            },
            ParseError::Shape(what) => FirebaseJsonError::Shape {
                path: path.to_owned(),
                what,
            },
        })
    }

    /// Reads the text of a project file whose directory is `base`.
    fn parse(text: &str, base: &Path) -> Result<FirebaseJson, ParseError> {
        let root: Value = serde_json::from_str(text).map_err(ParseError::Json)?;
        let Value::Object(root) = root else {
            return Err(shape("the file must hold a JSON object"));
        };
        let rules =
            match root.get("database") {
                None | Some(Value::Null) => None,
                Some(Value::Object(section)) => rules_of(section, "database")?,
                Some(Value::Array(targets)) => rules_of_targets(targets)?,
                Some(_) => return Err(shape(
                    "\"database\" must be an object ({\"rules\": \"database.rules.json\"}) or a \
                     list of targets",
                )),
            };
        let emulator = match root.get("emulators").and_then(|e| e.get("database")) {
            None | Some(Value::Null) => None,
            Some(Value::Object(section)) => Some(section),
            Some(_) => return Err(shape("\"emulators.database\" must be an object")),
        };
        let host = match emulator.and_then(|e| e.get("host")) {
            None | Some(Value::Null) => None,
            Some(Value::String(host)) if !host.trim().is_empty() => Some(host.trim().to_owned()),
            Some(_) => {
                return Err(shape(
                    "\"emulators.database.host\" must be a host name or address",
                ))
            }
        };
        let port = match emulator.and_then(|e| e.get("port")) {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => Some(
                n.as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| shape("\"emulators.database.port\" must be from 0 to 65535"))?,
            ),
            // The emulator takes a port written as a string too.
            Some(Value::String(s)) => Some(
                s.trim()
                    .parse::<u16>()
                    .map_err(|_| shape("\"emulators.database.port\" must be from 0 to 65535"))?,
            ),
            Some(_) => return Err(shape("\"emulators.database.port\" must be a number")),
        };
        Ok(FirebaseJson {
            rules: rules.map(|file| base.join(file)),
            host,
            port,
        })
    }

    /// The `--listen` address the file asks for, if it names a host or a port.
    pub fn listen(&self) -> Option<String> {
        if self.host.is_none() && self.port.is_none() {
            return None;
        }
        let host = self.host.as_deref().unwrap_or(DEFAULT_HOST);
        let port = self.port.unwrap_or(EMULATOR_DEFAULT_PORT);
        // An IPv6 address is written in brackets before a port.
        Some(if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        })
    }
}

enum ParseError {
    Json(serde_json::Error),
    Shape(String),
}

fn shape(what: &str) -> ParseError {
    ParseError::Shape(what.to_owned())
}

/// The `rules` member of a `database` object (or of one target, named by `what`).
fn rules_of(
    section: &serde_json::Map<String, Value>,
    what: &str,
) -> Result<Option<String>, ParseError> {
    match section.get("rules") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(file)) if !file.trim().is_empty() => Ok(Some(file.trim().to_owned())),
        Some(_) => Err(ParseError::Shape(format!(
            "\"rules\" of {what} must be the path of a rules file"
        ))),
    }
}

/// The rules of `database` as a list of targets. Hearth gives every database the same rules at
/// start (per-database rules are set through `/.settings/rules.json`), so the targets must
/// agree on one file.
fn rules_of_targets(targets: &[Value]) -> Result<Option<String>, ParseError> {
    let mut found: Option<String> = None;
    for (i, target) in targets.iter().enumerate() {
        let Value::Object(target) = target else {
            return Err(ParseError::Shape(format!(
                "\"database\"[{i}] must be an object with \"rules\""
            )));
        };
        let Some(file) = rules_of(target, &format!("\"database\"[{i}]"))? else {
            continue;
        };
        match &found {
            Some(first) if *first != file => {
                return Err(ParseError::Shape(format!(
                    "the database targets name different rules files ({first} and {file}); \
                     Hearth starts every database with the same rules: keep one file here and \
                     set the others per database (hearth rules set FILE --url URL --ns NAME)"
                )))
            }
            _ => found = Some(file),
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<FirebaseJson, String> {
        FirebaseJson::parse(text, Path::new("/project")).map_err(|error| match error {
            ParseError::Json(e) => format!("json: {e}"),
            ParseError::Shape(what) => what,
        })
    }

    #[test]
    fn reads_rules_and_the_emulator_address() {
        let file = parse(
            r#"{"database": {"rules": "database.rules.json"},
                "hosting": {"public": "dist"},
                "emulators": {"database": {"port": 9100, "host": "127.0.0.1"}, "ui": {"enabled": true}}}"#,
        )
        .expect("valid");
        assert_eq!(
            file,
            FirebaseJson {
                rules: Some(PathBuf::from("/project/database.rules.json")),
                host: Some("127.0.0.1".into()),
                port: Some(9100),
            }
        );
        assert_eq!(file.listen().as_deref(), Some("127.0.0.1:9100"));
    }

    #[test]
    fn partial_files() {
        assert_eq!(parse("{}").expect("valid"), FirebaseJson::default());
        assert_eq!(parse("{}").expect("valid").listen(), None);
        let port_only = parse(r#"{"emulators": {"database": {"port": "9001"}}}"#).expect("valid");
        assert_eq!(port_only.listen().as_deref(), Some("localhost:9001"));
        let host_only = parse(r#"{"emulators": {"database": {"host": "::1"}}}"#).expect("valid");
        assert_eq!(host_only.listen().as_deref(), Some("[::1]:9000"));
        let absolute = parse(r#"{"database": {"rules": "/etc/rules.json"}}"#).expect("valid");
        assert_eq!(absolute.rules, Some(PathBuf::from("/etc/rules.json")));
    }

    #[test]
    fn targets_must_agree_on_one_rules_file() {
        let one = parse(r#"{"database": [{"target": "main", "rules": "r.json"}]}"#).expect("valid");
        assert_eq!(one.rules, Some(PathBuf::from("/project/r.json")));
        let same = parse(
            r#"{"database": [{"target": "a", "rules": "r.json"}, {"instance": "b", "rules": "r.json"}]}"#,
        )
        .expect("valid");
        assert_eq!(same.rules, Some(PathBuf::from("/project/r.json")));
        let different = parse(
            r#"{"database": [{"target": "a", "rules": "r.json"}, {"instance": "b", "rules": "s.json"}]}"#,
        )
        .expect_err("refused");
        assert!(different.contains("different rules files"), "{different}");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        for (text, expected) in [
            ("[1]", "must hold a JSON object"),
            (
                r#"{"database": "rules.json"}"#,
                "\"database\" must be an object",
            ),
            (
                r#"{"database": {"rules": 3}}"#,
                "must be the path of a rules file",
            ),
            (
                r#"{"emulators": {"database": {"port": 70000}}}"#,
                "from 0 to 65535",
            ),
            (
                r#"{"emulators": {"database": {"port": "x"}}}"#,
                "from 0 to 65535",
            ),
            (
                r#"{"emulators": {"database": {"port": true}}}"#,
                "must be a number",
            ),
            (
                r#"{"emulators": {"database": {"host": ""}}}"#,
                "host name or address",
            ),
            (r#"{"emulators": {"database": 9000}}"#, "must be an object"),
            ("{\"database\": ", "json: "),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
