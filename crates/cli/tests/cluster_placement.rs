//! Placement and fencing on etcd with real processes: an etcd (Debian's `etcd-server`,
//! `/usr/bin/etcd`, or `HEARTH_TEST_ETCD`) on a free loopback port with a temporary data
//! directory, and three `hearth serve` nodes on 127.0.0.2-127.0.0.4 with a 2-second lease.
//! The waits are bounded retries of a request whose answer is the barrier (a write accepted,
//! `hearth cluster status` showing a claim), never pauses that hope something happened.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, hearth, temp_dir};
use hearth_cluster::rendezvous;
use serde_json::Value;

const LEASE_TTL_SECS: u64 = 2;

/// A child process, killed (SIGKILL) and reaped when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The test's directory (etcd's and the nodes' data: some hundred MB of preallocated logs),
/// removed when the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Etcd {
    process: Process,
    url: String,
}

impl Etcd {
    fn signal(&self, signal: &str) {
        send_signal(&self.process, signal);
    }
}

fn send_signal(process: &Process, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &process.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal}");
}

fn etcd_binary() -> PathBuf {
    std::env::var_os("HEARTH_TEST_ETCD")
        .map_or_else(|| PathBuf::from("/usr/bin/etcd"), PathBuf::from)
}

fn start_etcd(dir: &Path) -> Etcd {
    let client = free_port();
    let peer = free_port();
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new(etcd_binary())
        .arg("--data-dir")
        .arg(dir.join("etcd"))
        .args(["--name", "test", "--listen-client-urls", &url])
        .args(["--advertise-client-urls", &url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("test={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd starts (apt-get install etcd-server)");
    let etcd = Etcd {
        process: Process(child),
        url,
    };
    let agent = agent();
    wait_for("etcd answers", Duration::from_secs(20), || {
        let answer = agent.get(&format!("{}/health", etcd.url)).call().ok()?;
        (answer.status() == 200).then_some(())
    });
    etcd
}

struct Node {
    process: Process,
    id: String,
    url: String,
}

impl Node {
    fn signal(&self, signal: &str) {
        send_signal(&self.process, signal);
    }
}

/// A port free on every address, so that it is free on the node's own address too.
fn free_port_everywhere() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// Node `n<index>` on 127.0.0.<index + 1>, its log in `dir`. A port taken between the pick
/// and the bind (tests run in parallel) makes the node exit; it is started again on another.
fn start_node(etcd: &Etcd, dir: &Path, index: u8) -> Node {
    let id = format!("n{index}");
    for _attempt in 0..3 {
        let address = SocketAddr::from(([127, 0, 0, 1 + index], free_port_everywhere()));
        let log = std::fs::File::create(dir.join(format!("{id}.log"))).expect("a log file");
        let child = hearth()
            .args(["serve", "--dev", "--threads", "1", "--listen"])
            .arg(address.to_string())
            .arg("--data-dir")
            .arg(dir.join(&id))
            .args(["--cluster-etcd", &etcd.url, "--node-id", &id])
            .args(["--advertise", &address.to_string()])
            .args(["--cluster-lease-ttl-secs", &LEASE_TTL_SECS.to_string()])
            .stderr(log)
            .spawn()
            .expect("the node starts");
        let mut node = Node {
            process: Process(child),
            id: id.clone(),
            url: format!("http://{address}"),
        };
        let listening = wait_for("the node listens or exits", Duration::from_secs(20), || {
            if std::net::TcpStream::connect(address).is_ok() {
                return Some(true);
            }
            matches!(node.process.0.try_wait(), Ok(Some(_))).then_some(false)
        });
        if listening {
            return node;
        }
    }
    let log = std::fs::read_to_string(dir.join(format!("{id}.log"))).unwrap_or_default();
    panic!("node {id} did not start: {log}");
}

/// Three linked nodes `n1`-`n3` on 127.0.0.2-4, all on one HTTP port and one link port, as a
/// user running a cluster on one host would start them. A port taken between the pick and the
/// binds (tests run in parallel) makes a node exit; the three start again on other ports.
fn three_nodes_on_one_port(etcd: &Etcd, dir: &Path) -> Vec<Node> {
    let secret = dir.join("secret");
    std::fs::write(&secret, "a secret of this test cluster, long enough\n").expect("a secret");
    for _attempt in 0..3 {
        let (http, link) = (free_port_everywhere(), free_port_everywhere());
        let mut nodes = Vec::new();
        for index in 1..=3u8 {
            let id = format!("n{index}");
            let host = [127, 0, 0, 1 + index];
            let log = std::fs::File::create(dir.join(format!("{id}.log"))).expect("a log file");
            let child = hearth()
                .args(["serve", "--dev", "--threads", "1", "--listen"])
                .arg(SocketAddr::from((host, http)).to_string())
                .arg("--data-dir")
                .arg(dir.join(&id))
                .args(["--cluster-etcd", &etcd.url, "--node-id", &id])
                .arg("--advertise")
                .arg(SocketAddr::from((host, link)).to_string())
                .args(["--cluster-lease-ttl-secs", &LEASE_TTL_SECS.to_string()])
                .arg("--cluster-secret-file")
                .arg(&secret)
                .arg("--cluster-plaintext")
                .stderr(log)
                .spawn()
                .expect("the node starts");
            nodes.push(Node {
                process: Process(child),
                id,
                url: format!("http://{}", SocketAddr::from((host, http))),
            });
            // One after the other, as a user starts them: the first ones dial peers that
            // are not up yet.
            std::thread::sleep(Duration::from_millis(500));
        }
        let all_listen = wait_for(
            "the nodes listen or one exits",
            Duration::from_secs(20),
            || {
                if nodes
                    .iter_mut()
                    .any(|node| matches!(node.process.0.try_wait(), Ok(Some(_))))
                {
                    return Some(false);
                }
                let listening = nodes.iter().all(|node| {
                    let address = node.url.trim_start_matches("http://");
                    std::net::TcpStream::connect(address).is_ok()
                });
                listening.then_some(true)
            },
        );
        if all_listen {
            return nodes;
        }
    }
    let logs: Vec<String> = (1..=3)
        .map(|i| std::fs::read_to_string(dir.join(format!("n{i}.log"))).unwrap_or_default())
        .collect();
    panic!("the three nodes did not start on one port: {logs:?}");
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into()
}

/// A REST PUT of `value` at `/value` of database `ns`; the status and the body.
fn put(node: &Node, ns: &str, value: &str) -> (u16, String) {
    let mut answer = agent()
        .put(&format!("{}/value.json?ns={ns}", node.url))
        .send(serde_json::to_string(value).unwrap_or_default())
        .expect("the node answers");
    let body = answer.body_mut().read_to_string().unwrap_or_default();
    (answer.status().as_u16(), body)
}

fn get(node: &Node, ns: &str) -> Value {
    let mut answer = agent()
        .get(&format!("{}/value.json?ns={ns}", node.url))
        .call()
        .expect("the node answers");
    serde_json::from_str(&answer.body_mut().read_to_string().unwrap_or_default())
        .unwrap_or(Value::Null)
}

fn status(etcd: &Etcd) -> Value {
    let output = hearth()
        .args(["cluster", "status", "--json", "--etcd", &etcd.url])
        .output()
        .expect("hearth cluster status runs");
    assert!(
        output.status.success(),
        "cluster status: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON status")
}

fn claim_of(status: &Value, ns: &str) -> Option<(String, u64)> {
    let db = status["databases"]
        .as_array()?
        .iter()
        .find(|db| db["namespace"] == ns)?;
    Some((db["owner"].as_str()?.to_owned(), db["epoch"].as_u64()?))
}

fn node_ids(status: &Value) -> Vec<String> {
    status["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|node| node["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Retries `attempt` every 50 ms until it gives an answer, failing the test after `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(answer) = attempt() {
            return answer;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes `value` to `ns` through every node of `nodes` in turn until one accepts (the first
/// refusal of the node placement names makes it claim the database); returns its index.
fn write_somewhere(nodes: &[&Node], ns: &str, value: &str, limit: Duration) -> usize {
    wait_for(&format!("a node accepts a write to {ns}"), limit, || {
        nodes.iter().position(|node| put(node, ns, value).0 == 200)
    })
}

fn three_nodes(name: &str) -> (Etcd, Vec<Node>, Scratch) {
    let dir = temp_dir(name);
    let etcd = start_etcd(&dir);
    let nodes: Vec<Node> = (1..=3).map(|i| start_node(&etcd, &dir, i)).collect();
    wait_for(
        "the three nodes are registered",
        Duration::from_secs(10),
        || (node_ids(&status(&etcd)).len() == 3).then_some(()),
    );
    (etcd, nodes, Scratch(dir))
}

/// Three nodes, and `ns` written with `value` on its owner, whose index is returned.
fn three_nodes_and_an_owner(
    name: &str,
    ns: &str,
    value: &str,
) -> (Etcd, Vec<Node>, usize, Scratch) {
    let (etcd, nodes, dir) = three_nodes(name);
    let all: Vec<&Node> = nodes.iter().collect();
    let owner = write_somewhere(&all, ns, value, Duration::from_secs(10));
    (etcd, nodes, owner, dir)
}

#[test]
fn three_nodes_agree_on_every_databases_owner() {
    let (etcd, nodes, _dir) = three_nodes("cluster-agree");
    let all: Vec<&Node> = nodes.iter().collect();
    let ids: Vec<&str> = nodes.iter().map(|node| node.id.as_str()).collect();
    for i in 0..6 {
        let ns = format!("agree{i}");
        let owner = write_somewhere(&all, &ns, "v", Duration::from_secs(10));
        let placed = rendezvous::place(ids.iter().copied(), &ns);
        assert_eq!(
            Some(ids[owner]),
            placed,
            "{ns}: owner chosen by rendezvous hashing"
        );
        assert_eq!(
            claim_of(&status(&etcd), &ns),
            Some((ids[owner].to_owned(), 1)),
            "{ns}: claimed in etcd with the first epoch"
        );
        // The other nodes refuse, and name the owner once they have read its claim (they
        // read etcd every quarter of the lease).
        for node in nodes.iter().filter(|node| node.id != ids[owner]) {
            wait_for(
                &format!("{} names the owner of {ns}", node.id),
                Duration::from_secs(5),
                || {
                    let (code, body) = put(node, &ns, "elsewhere");
                    assert_eq!(code, 503, "{ns}: {} acknowledged a write: {body}", node.id);
                    body.contains(&format!("owned by node {}", ids[owner]))
                        .then_some(())
                },
            );
        }
        assert_eq!(get(&nodes[owner], &ns), Value::from("v"));
    }
    let claims: u64 = nodes
        .iter()
        .map(|node| metric(node, "hearth_cluster_claims"))
        .sum();
    assert_eq!(
        claims, 6,
        "each database counted once, by its owner's /metrics"
    );
}

/// A gauge of the node's `/metrics` (as `owner`, which --dev accepts as an admin).
fn metric(node: &Node, name: &str) -> u64 {
    let mut answer = agent()
        .get(&format!("{}/metrics", node.url))
        .header("authorization", "Bearer owner")
        .call()
        .expect("the node answers");
    let text = answer.body_mut().read_to_string().unwrap_or_default();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics: {text}"))
}

#[test]
fn a_killed_owner_is_replaced_with_the_next_epoch_within_its_lease() {
    let ns = "killed";
    let (etcd, mut nodes, owner, _dir) = three_nodes_and_an_owner("cluster-kill", ns, "v1");
    let dead = nodes.remove(owner);
    let dead_id = dead.id.clone();
    let killed_at = Instant::now();
    drop(dead); // SIGKILL, then reaped.
    let survivors: Vec<&Node> = nodes.iter().collect();
    // The lease ends within its TTL; a node notices within a quarter of it, and etcd expires
    // leases in a pass every half second.
    let limit = Duration::from_secs(LEASE_TTL_SECS + 4);
    let next = write_somewhere(&survivors, ns, "v2", limit);
    let taken_over = killed_at.elapsed();
    let state = status(&etcd);
    assert_eq!(claim_of(&state, ns), Some((nodes[next].id.clone(), 2)));
    assert!(!node_ids(&state).contains(&dead_id), "{state}");
    let ids: Vec<&str> = nodes.iter().map(|node| node.id.as_str()).collect();
    assert_eq!(rendezvous::place(ids.iter().copied(), ns), Some(ids[next]));
    eprintln!("taken over {taken_over:?} after SIGKILL (lease {LEASE_TTL_SECS} s)");
}

#[test]
fn a_paused_owner_refuses_writes_once_its_lease_has_ended() {
    let ns = "paused";
    let (etcd, mut nodes, owner, _dir) = three_nodes_and_an_owner("cluster-pause", ns, "before");
    let paused = nodes.remove(owner);
    paused.signal("-STOP");
    let survivors: Vec<&Node> = nodes.iter().collect();
    let next = write_somewhere(
        &survivors,
        ns,
        "after",
        Duration::from_secs(LEASE_TTL_SECS + 4),
    );
    assert_eq!(
        claim_of(&status(&etcd), ns),
        Some((nodes[next].id.clone(), 2))
    );
    paused.signal("-CONT");
    // The first request after the pause: the paused node's lease was last confirmed more
    // than the TTL ago, so it must not acknowledge, whichever of its threads runs first.
    let (code, body) = put(&paused, ns, "stale");
    assert_eq!(code, 503, "the paused owner acknowledged a write: {body}");
    assert!(body.contains("refused"), "{body}");
    assert_eq!(get(&nodes[next], ns), Value::from("after"));
    // Once it has caught up with etcd, it names the new owner.
    wait_for(
        "the paused node names the new owner",
        Duration::from_secs(10),
        || {
            let (code, body) = put(&paused, ns, "stale");
            assert_eq!(code, 503, "{body}");
            body.contains(&format!("owned by node {}", nodes[next].id))
                .then_some(())
        },
    );
    assert_eq!(get(&nodes[next], ns), Value::from("after"));
}

#[test]
fn an_owner_cut_off_from_etcd_stops_acknowledging_on_its_own_clock() {
    let ns = "cut";
    let (etcd, nodes, owner, _dir) = three_nodes_and_an_owner("cluster-cut", ns, "before");
    // etcd stops answering: the owner's keep-alives go unanswered, so nothing tells it the
    // lease is gone; only its own clock can make it stop (two thirds of the TTL after the
    // last confirmation). Without that check it would acknowledge for as long as etcd is away.
    etcd.signal("-STOP");
    let mut acknowledged = 0;
    let body = wait_for("the owner refuses writes", Duration::from_secs(10), || {
        let (code, body) = put(&nodes[owner], ns, "during");
        if code == 200 {
            acknowledged += 1;
            return None;
        }
        assert_eq!(code, 503, "{body}");
        Some(body)
    });
    assert!(body.contains("cannot confirm its claim"), "{body}");
    // Reads are refused too: past its lease another node may hold newer data (decision 58).
    let refused = get(&nodes[owner], ns);
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|reason| reason.contains("reads are refused")),
        "{refused}"
    );
    etcd.signal("-CONT");
    // Once etcd answers again, the node's lease is confirmed (or it lost the claim and the
    // read goes to whoever holds it) and reads go on.
    let last = if acknowledged > 0 { "during" } else { "before" };
    wait_for("reads go on", Duration::from_secs(15), || {
        nodes.iter().any(|node| get(node, ns) == last).then_some(())
    });
}

#[test]
fn three_nodes_on_one_host_share_one_port_on_their_own_addresses() {
    let dir = temp_dir("cluster-one-port");
    let scratch = Scratch(dir.clone());
    let etcd = start_etcd(&dir);
    let nodes = three_nodes_on_one_port(&etcd, &dir);
    wait_for(
        "the three nodes are registered",
        Duration::from_secs(10),
        || (node_ids(&status(&etcd)).len() == 3).then_some(()),
    );
    // A write through any node reaches the database's owner over the link, and a read
    // through every node sees it.
    let ns = "oneport";
    wait_for("a write is acknowledged", Duration::from_secs(20), || {
        (put(&nodes[0], ns, "shared").0 == 200).then_some(())
    });
    for node in &nodes {
        wait_for(
            &format!("{} reads the write", node.id),
            Duration::from_secs(10),
            || (get(node, ns) == "shared").then_some(()),
        );
    }
    assert!(claim_of(&status(&etcd), ns).is_some(), "{ns} is claimed");
    // A healthy start is quiet: nothing at WARN while the nodes found each other. A slow log
    // sync is the disk's latency (a busy machine's), reported as such, not the start's; and a
    // link that missed its heartbeats while the machine was busy degrades replication until
    // it is back, which is the link's timing, not the start's (seen once in CI with other
    // clusters running beside it).
    for node in &nodes {
        let log = std::fs::read_to_string(dir.join(format!("{}.log", node.id))).unwrap_or_default();
        let warnings: Vec<&str> = log
            .lines()
            .filter(|line| {
                line.contains(" WARN ")
                    && !line.contains("slow log sync")
                    && !line.contains("the link to the follower is down")
            })
            .collect();
        assert!(
            warnings.is_empty(),
            "{} warned at a healthy start: {warnings:#?}",
            node.id
        );
    }
    drop(nodes);
    drop(scratch);
}
