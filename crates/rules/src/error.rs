//! Load-time errors: every refusal of a rules document names a line and a column of the
//! original source (spec §11.1), so that `hearth rules check FILE` can point at the mistake,
//! including inside an expression string.

/// A refused rules document: where (1-based line and column, counted in characters of the
/// original text) and why.
///
/// Displays as `line L, column C: reason`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}, column {column}: {reason}")]
pub struct RulesError {
    /// 1-based line of the offending text.
    pub line: u32,
    /// 1-based column (in characters) of the offending text.
    pub column: u32,
    /// What is wrong there.
    pub reason: LoadError,
}

/// Why a rules document was refused. The texts of the variants the hosted service is known to
/// print (spec §11.1) are reproduced exactly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    #[error("the rules source is {bytes} bytes; the limit is {limit} bytes")]
    TooLarge { bytes: usize, limit: usize },
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("the document nests deeper than {0} levels")]
    NestingTooDeep(usize),
    #[error("duplicate member '{0}'")]
    DuplicateMember(String),
    #[error("Expected 'rules' property.")]
    ExpectedRules,
    #[error("unexpected top-level member '{0}' (only 'rules' is allowed)")]
    UnexpectedTopLevel(String),
    #[error("the rule node '{0}' must be an object")]
    NotAnObject(String),
    #[error("{0} must be true, false or a string holding an expression")]
    InvalidRuleValue(String),
    #[error("Invalid rule property '{0}'.")]
    InvalidProperty(String),
    #[error("invalid key '{key}' in the rules: {reason}")]
    InvalidKey { key: String, reason: String },
    #[error("invalid wildcard name '{0}': use '$' followed by letters, digits or '_'")]
    InvalidWildcard(String),
    #[error("Cannot have multiple default rules ('{0}' and '{1}').")]
    MultipleWildcards(String, String),
    #[error("the wildcard '{0}' is already bound on the path to this rule")]
    RepeatedWildcard(String),
    #[error(".indexOn must be a string or an array of strings naming children: {0}")]
    InvalidIndexOn(String),
    #[error(".volatile must be true or false")]
    InvalidVolatile,
    #[error(".limits: {0}")]
    InvalidLimits(String),
    #[error("{0}")]
    Syntax(String),
    #[error("the expression nests deeper than {0} levels")]
    ExpressionTooDeep(usize),
    #[error("Unknown variable '{0}'.")]
    UnknownVariable(String),
    #[error("No such method/property '{0}'.")]
    NoSuchMember(String),
    #[error("! only operates on booleans.")]
    NotOnNonBoolean,
    #[error("{0}")]
    Type(String),
    #[error("invalid regular expression: {0}")]
    Regex(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_line_and_column() {
        let err = RulesError {
            line: 7,
            column: 55,
            reason: LoadError::UnknownVariable("x".into()),
        };
        assert_eq!(err.to_string(), "line 7, column 55: Unknown variable 'x'.");
        let err = RulesError {
            line: 1,
            column: 1,
            reason: LoadError::MultipleWildcards("$a".into(), "$b".into()),
        };
        assert_eq!(
            err.to_string(),
            "line 1, column 1: Cannot have multiple default rules ('$a' and '$b')."
        );
    }
}
