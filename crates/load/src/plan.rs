//! What each simulated user does: the databases it uses, what it listens to and what it
//! writes how often. A plan is pure data, made from the scenario before any connection opens.

use std::time::Duration;

use serde_json::{json, Value};

use crate::scenario::{Kind, Scenario};

/// One connection's plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub index: usize,
    pub ns: String,
    /// The group its latencies are reported under (hot-db tells quiet from hot).
    pub group: &'static str,
    pub listens: Vec<Listen>,
    pub writers: Vec<Writer>,
    /// A presence path set to true now and to false by onDisconnect.
    pub presence: Option<String>,
    /// When the connection opens, after the start of the run.
    pub start_after: Duration,
    /// The uid it signs in as before anything else (`sign_in` of the scenario), with an
    /// unsigned token that only a development server (`--dev`) accepts.
    pub sign_in: Option<String>,
}

impl Plan {
    /// A chat member's room for the bare fan-out baselines (Redis, the broadcast server):
    /// the path it listens to.
    pub fn room(&self) -> anyhow::Result<String> {
        self.listens
            .first()
            .map(|listen| listen.path.clone())
            .ok_or_else(|| anyhow::anyhow!("a pub/sub member needs a room to listen to"))
    }
}

#[derive(Debug, Clone)]
pub struct Listen {
    pub path: String,
    /// The query object (`q`), for a filtered listen.
    pub query: Option<Value>,
}

#[derive(Debug, Clone)]
pub struct Writer {
    pub interval: Duration,
    /// When the first write is due, after the connection's start.
    pub offset: Duration,
    pub write: Write,
}

/// What a writer writes; every value carries its send time `t` (µs since the epoch).
#[derive(Debug, Clone)]
pub enum Write {
    /// A chat message under `messages`, keyed by writer and sequence.
    Message { messages: String, uid: String },
    /// A value replaced in place (a position, a status).
    Set { path: String },
    /// An `increment` of a player's score (players picked with a skew towards the top).
    Score { scores: String, players: usize },
}

impl Write {
    /// The request (action and body) for the `n`-th write at time `t_us`.
    pub fn request(&self, n: u64, t_us: u64, random: u64) -> (&'static str, Value) {
        match self {
            // Keys sort by time, as push ids do: the room's limitToLast(20) window then
            // always takes a new message in (a key by writer would leave most of them
            // outside the window, and their listeners without an event).
            Write::Message { messages, uid } => (
                "p",
                json!({
                    "p": format!("{messages}/{t_us:017}-{uid}-{n}"),
                    "d": {"uid": uid, "text": "see you at the station at half past", "t": t_us},
                }),
            ),
            Write::Set { path } => (
                "p",
                json!({"p": path, "d": {"x": random % 1000, "y": (random >> 10) % 1000, "t": t_us}}),
            ),
            Write::Score { scores, players } => {
                // Cubing a uniform fraction skews picks towards low indexes: a few players
                // move often, as on a real leaderboard's top.
                let fraction = (random % 1_000_000) as f64 / 1_000_000.0;
                let player = ((fraction.powi(3) * *players as f64) as usize).min(players - 1);
                (
                    "m",
                    json!({
                        "p": format!("{scores}/p{player:05}"),
                        "d": {"score": {".sv": {"increment": 1}}, "t": t_us},
                    }),
                )
            }
        }
    }
}

/// A spread of first-write offsets, so that writers do not fire together.
fn offset(index: usize, interval: Duration) -> Duration {
    let spread = (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) % 10_000;
    interval.mul_f64(spread as f64 / 10_000.0)
}

/// The plans of every connection of the scenario (feed has none: it speaks REST).
pub fn plans(scenario: &Scenario) -> Vec<Plan> {
    let interval = Duration::from_millis(scenario.write_interval_ms);
    (0..scenario.connections)
        .filter_map(|index| match scenario.kind {
            Kind::Chat => Some(chat(scenario, index, interval)),
            Kind::Game => Some(game(scenario, index, interval)),
            Kind::Leaderboard => Some(leaderboard(scenario, index, interval)),
            Kind::HotDb => Some(quiet(scenario, index, interval)),
            Kind::Cursors => Some(cursors(scenario, index, interval)),
            Kind::Feed => None,
        })
        .chain(hot(scenario))
        .map(|mut plan| {
            plan.start_after += ramp_delay(scenario, plan.index);
            plan.sign_in = match scenario.sign_in.as_deref() {
                None => None,
                Some("each") => Some(format!("u{:06}", plan.index)),
                Some(uid) => Some(uid.to_owned()),
            };
            plan
        })
        .collect()
}

/// When connection `index` opens in the scenario's ramp (`connect_per_sec`): index / rate.
fn ramp_delay(scenario: &Scenario, index: usize) -> Duration {
    match scenario.connect_per_sec {
        0 => Duration::ZERO,
        rate => Duration::from_secs_f64(index as f64 / rate as f64),
    }
}

fn plain(path: String) -> Listen {
    Listen { path, query: None }
}

