//! A database's settings document: what `/.settings` holds besides the rules in effect. The
//! two settings of Firebase's CLI (`defaultWriteSizeLimit`, `strictTriggerValidation`), and
//! the ruleset history behind `database:rules:stage|release|canary` and `hearth rules
//! history|rollback`: every ruleset staged or deployed, the `stable` and `canary` labels, and
//! every change of the labels (docs/settings.md).
//!
//! Plain data with its JSON form: the owner keeps one per database, logs it whole
//! (`RecordBody::Settings`) after each change and snapshots it. The history is bounded: at
//! most [`MAX_RULESETS_KEPT`] rulesets within [`MAX_HISTORY_BYTES`] of sources, the oldest
//! unlabelled ones dropped first, and the last [`MAX_RELEASES_KEPT`] label changes.

use serde::{Deserialize, Serialize};

use crate::rest::WriteSizeLimit;

/// Rulesets a database's history keeps.
pub const MAX_RULESETS_KEPT: usize = 50;

/// Bytes of ruleset sources a database's history keeps (a ruleset is at most
/// `hearth_rules::MAX_RULES_BYTES`, 256 KiB).
pub const MAX_HISTORY_BYTES: usize = 8 * 1024 * 1024;

/// Label changes (releases, canaries, rollbacks) a database's history keeps.
pub const MAX_RELEASES_KEPT: usize = 100;

/// A database's settings document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DatabaseSettings {
    /// The `writeSizeLimit` of a REST write that names none (`None`: no limit beyond the body
    /// limit, which `GET` reports as `unlimited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_write_size_limit: Option<WriteSizeTier>,
    /// Whether a write that would trigger more than a write reports is refused rather than
    /// delivered in part (`None`: the default, `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_trigger_validation: Option<bool>,
    /// Whether clients without a valid App Check token are refused (`None`: the server's
    /// `--app-check-enforce`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_check: Option<AppCheckMode>,
    /// What the database's clients may use (`None` in a field: no quota).
    #[serde(default, skip_serializing_if = "Quotas::is_empty")]
    pub quotas: Quotas,
    /// Whether its writes are audited, and for how long the trail keeps them (docs/audit.md).
    #[serde(default, skip_serializing_if = "AuditSetting::is_unset")]
    pub audit: AuditSetting,
    /// Rulesets, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rulesets: Vec<Ruleset>,
    #[serde(default)]
    pub labels: Labels,
    /// Label changes, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub releases: Vec<Release>,
    /// The number the next ruleset's id takes: ids are never reused, even once dropped.
    #[serde(default)]
    pub next_ruleset: u64,
}

/// The tiers a database's default write limit may be: Firebase's CLI refuses `tiny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteSizeTier {
    Small,
    Medium,
    Large,
    Unlimited,
}

impl WriteSizeTier {
    pub fn limit(self) -> WriteSizeLimit {
        match self {
            WriteSizeTier::Small => WriteSizeLimit::Small,
            WriteSizeTier::Medium => WriteSizeLimit::Medium,
            WriteSizeTier::Large => WriteSizeLimit::Large,
            WriteSizeTier::Unlimited => WriteSizeLimit::Unlimited,
        }
    }
}

/// The largest value a quota may take (a terabyte, a trillion writes).
pub const MAX_QUOTA: u64 = 1 << 40;

/// A database's quotas (docs/quotas.md): what all its clients together may use, admins aside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quotas {
    /// Sessions open at once (realtime connections and event streams).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// Writes a second (a burst of one second's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes_per_second: Option<u64>,
    /// Bytes written a minute (a burst of one minute's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bytes_per_minute: Option<u64>,
    /// Bytes the data may take (the tree's estimate): past it only deletions are accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_bytes: Option<u64>,
}

impl Quotas {
    pub fn is_empty(&self) -> bool {
        *self == Quotas::default()
    }

