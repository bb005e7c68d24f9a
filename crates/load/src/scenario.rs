//! Scenario files: which users, how many, and at what rates.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// The kind of simulated users.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Rooms of members who listen to their room and post a message now and then, with
    /// presence kept by onDisconnect.
    Chat,
    /// Rooms of players who write their position at a high rate, and a game master who
    /// updates a status node everyone listens to.
    Game,
    /// Score increments (`increment` server value) watched through a top-10 query.
    Leaderboard,
    /// REST reads of feed pages and writes of read offsets, as fast as the server answers.
    Feed,
    /// Quiet databases measured alone, then again while one hot database is driven hard.
    HotDb,
    /// Rooms of members who write their cursor position at a high rate under the room and
    /// listen to the whole room: the age of the newest position at each receiver is the
    /// event latency. The server marks `/cursors/volatile/$room/cursors` volatile
    /// (`crates/load/rules/cursors.rules.json`); with `volatile_paths: false` the same load
    /// goes to `/cursors/durable/...`, which is not, for comparison.
    Cursors,
}

/// The most connections one process opens: the file-descriptor limit here is 20,000. A run
/// over several tester processes (`--processes`) may open this many in each.
pub const MAX_CONNECTIONS: usize = 19_000;
/// The most databases a scenario spreads its rooms over (their names have four digits).
pub const MAX_DATABASES: usize = 10_000;

/// A scenario, as read from its file; every field but `kind` has a default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    pub kind: Kind,
    /// Namespace (database) name, or prefix where the scenario uses several.
    pub ns: String,
    /// Chat: the databases the rooms are spread over (room `r` in `{ns}-{r % databases}`,
    /// numbered from 0000); 1 puts every room in `ns` itself.
    pub databases: usize,
    pub connections: usize,
    pub warmup_secs: u64,
    pub duration_secs: u64,
    /// Members per room (chat, game).
    pub room_size: usize,
    /// Milliseconds between two writes of one writer.
    pub write_interval_ms: u64,
    /// Game: milliseconds between two status updates of a room's game master.
    pub status_interval_ms: u64,
    /// Leaderboard: the share of connections that write (the others only watch).
    pub writer_share: f64,
    /// Leaderboard: players whose scores move.
    pub players: usize,
    /// Hot-db: quiet databases, and connections driving the hot one.
    pub quiet_databases: usize,
    pub hot_connections: usize,
    pub hot_write_interval_ms: u64,
    /// Feed: users with a feed, and feed items per page.
    pub users: usize,
    pub page_items: usize,
    /// Feed: one request in this many is a write of the read offset.
    pub write_every: u64,
    /// Cursors: write under the volatile paths (`/cursors/volatile`) or durable ones.
    pub volatile_paths: bool,
    /// Connections opened per second, over all tester processes, the first at once; 0 opens
    /// them all at once. A ramp keeps tens of thousands of simultaneous handshakes from
    /// overflowing a load balancer's and the servers' accept queues (they then drop the
    /// connections and every client starts with a reconnect).
    pub connect_per_sec: u64,
    /// Each connection signs in first (over the realtime protocol, with an unsigned token a
    /// `--dev` server accepts): `"each"` as its own user (`u000000`, `u000001`, ...), any
    /// other text as that one user. None: anonymous.
    pub sign_in: Option<String>,
}

impl Default for Scenario {
    fn default() -> Scenario {
        Scenario {
            kind: Kind::Chat,
            ns: "load".to_owned(),
            databases: 1,
            connections: 200,
            warmup_secs: 2,
            duration_secs: 10,
            room_size: 20,
            write_interval_ms: 10_000,
            status_interval_ms: 1_000,
            writer_share: 0.1,
            players: 1_000,
            quiet_databases: 4,
            hot_connections: 20,
            hot_write_interval_ms: 2,
            users: 1_000,
            page_items: 20,
            write_every: 10,
            volatile_paths: true,
            connect_per_sec: 0,
            sign_in: None,
        }
    }
}

impl Scenario {
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let scenario: Scenario = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid scenario", path.display()))?;
        scenario.check()?;
        Ok(scenario)
    }

    /// Whether `processes` tester processes can hold the scenario's connections (checked
    /// once `--connections` and `--processes` are known).
    pub fn check_connections(&self, processes: usize) -> anyhow::Result<()> {
        let most = MAX_CONNECTIONS * processes.max(1);
        anyhow::ensure!(
            (1..=most).contains(&self.connections),
            "connections must be 1 to {most} ({MAX_CONNECTIONS} per tester process, {} processes)",
            processes.max(1)
        );
        Ok(())
    }

    fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.connections >= 1, "connections must be at least 1");
        anyhow::ensure!(self.room_size >= 1, "room_size must be at least 1");
        anyhow::ensure!(
            (1..=MAX_DATABASES).contains(&self.databases),
            "databases must be 1 to {MAX_DATABASES}"
        );
        anyhow::ensure!(
            self.write_interval_ms >= 1,
            "write_interval_ms must be at least 1"
        );
        anyhow::ensure!(
            self.status_interval_ms >= 1,
            "status_interval_ms must be at least 1"
        );
        anyhow::ensure!(
            self.hot_write_interval_ms >= 1,
            "hot_write_interval_ms must be at least 1"
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.writer_share),
            "writer_share is a fraction"
        );
        anyhow::ensure!(
            self.players >= 1 && self.users >= 1,
            "players and users must be at least 1"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_take_defaults_and_refuse_unknown_fields() -> anyhow::Result<()> {
        let scenario: Scenario = serde_json::from_str(r#"{"kind": "hot-db", "connections": 50}"#)?;
        assert_eq!(scenario.kind, Kind::HotDb);
        assert_eq!(scenario.room_size, 20);
        assert!(serde_json::from_str::<Scenario>(r#"{"kind": "chat", "rooms": 3}"#).is_err());
        Ok(())
    }

    #[test]
    fn the_shipped_scenarios_are_valid() -> anyhow::Result<()> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir)? {
            Scenario::load(&entry?.path())?;
            seen += 1;
        }
        assert_eq!(seen, 8);
        Ok(())
    }

    #[test]
    fn each_tester_process_holds_at_most_its_share_of_connections() -> anyhow::Result<()> {
        let mut scenario: Scenario = serde_json::from_str(r#"{"kind": "chat"}"#)?;
        scenario.connections = 75_000;
        assert!(scenario.check_connections(1).is_err());
        assert!(scenario.check_connections(3).is_err());
        scenario.check_connections(4)?;
        scenario.connections = 0;
        assert!(scenario.check_connections(4).is_err());
        Ok(())
    }
}