fn chat(scenario: &Scenario, index: usize, interval: Duration) -> Plan {
    let room = index / scenario.room_size;
    let uid = format!("u{index:06}");
    let messages = format!("/chat/rooms/r{room:05}/messages");
    Plan {
        index,
        ns: chat_database(scenario, room),
        group: "all",
        listens: vec![Listen {
            path: messages.clone(),
            // The last 20 messages by key, as a chat client shows them (limitToLast(20)).
            query: Some(json!({"i": ".key", "l": 20, "vf": "r"})),
        }],
        writers: vec![Writer {
            interval,
            offset: offset(index, interval),
            write: Write::Message {
                messages,
                uid: uid.clone(),
            },
        }],
        presence: Some(format!("/chat/presence/r{room:05}/{uid}")),
        sign_in: None,

        start_after: Duration::ZERO,
    }
}

/// The database of chat room `room`: the scenario's own, or one of `databases` numbered ones.
pub fn chat_database(scenario: &Scenario, room: usize) -> String {
    if scenario.databases <= 1 {
        scenario.ns.clone()
    } else {
        format!("{}-{:04}", scenario.ns, room % scenario.databases)
    }
}

fn game(scenario: &Scenario, index: usize, interval: Duration) -> Plan {
    let room = format!("/game/rooms/g{:05}", index / scenario.room_size);
    let mut writers = vec![Writer {
        interval,
        offset: offset(index, interval),
        write: Write::Set {
            path: format!("{room}/players/p{index:06}"),
        },
    }];
    if index.is_multiple_of(scenario.room_size) {
        let status = Duration::from_millis(scenario.status_interval_ms);
        writers.push(Writer {
            interval: status,
            offset: offset(index + 1, status),
            write: Write::Set {
                path: format!("{room}/hunt-status"),
            },
        });
    }
    Plan {
        index,
        ns: scenario.ns.clone(),
        group: "all",
        listens: vec![
            plain(format!("{room}/players")),
            plain(format!("{room}/hunt-status")),
        ],
        writers,
        presence: None,
        sign_in: None,

        start_after: Duration::ZERO,
    }
}

fn cursors(scenario: &Scenario, index: usize, interval: Duration) -> Plan {
    let side = if scenario.volatile_paths {
        "volatile"
    } else {
        "durable"
    };
    let room = format!("/cursors/{side}/r{:05}", index / scenario.room_size);
    Plan {
        index,
        ns: scenario.ns.clone(),
        group: "all",
        listens: vec![plain(room.clone())],
        writers: vec![Writer {
            interval,
            offset: offset(index, interval),
            write: Write::Set {
                path: format!("{room}/cursors/u{index:06}"),
            },
        }],
        presence: None,
        sign_in: None,

        start_after: Duration::ZERO,
    }
}

fn leaderboard(scenario: &Scenario, index: usize, interval: Duration) -> Plan {
    let writers_count =
        ((scenario.connections as f64 * scenario.writer_share).ceil() as usize).max(1);
    let writers = if index < writers_count {
        vec![Writer {
            interval,
            offset: offset(index, interval),
            write: Write::Score {
                scores: "/lb/scores".to_owned(),
                players: scenario.players,
            },
        }]
    } else {
        Vec::new()
    };
    Plan {
        index,
        ns: scenario.ns.clone(),
        group: "all",
        listens: vec![Listen {
            path: "/lb/scores".to_owned(),
            // orderByChild('score').limitToLast(10)
            query: Some(json!({"i": "score", "l": 10, "vf": "r"})),
        }],
        writers,
        presence: None,
        sign_in: None,

        start_after: Duration::ZERO,
    }
}

/// Hot-db, quiet side: small rooms spread over several databases, measured all run long.
fn quiet(scenario: &Scenario, index: usize, interval: Duration) -> Plan {
    let databases = scenario.quiet_databases.max(1);
    let ns = format!("{}-q{}", scenario.ns, index % databases);
    let room = format!("/rooms/r{:05}", index / databases / scenario.room_size);
    Plan {
        index,
        ns,
        group: "quiet",
        listens: vec![plain(room.clone())],
        writers: vec![Writer {
            interval,
            offset: offset(index, interval),
            write: Write::Set {
                path: format!("{room}/u{index:06}"),
            },
        }],
        presence: None,
        sign_in: None,

        start_after: Duration::ZERO,
    }
}