    /// Why a document of quotas is refused: a value of 0 or past [`MAX_QUOTA`].
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("connections", self.connections),
            ("writesPerSecond", self.writes_per_second),
            ("writeBytesPerMinute", self.write_bytes_per_minute),
            ("storedBytes", self.stored_bytes),
        ];
        for (name, value) in fields {
            if value.is_some_and(|value| value == 0 || value > MAX_QUOTA) {
                return Err(format!(
                    "{name} must be a whole number from 1 to {MAX_QUOTA}, or null"
                ));
            }
        }
        Ok(())
    }
}

/// A database's audit trail (docs/audit.md): `None` in a field is the server's default
/// (`--audit`, `--audit-retention-days`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditSetting {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Days its entries are kept, from 1 to `hearth_audit::MAX_RETENTION_DAYS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
}

/// The longest retention a database may set (ten years, as `hearth_audit` keeps it).
pub const MAX_AUDIT_RETENTION_DAYS: u32 = 3_650;

impl AuditSetting {
    pub fn is_unset(&self) -> bool {
        *self == AuditSetting::default()
    }

    /// Why a setting is refused: a retention of 0 days or past the most.
    pub fn check(&self) -> Result<(), String> {
        match self.retention_days {
            Some(days) if days == 0 || days > MAX_AUDIT_RETENTION_DAYS => Err(format!(
                "retentionDays must be a whole number from 1 to {MAX_AUDIT_RETENTION_DAYS}, or null"
            )),
            _ => Ok(()),
        }
    }
}

/// App Check's enforcement on a database, as Firebase's console names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppCheckMode {
    /// Tokens are verified and counted; requests without one are served.
    Unenforced,
    /// Requests without a valid token are refused.
    Enforced,
}

/// One ruleset of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ruleset {
    pub id: String,
    /// When it was staged, in milliseconds since the epoch.
    pub created_ms: u64,
    /// Who staged it (the credential's kind, and where the change came from).
    pub by: String,
    pub source: String,
}

/// The labels: `stable` is the ruleset in effect; `canary` a ruleset marked for trial (kept
/// and shown, not served: Hearth serves every client the stable one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<String>,
}

/// One change of the labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Release {
    pub at_ms: u64,
    pub by: String,
    pub labels: Labels,
}

/// Why a change of the history is refused (a 400, or a 404 for an unknown ruleset).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("no ruleset {0} is kept for this database")]
    UnknownRuleset(String),
    #[error("the labels must name a stable ruleset")]
    NoStable,
    #[error("there is no earlier stable ruleset to roll back to")]
    NothingToRollBackTo,
}

impl DatabaseSettings {
    /// The document as stored, or why a text is not one (the caller falls back to the
    /// defaults and says so).
    pub fn parse(text: &str) -> Result<DatabaseSettings, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and lists always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The `writeSizeLimit` of a REST write that names none.
    pub fn write_size_limit(&self) -> WriteSizeLimit {
        self.default_write_size_limit
            .map_or(WriteSizeLimit::Default, WriteSizeTier::limit)
    }

    /// Whether App Check is enforced, given the server's default.
    pub fn app_check_enforced(&self, server_default: bool) -> bool {
        self.app_check
            .map_or(server_default, |mode| mode == AppCheckMode::Enforced)
    }

    /// Whether its writes are audited: its own setting, else the server's `--audit`.
    pub fn audited(&self, server_default: bool) -> bool {
        self.audit.enabled.unwrap_or(server_default)
    }

    /// Days its audit trail keeps: its own setting, else the server's.
    pub fn audit_retention(&self, server_default: u32) -> u32 {
        self.audit.retention_days.unwrap_or(server_default)
    }

    /// `strictTriggerValidation`, `true` unless set otherwise.
    pub fn strict_triggers(&self) -> bool {
        self.strict_trigger_validation.unwrap_or(true)
    }

