//! A database as its shard holds it: the engine, and the bookkeeping that durability and
//! eviction need around it.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use hearth_sync::{AuthState, ConnId, Database};
use hearth_tree::Path;

use hearth_persist::{DatabaseFacts, DurableState, ShardStore};

use crate::caller_limits::{CallerLimits, Identity, LimitRefusal};
use crate::quotas::{QuotaRefusal, QuotaUse, WriteSize};
use crate::watchers::{Feeds, Profilers};
use hearth_ground::settings::DatabaseSettings;

/// A loaded database.
pub struct Loaded {
    name: Rc<str>,
    engine: Database,
    /// The sequence number of the database's last log record, shared with the outbound
    /// queues of its clients, which tag their messages with it.
    seq: Rc<Cell<u64>>,
    /// The database as of the durable position of the log: what a snapshot writes and what
    /// the database falls back to if the log fails.
    durable: DurableState,
    /// The rules text set through the API, as it is now (`None`: the server's default).
    rules: Option<std::sync::Arc<str>>,
    /// Its settings and ruleset history (`settings.rs`), and their text as last logged
    /// (`None`: never set).
    settings: DatabaseSettings,
    settings_text: Option<std::sync::Arc<str>>,
    /// Whether the server keeps an audit trail, and whether a database that sets nothing is
    /// audited (`--audit`): with its settings, whether its engine audits its writes.
    audit_policy: (bool, bool),
    /// What its clients used of its rate quotas (`quotas.rs`).
    quota_use: QuotaUse,
    /// What each caller uses of the limits its rules declare (`caller_limits`).
    caller_limits: CallerLimits,
    /// Log bytes written for this database since its last snapshot.
    wal_bytes: u64,
    /// When its last snapshot was taken (or when it was loaded).
    last_snapshot_ms: u64,
    snapshot_running: bool,
    /// When a request last touched it, for eviction.
    last_used_ms: u64,
    /// Whether anything of it is on disk (recovered, or a record was appended): a database
    /// that never was can be dropped without a snapshot.
    on_disk: bool,
    /// Whether its creation was logged (at its first write, whatever the durability).
    announced: bool,
    /// Why writes are refused for a reason of the cluster's (`cluster::fence`, or a
    /// follower's copy): the fence sets and lifts it.
    fence_reason: Option<std::sync::Arc<str>>,
    /// Why writes are refused for a reason the fence never lifts (the log failed, it could
    /// not be loaded). The engine refuses writes while either is set, and says this one
    /// first; only [`Loaded::set_read_only`] and [`Loaded::fence`] change them, so neither
    /// can lift the other's.
    held_reason: Option<std::sync::Arc<str>>,
    /// The fencing epoch of this node's claim on it, set by the fence whenever it allows
    /// writes; its log records carry it. `None` outside a cluster: records then carry the
    /// epoch the log last had for the database (0 unless the directory was a cluster node's).
    epoch: Option<u64>,
    /// While this node hands the database over to its follower (`replica::hand_over`), the
    /// epoch of the claim it hands over: the fence refuses writes for as long as this node's
    /// claim is still at that epoch.
    moving: Option<u64>,
    /// Writes applied since it was loaded (for the metrics' busiest databases).
    writes: u64,
    /// Its recent write records and the change feeds open on it (`feed.rs`).
    feeds: Feeds,
    /// The profilers watching it (`profile.rs`).
    profilers: Profilers,
}

impl Loaded {
    pub fn new(name: Rc<str>, engine: Database, seq: u64, now_ms: u64) -> Loaded {
        let durable = DurableState {
            root: engine.root().clone(),
            rules: None,
            settings: None,
        };
        Loaded {
            name,
            engine,
            seq: Rc::new(Cell::new(seq)),
            durable,
            rules: None,
            settings: DatabaseSettings::default(),
            settings_text: None,
            audit_policy: (false, false),
            quota_use: QuotaUse::default(),
            caller_limits: CallerLimits::default(),
            wal_bytes: 0,
            last_snapshot_ms: now_ms,
            snapshot_running: false,
            last_used_ms: now_ms,
            on_disk: false,
            announced: false,
            fence_reason: None,
            held_reason: None,
            epoch: None,
            moving: None,
            writes: 0,
            feeds: Feeds::new(seq),
            profilers: Profilers::default(),
        }
    }