/// Hot-db, hot side: one database written as fast as the plan says, from the second half of
/// the measured time on.
fn hot(scenario: &Scenario) -> Vec<Plan> {
    if scenario.kind != Kind::HotDb {
        return Vec::new();
    }
    let interval = Duration::from_millis(scenario.hot_write_interval_ms);
    let start_after =
        Duration::from_secs(scenario.warmup_secs) + Duration::from_secs(scenario.duration_secs) / 2;
    (0..scenario.hot_connections)
        .map(|i| {
            let index = scenario.connections + i;
            let key = format!("/hot/h{i:04}");
            Plan {
                index,
                ns: format!("{}-hot", scenario.ns),
                group: "hot",
                listens: vec![plain(key.clone())],
                writers: vec![Writer {
                    interval,
                    offset: offset(index, interval),
                    write: Write::Set { path: key },
                }],
                presence: None,
                start_after,
                sign_in: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramp_opens_connections_at_its_rate() {
        let mut scenario = Scenario {
            connections: 40,
            connect_per_sec: 20,
            ..Scenario::default()
        };
        let starts: Vec<Duration> = plans(&scenario).iter().map(|p| p.start_after).collect();
        assert_eq!(starts[0], Duration::ZERO);
        assert_eq!(starts[20], Duration::from_secs(1));
        assert_eq!(starts[39], Duration::from_millis(1950));
        scenario.connect_per_sec = 0;
        assert!(plans(&scenario).iter().all(|p| p.start_after.is_zero()));
    }

    #[test]
    fn chat_message_keys_sort_by_time_whoever_writes() {
        let key = |uid: &str, n: u64, t: u64| {
            let write = Write::Message {
                messages: "/m".to_owned(),
                uid: uid.to_owned(),
            };
            write.request(n, t, 0).1["p"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let earlier = key("u000900", 7, 1_700_000_000_000_000);
        let later = key("u000001", 1, 1_700_000_000_000_001);
        assert!(earlier < later, "{earlier} < {later}");
    }

    #[test]
    fn chat_rooms_hold_room_size_members() {
        let scenario = Scenario {
            connections: 45,
            room_size: 20,
            ..Scenario::default()
        };
        let plans = plans(&scenario);
        assert_eq!(plans.len(), 45);
        assert_eq!(plans[19].listens[0].path, "/chat/rooms/r00000/messages");
        assert_eq!(plans[20].listens[0].path, "/chat/rooms/r00001/messages");
        assert!(plans.iter().all(|plan| plan.presence.is_some()));
        assert!(plans.iter().all(|plan| plan.ns == "load"));
    }

    #[test]
    fn chat_rooms_spread_over_databases_whole() {
        let scenario = Scenario {
            ns: "chat".to_owned(),
            connections: 100,
            room_size: 20,
            databases: 3,
            ..Scenario::default()
        };
        let plans = plans(&scenario);
        // A room stays in one database; rooms 0 and 3 share one.
        assert!(plans[..20].iter().all(|plan| plan.ns == "chat-0000"));
        assert!(plans[20..40].iter().all(|plan| plan.ns == "chat-0001"));
        assert_eq!(plans[60].ns, "chat-0000");
        assert_eq!(plans[99].ns, "chat-0001");
    }

    #[test]
    fn cursors_write_under_their_room_and_listen_to_it() {
        let scenario = Scenario {
            kind: Kind::Cursors,
            connections: 21,
            room_size: 20,
            write_interval_ms: 50,
            ..Scenario::default()
        };
        let volatile = plans(&scenario);
        assert_eq!(volatile[20].listens[0].path, "/cursors/volatile/r00001");
        let Write::Set { path } = &volatile[20].writers[0].write else {
            panic!("a cursor is a set");
        };
        assert_eq!(path, "/cursors/volatile/r00001/cursors/u000020");
        assert_eq!(volatile[20].writers[0].interval, Duration::from_millis(50));
        let durable = plans(&Scenario {
            volatile_paths: false,
            ..scenario
        });
        assert_eq!(durable[0].listens[0].path, "/cursors/durable/r00000");
    }

    #[test]
    fn connections_sign_in_each_as_their_own_user_or_all_as_one() {
        let each = Scenario {
            connections: 3,
            sign_in: Some("each".to_owned()),
            ..Scenario::default()
        };
        let uids: Vec<_> = plans(&each).into_iter().map(|plan| plan.sign_in).collect();
        assert_eq!(
            uids,
            [Some("u000000"), Some("u000001"), Some("u000002")].map(|uid| uid.map(str::to_owned))
        );
        let one = Scenario {
            sign_in: Some("mallory".to_owned()),
            ..each
        };
        assert!(plans(&one)
            .iter()
            .all(|plan| plan.sign_in.as_deref() == Some("mallory")));
        assert!(plans(&Scenario::default())
            .iter()
            .all(|plan| plan.sign_in.is_none()));
    }

    #[test]
    fn hot_db_adds_hot_connections_that_start_halfway() {
        let scenario = Scenario {
            kind: Kind::HotDb,
            connections: 8,
            hot_connections: 3,
            warmup_secs: 2,
            duration_secs: 10,
            ..Scenario::default()
        };
        let plans = plans(&scenario);
        assert_eq!(plans.len(), 11);
        assert_eq!(plans.iter().filter(|plan| plan.group == "hot").count(), 3);
        assert_eq!(plans[10].start_after, Duration::from_secs(7));
        assert_ne!(
            plans[0].ns, plans[1].ns,
            "quiet connections spread over databases"
        );
    }

    #[test]
    fn score_picks_stay_in_range() {
        let write = Write::Score {
            scores: "/lb".into(),
            players: 10,
        };
        for random in [0, 999_999, 123_456_789] {
            let (action, body) = write.request(1, 5, random);
            assert_eq!(action, "m");
            assert!(body["p"]
                .as_str()
                .is_some_and(|p| p.starts_with("/lb/p0000")));
        }
    }
}