    pub fn ruleset(&self, id: &str) -> Option<&Ruleset> {
        self.rulesets.iter().find(|ruleset| ruleset.id == id)
    }

    /// Keeps `source` (already compiled by the caller) as a new ruleset; returns its id.
    pub fn stage(&mut self, source: String, now_ms: u64, by: &str) -> String {
        self.next_ruleset = self.next_ruleset.max(1);
        let id = self.next_ruleset.to_string();
        self.next_ruleset += 1;
        self.rulesets.push(Ruleset {
            id: id.clone(),
            created_ms: now_ms,
            by: by.to_owned(),
            source,
        });
        self.trim();
        id
    }

    /// Moves the labels; returns the ruleset now stable. Both must name kept rulesets.
    pub fn set_labels(
        &mut self,
        labels: Labels,
        now_ms: u64,
        by: &str,
    ) -> Result<&Ruleset, SettingsError> {
        let Some(stable) = labels.stable.as_deref() else {
            return Err(SettingsError::NoStable);
        };
        for id in [Some(stable), labels.canary.as_deref()]
            .into_iter()
            .flatten()
        {
            if self.ruleset(id).is_none() {
                return Err(SettingsError::UnknownRuleset(id.to_owned()));
            }
        }
        self.labels = labels.clone();
        self.releases.push(Release {
            at_ms: now_ms,
            by: by.to_owned(),
            labels,
        });
        if self.releases.len() > MAX_RELEASES_KEPT {
            let excess = self.releases.len() - MAX_RELEASES_KEPT;
            self.releases.drain(..excess);
        }
        self.stable().ok_or(SettingsError::NoStable)
    }

    /// A deploy (`PUT /.settings/rules.json`): staged and made stable at once.
    pub fn deploy(&mut self, source: String, now_ms: u64, by: &str) -> String {
        let id = self.stage(source, now_ms, by);
        let labels = Labels {
            stable: Some(id.clone()),
            canary: self.labels.canary.clone(),
        };
        // The id was just kept and the canary, if any, is kept: this cannot fail.
        let _ = self.set_labels(labels, now_ms, by);
        id
    }

    /// The ruleset a rollback makes stable: `to`, or else the stable ruleset before the
    /// current one (the newest earlier release whose stable ruleset differs and is kept).
    pub fn rollback_target(&self, to: Option<&str>) -> Result<String, SettingsError> {
        if let Some(id) = to {
            return match self.ruleset(id) {
                Some(ruleset) => Ok(ruleset.id.clone()),
                None => Err(SettingsError::UnknownRuleset(id.to_owned())),
            };
        }
        let current = self.labels.stable.as_deref();
        self.releases
            .iter()
            .rev()
            .filter_map(|release| release.labels.stable.as_deref())
            .find(|id| Some(*id) != current && self.ruleset(id).is_some())
            .map(str::to_owned)
            .ok_or(SettingsError::NothingToRollBackTo)
    }

    /// The stable ruleset, if there is one.
    pub fn stable(&self) -> Option<&Ruleset> {
        self.ruleset(self.labels.stable.as_deref()?)
    }

    /// Drops the oldest unlabelled rulesets past the bounds.
    fn trim(&mut self) {
        let labelled = |ruleset: &Ruleset, labels: &Labels| {
            labels.stable.as_deref() == Some(&ruleset.id)
                || labels.canary.as_deref() == Some(&ruleset.id)
        };
        loop {
            let bytes: usize = self.rulesets.iter().map(|r| r.source.len()).sum();
            if self.rulesets.len() <= MAX_RULESETS_KEPT && bytes <= MAX_HISTORY_BYTES {
                return;
            }
            // The newest is never dropped: it was just staged.
            let last = self.rulesets.len().saturating_sub(1);
            let Some(oldest) = self.rulesets[..last]
                .iter()
                .position(|ruleset| !labelled(ruleset, &self.labels))
            else {
                return;
            };
            self.rulesets.remove(oldest);
        }
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
