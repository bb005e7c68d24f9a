use super::*;

fn source(n: usize) -> String {
    format!("{{\"rules\":{{\".read\":{}}}}}", n.is_multiple_of(2))
}

#[test]
fn a_new_document_is_empty_and_serializes_to_almost_nothing() {
    let settings = DatabaseSettings::default();
    assert_eq!(settings.to_json(), r#"{"labels":{},"nextRuleset":0}"#);
    assert_eq!(settings.write_size_limit(), WriteSizeLimit::Default);
    assert!(settings.strict_triggers());
    assert_eq!(DatabaseSettings::parse("{}").expect("empty"), settings);
    assert!(DatabaseSettings::parse(r#"{"other":1}"#).is_err());
}

#[test]
fn settings_round_trip() {
    let mut settings = DatabaseSettings {
        default_write_size_limit: Some(WriteSizeTier::Small),
        strict_trigger_validation: Some(false),
        ..DatabaseSettings::default()
    };
    settings.deploy(source(1), 1_000, "admin");
    let text = settings.to_json();
    assert!(
        text.contains(r#""defaultWriteSizeLimit":"small""#),
        "{text}"
    );
    assert_eq!(DatabaseSettings::parse(&text).expect("parses"), settings);
    assert_eq!(settings.write_size_limit(), WriteSizeLimit::Small);
    assert!(!settings.strict_triggers());
}

#[test]
fn stage_release_canary_and_rollback() {
    let mut settings = DatabaseSettings::default();
    let first = settings.deploy(source(1), 1, "admin");
    let second = settings.stage(source(2), 2, "admin");
    assert_eq!((first.as_str(), second.as_str()), ("1", "2"));
    assert_eq!(
        settings.stable().map(|r| r.id.as_str()),
        Some("1"),
        "staging is not releasing"
    );
    let canary = Labels {
        stable: Some(first.clone()),
        canary: Some(second.clone()),
    };
    settings
        .set_labels(canary, 3, "admin")
        .expect("kept rulesets");
    assert_eq!(settings.labels.canary.as_deref(), Some("2"));
    let release = Labels {
        stable: Some(second.clone()),
        canary: None,
    };
    let stable = settings.set_labels(release, 4, "admin").expect("kept");
    assert_eq!(stable.source, source(2));
    assert_eq!(settings.rollback_target(None), Ok(first.clone()));
    assert_eq!(settings.rollback_target(Some("2")), Ok(second.clone()));
    assert_eq!(
        settings.rollback_target(Some("9")),
        Err(SettingsError::UnknownRuleset("9".into()))
    );
    assert_eq!(settings.releases.len(), 3, "every label change is kept");
}

#[test]
fn labels_must_name_kept_rulesets_and_a_stable_one() {
    let mut settings = DatabaseSettings::default();
    settings.deploy(source(1), 1, "admin");
    let before = settings.clone();
    let unknown = Labels {
        stable: Some("7".into()),
        canary: None,
    };
    assert_eq!(
        settings.set_labels(unknown, 2, "admin").map(|_| ()),
        Err(SettingsError::UnknownRuleset("7".into()))
    );
    let no_stable = Labels {
        stable: None,
        canary: Some("1".into()),
    };
    assert_eq!(
        settings.set_labels(no_stable, 2, "admin").map(|_| ()),
        Err(SettingsError::NoStable)
    );
    assert_eq!(settings, before, "a refused change changes nothing");
    assert_eq!(
        DatabaseSettings::default().rollback_target(None),
        Err(SettingsError::NothingToRollBackTo)
    );
}

#[test]
fn the_history_is_bounded_and_keeps_labelled_rulesets() {
    let mut settings = DatabaseSettings::default();
    let kept = settings.deploy(source(0), 0, "admin");
    for n in 1..=MAX_RULESETS_KEPT * 2 {
        settings.stage(source(n), n as u64, "admin");
    }
    assert_eq!(settings.rulesets.len(), MAX_RULESETS_KEPT);
    assert!(
        settings.ruleset(&kept).is_some(),
        "the stable ruleset stays"
    );
    assert_eq!(
        settings.rulesets.last().map(|r| r.id.clone()),
        Some((MAX_RULESETS_KEPT * 2 + 1).to_string())
    );
    // Ids are never reused once dropped.
    let next = settings.stage(source(0), 0, "admin");
    assert_eq!(next, (MAX_RULESETS_KEPT * 2 + 2).to_string());

    let big = "x".repeat(MAX_HISTORY_BYTES / 4 + 1);
    for n in 0..6 {
        settings.stage(big.clone(), n, "admin");
    }
    let bytes: usize = settings.rulesets.iter().map(|r| r.source.len()).sum();
    assert!(bytes <= MAX_HISTORY_BYTES, "{bytes}");
    assert!(settings.ruleset(&kept).is_some());

    for n in 0..MAX_RELEASES_KEPT as u64 + 5 {
        settings.deploy(source(1), n, "admin");
    }
    assert_eq!(settings.releases.len(), MAX_RELEASES_KEPT);
}