    /// Takes the database's triggers from the registry `source` gives from now on
    /// (`trigger_queue`).
    pub fn follow_triggers<S: hearth_sync::triggers::TriggerSource + 'static>(
        &mut self,
        source: impl FnOnce() -> std::sync::Arc<S>,
    ) {
        self.engine.follow_triggers(source, &self.name);
    }

    /// Its recent write records and the change feeds open on it.
    pub fn feeds(&self) -> &Feeds {
        &self.feeds
    }

    pub fn feeds_mut(&mut self) -> &mut Feeds {
        &mut self.feeds
    }

    /// The profilers watching it.
    pub fn profilers(&self) -> &Profilers {
        &self.profilers
    }

    pub fn profilers_mut(&mut self) -> &mut Profilers {
        &mut self.profilers
    }

    /// Its name, shared with what keeps a handle on it (the replication shipper).
    pub fn name(&self) -> &Rc<str> {
        &self.name
    }

    /// The sequence number of its last log record (`u64::MAX` after the log refused one).
    pub fn seq(&self) -> u64 {
        self.seq.get()
    }

    /// The cell that holds [`Loaded::seq`], for the tagger of a client's outbound queue (and
    /// whoever else must see the position move without holding the database).
    pub fn shared_seq(&self) -> Rc<Cell<u64>> {
        self.seq.clone()
    }

    /// It as of the durable position of the log: what a backup or a snapshot takes.
    pub fn durable(&self) -> &DurableState {
        &self.durable
    }

    /// Its writes up to the log's new durable position reached the disk: `state` is what it
    /// holds as of there, which a snapshot or a rollback then starts from.
    pub fn made_durable(&mut self, state: DurableState) {
        self.durable = state;
    }

    /// It was just read from disk (a snapshot, or the log at start): what it holds now is
    /// durable, and it must not be dropped as if it never was.
    pub fn loaded_from_disk(&mut self) {
        self.durable = self.state();
        self.on_disk = true;
    }

    /// It is on disk but could not be read (the caller locks it): it must not be dropped as
    /// if it never was, which would lose what its files hold.
    pub fn unreadable_on_disk(&mut self) {
        self.on_disk = true;
    }

    /// Whether anything of it is on disk (recovered, or a record was appended).
    pub fn is_on_disk(&self) -> bool {
        self.on_disk
    }

    /// The rules text set through the API (`None`: the server's default), which a full copy
    /// to a follower carries.
    pub fn rules(&self) -> Option<&str> {
        self.rules.as_deref()
    }

    /// The rules text set through the API changed to `text` (`None`: the server's default);
    /// the caller gave the engine the rules. Later log records remember it with the tree.
    pub fn set_rules(&mut self, text: Option<std::sync::Arc<str>>) {
        self.rules = text;
    }

    /// Its settings and ruleset history.
    pub fn settings(&self) -> &DatabaseSettings {
        &self.settings
    }

    /// Admits a write of `size` by a client that is not an admin, at `now_ms`, or says which of
    /// its quotas refuses it.
    pub fn admit_write(&mut self, size: WriteSize, now_ms: u64) -> Result<(), QuotaRefusal> {
        let quotas = self.settings.quotas;
        if quotas.is_empty() {
            return Ok(());
        }
        let stored = self.engine.root().estimated_bytes() as u64;
        self.quota_use.admit_write(&quotas, size, stored, now_ms)
    }

    /// Whether a quota limits its writes (writes, bytes written or stored).
    pub fn limits_writes(&self) -> bool {
        let quotas = &self.settings.quotas;
        quotas.writes_per_second.is_some()
            || quotas.write_bytes_per_minute.is_some()
            || quotas.stored_bytes.is_some()
    }

    /// Counts session `conn` of `identity` for the rules' limits, or refuses it past the
    /// root's `connections` limit.
    pub fn admit_caller(&mut self, conn: ConnId, identity: Identity) -> Result<(), LimitRefusal> {
        self.caller_limits.open(&self.engine, conn, identity)
    }

    /// Follows its sessions for the limits per caller while its rules declare some, from
    /// `open()` (its sessions now, with their addresses) when they come to; forgets them when
    /// they no longer do. Cheap when nothing changed.
    pub fn follow_callers(
        &mut self,
        open: impl FnOnce() -> Vec<(ConnId, Option<std::net::IpAddr>)>,
    ) {
        if !self.callers_out_of_step() {
            return;
        }
        let wanted = self.has_caller_limits();
        if !wanted {
            self.caller_limits.stop();
            return;
        }
        let engine = &self.engine;
        let sessions = open().into_iter().map(|(conn, address)| {
            let auth = engine.auth(conn).cloned().unwrap_or_default();
            (conn, Identity::of(&auth, address))
        });
        self.caller_limits.start(sessions);
    }

    /// Whether its sessions are followed for the limits per caller while its rules declare
    /// none, or not while they do: [`Loaded::follow_callers`] has work to do.
    pub fn callers_out_of_step(&self) -> bool {
        self.has_caller_limits() != self.caller_limits.tracking()
    }

    /// Session `conn` asks for data: an anonymous one is counted by its address from now on,
    /// or refused past the root's `connections` limit.
    pub fn claim_caller(&mut self, conn: ConnId) -> Result<(), LimitRefusal> {
        self.caller_limits.claim(&self.engine, conn)
    }

    /// Session `conn` signed in (or out) as `auth`; refused past the new caller's
    /// `connections` limit.
    pub fn caller_signed_in(&mut self, conn: ConnId, auth: &AuthState) -> Result<(), LimitRefusal> {
        self.caller_limits.signed_in(&self.engine, conn, auth)
    }

    /// Session `conn` ended or moved away: it no longer counts.
    pub fn forget_caller(&mut self, conn: ConnId) {
        self.caller_limits.close(conn);
    }

    /// Who session `conn` is, for the limits.
    pub fn caller(&self, conn: ConnId) -> Identity {
        self.caller_limits.identity(conn)
    }

    /// Admits a new listen at `path` by session `conn` under the rules' `listens` limits.
    pub fn admit_caller_listen(
        &mut self,
        conn: ConnId,
        path: &Path,
        tag: Option<hearth_sync::Tag>,
    ) -> Result<(), LimitRefusal> {
        self.caller_limits
            .admit_listen(&self.engine, conn, path, tag)
    }

    /// Admits a write at `path` of about `bytes` by `caller` under the rules' `writes` and
    /// `bytes` limits.
    pub fn admit_caller_write(
        &mut self,
        caller: &Identity,
        path: &Path,
        bytes: u64,
        now_ms: u64,
    ) -> Result<(), LimitRefusal> {
        self.caller_limits
            .admit_write(&self.engine, caller, path, bytes, now_ms)
    }

    /// Whether its rules declare limits per caller.
    pub fn has_caller_limits(&self) -> bool {
        matches!(self.engine.access(), hearth_sync::Access::Rules(rules) if rules.has_limits())
    }

    /// Whether one more session may open on it.
    pub fn admit_session(&self) -> Result<(), QuotaRefusal> {
        crate::quotas::admit_session(&self.settings.quotas, self.session_count())
    }

    /// Its settings document as last set, for a full copy to a follower.
    pub fn settings_text(&self) -> Option<&str> {
        self.settings_text.as_deref()
    }

    /// Its settings document is `text` (`None`: never set), as recovered, loaded or
    /// replicated. A text that is not a settings document (written by a newer build) leaves
    /// the defaults in effect but is kept as it is, so that it is not lost.
    pub fn set_settings(&mut self, text: Option<std::sync::Arc<str>>) {
        self.settings = match text.as_deref().map(DatabaseSettings::parse) {
            Some(Ok(settings)) => settings,
            Some(Err(error)) => {
                tracing::warn!(namespace = %self.name, %error, "the stored settings are not understood; the defaults apply");
                DatabaseSettings::default()
            }
            None => DatabaseSettings::default(),
        };
        self.engine
            .set_strict_triggers(self.settings.strict_triggers());
        self.settings_text = text;
        self.apply_audit();
    }

    /// The server keeps an audit trail (`available`) and audits databases that set nothing
    /// (`by_default`): its writes are audited as its settings say.
    pub fn set_audit_policy(&mut self, available: bool, by_default: bool) {
        self.audit_policy = (available, by_default);
        self.apply_audit();
    }

    fn apply_audit(&mut self) {
        let (available, by_default) = self.audit_policy;
        self.engine
            .set_audited(available && self.settings.audited(by_default));
    }

    /// Whether its writes are audited.
    pub fn is_audited(&self) -> bool {
        self.engine.is_audited()
    }

    /// Its settings become `settings`: returns their text, for the caller to log.
    pub fn replace_settings(&mut self, settings: DatabaseSettings) -> std::sync::Arc<str> {
        let text: std::sync::Arc<str> = settings.to_json().into();
        self.engine.set_strict_triggers(settings.strict_triggers());
        self.settings = settings;
        self.settings_text = Some(text.clone());
        self.apply_audit();
        text
    }

    /// A request touched it at `now`: eviction waits for it to be idle again.
    pub fn touched(&mut self, now: u64) {
        self.last_used_ms = now;
    }

    /// A write was applied to it, for the metrics' busiest databases.
    pub fn wrote(&mut self) {
        self.writes += 1;
    }

    /// Writes applied to it since it was loaded.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// A record of it is about to be logged: whether that record is the one that creates it
    /// (nothing of it on disk, none announced before), which the caller says once.
    pub fn announce(&mut self) -> bool {
        let first = !self.on_disk && !self.announced;
        if first {
            self.announced = true;
        }
        first
    }

    /// Whether it is read-only for a reason of the cluster's (`cluster::fence`, or a
    /// follower's copy), which the fence may lift, rather than one the fence never clears.
    pub fn is_fenced(&self) -> bool {
        self.fence_reason.is_some()
    }

    /// Whether writes are refused for a reason the fence never lifts.
    pub fn is_held_read_only(&self) -> bool {
        self.held_reason.is_some()
    }

    /// Refuses writes for a reason the fence never lifts (`Some`: the log failed, the
    /// database could not be loaded), or takes that reason back (`None`); a refusal of the
    /// fence's stays either way. This shadows [`Database::set_read_only`], which nothing
    /// outside this file calls, so that the two reasons cannot overwrite each other.
    pub fn set_read_only(&mut self, reason: Option<std::sync::Arc<str>>) {
        self.held_reason = reason;
        self.refuse_writes_as_decided();
    }

    /// Tells the engine the reason writes are refused now, if any.
    fn refuse_writes_as_decided(&mut self) {
        let reason = self
            .held_reason
            .clone()
            .or_else(|| self.fence_reason.clone());
        self.engine.set_read_only(reason);
    }

    /// The fence's verdict on it (`cluster::fence`): writes refused for `refusal`, or, with
    /// `None`, allowed again if they were refused for a reason of the cluster's; a reason the
    /// fence did not set (the log failed, it could not be loaded) stays. The same reason given
    /// again changes nothing.
    pub fn fence(&mut self, refusal: Option<&str>) {
        if self.fence_reason.as_deref() == refusal {
            return;
        }
        self.fence_reason = refusal.map(std::sync::Arc::from);
        self.refuse_writes_as_decided();
    }

    /// The fencing epoch its log records carry now; `None` outside a cluster, where they
    /// carry the log's last epoch for it.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Its log records carry `epoch` from now on: this node's claim, as the fence allows
    /// it, or the owner's, for records a follower copies.
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = Some(epoch);
    }

    /// The epoch of the claim this node is handing over to its follower, if it is.
    pub fn moving(&self) -> Option<u64> {
        self.moving
    }

    /// This node starts handing it over under its claim at `epoch`: the fence refuses
    /// writes while that claim stands.
    pub fn begin_move(&mut self, epoch: u64) {
        self.moving = Some(epoch);
    }

    /// The hand-over is over (given up, or the claim handed over is gone): the fence goes
    /// back to its usual checks.
    pub fn end_move(&mut self) {
        self.moving = None;
    }

    /// Appends a record for it to `store`'s log, after its engine applied the change. If the
    /// log cannot take it, its last record becomes unreachable (`u64::MAX`), so its clients
    /// are held (the change is in memory but will never be durable) until the failure is
    /// handled; the caller reports the error.
    pub fn log_to(
        &mut self,
        store: &ShardStore,
        body: hearth_store::RecordRef<'_>,
    ) -> Result<(), hearth_store::StoreError> {
        match store.append(&self.name, self.epoch, body, self.state()) {
            Ok(appended) => {
                self.seq.set(appended.seq);
                self.wal_bytes += appended.bytes;
                self.on_disk = true;
                Ok(())
            }
            Err(error) => {
                self.seq.set(u64::MAX);
                Err(error)
            }
        }
    }

    /// A snapshot of it starts at `now`: returns the durable state it writes.
    pub fn begin_snapshot(&mut self, now: u64) -> DurableState {
        self.snapshot_running = true;
        self.wal_bytes = 0;
        self.last_snapshot_ms = now;
        // Volatile data lives in memory only (docs/volatile.md).
        let mut state = self.durable.clone();
        if let hearth_sync::Access::Rules(rules) = self.engine.access() {
            if rules.has_volatile() {
                state.root = rules.without_volatile(&state.root);
            }
        }
        state
    }

    /// The snapshot [`Loaded::begin_snapshot`] started is written or failed: another may
    /// start.
    pub fn end_snapshot(&mut self) {
        self.snapshot_running = false;
    }

    /// Whether its log holds records since its last snapshot began and no snapshot of it
    /// runs: what a snapshot taken now would cover that none does.
    pub fn has_log_to_snapshot(&self) -> bool {
        self.wal_bytes > 0 && !self.snapshot_running
    }

    /// Whether a snapshot of it is being written, for the simulation's checks.
    #[cfg(test)]
    pub fn snapshot_running(&self) -> bool {
        self.snapshot_running
    }

    /// Goes back to the durable state, at log position `durable`, because the log failed
    /// before its later writes reached the disk. Returns the rules text of that state, for
    /// the shard to apply again.
    pub fn roll_back(&mut self, durable: u64) -> Option<std::sync::Arc<str>> {
        self.engine = Database::with_root(self.durable.root.clone());
        self.refuse_writes_as_decided();
        self.seq.set(durable);
        self.feeds.roll_back(durable);
        let settings = self.durable.settings.clone();
        self.set_settings(settings);
        self.durable.rules.clone()
    }

    /// What the durability pipeline decides from (see `hearth_persist::Pipeline`).
    pub fn facts<'a>(&self, name: &'a str, newest_snapshot: Option<u64>) -> DatabaseFacts<'a> {
        DatabaseFacts {
            name,
            seq: self.seq.get(),
            wal_bytes: self.wal_bytes,
            last_snapshot_ms: self.last_snapshot_ms,
            snapshot_running: self.snapshot_running,
            last_used_ms: self.last_used_ms,
            sessions: self.session_count(),
            on_disk: self.on_disk,
            newest_snapshot,
        }
    }

    /// The state to remember with a log record appended now.
    pub fn state(&self) -> DurableState {
        DurableState {
            root: self.engine.root().clone(),
            rules: self.rules.clone(),
            settings: self.settings_text.clone(),
        }
    }
}

impl Deref for Loaded {
    type Target = Database;

    fn deref(&self) -> &Database {
        &self.engine
    }
}

impl DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut Database {
        &mut self.engine
    }
}
