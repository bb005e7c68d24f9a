//! Tests of the REST answer cache through whole requests: what a write invalidates, that the
//! rules are checked before the cache is consulted, and that cached answers are the bytes an
//! uncached server answers, under random writes.

use std::rc::Rc;

use hearth_store::SplitMix64;

use super::execute::tests::{call, etag};
use crate::state::Owner;
use hearth_config::ServeConfig;
use hearth_ground::rest::RestResponse;

fn owner_with_cache(bytes: usize) -> Rc<Owner> {
    let mut config = ServeConfig::for_tests(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    config.rest_cache_bytes = bytes;
    Owner::for_tests(config)
}

/// (hits, misses) so far.
fn counts(owner: &Owner) -> (u64, u64) {
    let snapshot = owner.counters().snapshot();
    (snapshot.rest_cache_hits, snapshot.rest_cache_misses)
}

/// A value whose answer is large enough to be kept.
fn big(tag: &str) -> String {
    format!(
        r#"{{"tag":"{tag}","items":{{"a":"{fill}","b":"{fill}","c":[1,2,3]}}}}"#,
        fill = "x".repeat(800)
    )
}

fn get(owner: &Owner, path: &str) -> RestResponse {
    let response = call(owner, "GET", &format!("{path}.json?ns=c"), &[], None);
    assert_eq!(response.status, 200);
    response
}

/// Reads `path` and tells whether the answer came from the cache.
fn read_was_hit(owner: &Owner, path: &str) -> (bool, RestResponse) {
    let before = counts(owner);
    let response = get(owner, path);
    let after = counts(owner);
    assert_eq!(after.0 + after.1, before.0 + before.1 + 1, "one lookup");
    (after.0 > before.0, response)
}

fn write(owner: &Owner, method: &str, path: &str, body: &str) {
    let response = call(owner, method, &format!("{path}.json?ns=c"), &[], Some(body));
    assert_eq!(response.status, 200, "{method} {path}: {:?}", response.body);
}

#[test]
fn a_write_invalidates_the_locations_it_changes_and_no_other() {
    let owner = owner_with_cache(1 << 20);
    write(&owner, "PUT", "/a/b", &big("b"));
    write(&owner, "PUT", "/a/c", &big("c"));
    assert!(!read_was_hit(&owner, "/a/b").0, "first read");
    assert!(read_was_hit(&owner, "/a/b").0, "second read");
    assert!(!read_was_hit(&owner, "/a").0);
    // Beside: /a/c changes, /a/b does not (but /a, above it, does).
    write(&owner, "PUT", "/a/c/tag", r#""c2""#);
    assert!(read_was_hit(&owner, "/a/b").0, "a write beside keeps it");
    let (hit, above) = read_was_hit(&owner, "/a");
    assert!(!hit, "a write below /a changes /a");
    assert!(std::str::from_utf8(&above.body)
        .expect("UTF-8")
        .contains("\"c2\""));
    // Above, without touching /a/b: a PATCH of another child.
    write(&owner, "PATCH", "/a", r#"{"d": 1}"#);
    assert!(
        read_was_hit(&owner, "/a/b").0,
        "a write above that keeps /a/b"
    );
    // Below.
    write(&owner, "PUT", "/a/b/items/c/3", "4");
    let (hit, below) = read_was_hit(&owner, "/a/b");
    assert!(!hit, "a write below");
    assert!(std::str::from_utf8(&below.body)
        .expect("UTF-8")
        .contains("[1,2,3,4]"));
    assert!(read_was_hit(&owner, "/a/b").0);
    // Above, replacing /a/b with equal data: a new node (a miss unless both are packed with
    // the same bytes, which is the same answer), with the same bytes either way.
    let before = get(&owner, "/a/b").body;
    let whole = String::from_utf8(get(&owner, "/a").body.to_vec()).expect("UTF-8");
    write(&owner, "PUT", "/a", &whole);
    let (_, after) = read_was_hit(&owner, "/a/b");
    assert_eq!(after.body, before);
    // A delete at the location.
    write(&owner, "DELETE", "/a/b", "null");
    assert_eq!(&get(&owner, "/a/b").body[..], b"null");
}

#[test]
fn the_rules_are_checked_before_the_cache_is_consulted() {
    let owner = owner_with_cache(1 << 20);
    let admin = [("authorization", "Bearer owner")];
    let rules = r#"{"rules": {"secret": {".read": "auth != null && auth.uid == 'alice'"}}}"#;
    let set = call(
        &owner,
        "PUT",
        "/.settings/rules.json?ns=c",
        &admin,
        Some(rules),
    );
    assert_eq!(set.status, 200);
    let put = call(&owner, "PUT", "/secret.json?ns=c", &admin, Some(&big("s")));
    assert_eq!(put.status, 200);
    // An unsigned mock token of alice (development mode accepts it).
    let alice = [(
        "authorization",
        "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsInVzZXJfaWQiOiJhbGljZSJ9.",
    )];
    for _ in 0..2 {
        let read = call(&owner, "GET", "/secret.json?ns=c", &alice, None);
        assert_eq!(read.status, 200);
    }
    assert_eq!(
        counts(&owner),
        (1, 1),
        "alice's second read came from the cache"
    );
    let anonymous = call(&owner, "GET", "/secret.json?ns=c", &[], None);
    assert_eq!(anonymous.status, 401);
    assert_eq!(
        counts(&owner),
        (1, 1),
        "a refused read never reaches the cache"
    );
}

/// A seeded generator (the store's SplitMix64), so that a failing seed replays exactly.
struct Random(SplitMix64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const PATHS: &[&str] = &["", "/r", "/r/0", "/r/1", "/r/k", "/r/1/n", "/s", "/s/t"];

/// A random value: leaves, objects, array-like objects, priorities, long strings.
fn value(random: &mut Random, depth: usize) -> String {
    match random.below(if depth > 2 { 4 } else { 8 }) {
        0 => "null".to_owned(),
        1 => format!("{}", random.below(1000) as f64 / 8.0),
        2 => format!("\"{}\"", "v".repeat(random.below(700))),
        3 => "true".to_owned(),
        4 => {
            let priority = random.below(5);
            format!(
                r#"{{".value": "{}", ".priority": {priority}}}"#,
                "p".repeat(random.below(300))
            )
        }
        5 => {
            let items: Vec<String> = (0..random.below(5))
                .map(|_| value(random, depth + 1))
                .collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let keys = ["0", "1", "2", "k", "n", "10", "b"];
            let members: Vec<String> = (0..1 + random.below(5))
                .map(|_| {
                    let key = keys[random.below(keys.len())];
                    format!("\"{key}\": {}", value(random, depth + 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
    }
}

fn random_write(random: &mut Random) -> (&'static str, String, String) {
    let path = PATHS[random.below(PATHS.len())].to_owned();
    match random.below(4) {
        0 => ("DELETE", path, "null".to_owned()),
        1 => {
            let children = ["0", "1", "k", "n/m", "10"];
            let members: Vec<String> = (0..1 + random.below(3))
                .map(|_| {
                    let child = random.pick(&children);
                    format!("\"{child}\": {}", value(random, 1))
                })
                .collect();
            ("PATCH", path, format!("{{{}}}", members.join(",")))
        }
        _ => ("PUT", path, value(random, 0)),
    }
}

fn random_read(random: &mut Random) -> String {
    let path = PATHS[random.below(PATHS.len())];
    let forms = [
        "",
        "&format=export",
        "&print=pretty",
        "&shallow=true",
        "&print=pretty&format=export",
        "&orderBy=%22%24key%22&limitToFirst=2",
        "&orderBy=%22%24value%22&limitToLast=1",
        "&orderBy=%22%24priority%22&startAt=1",
        "&orderBy=%22n%22&limitToFirst=1&print=pretty",
    ];
    format!("{path}/.json?ns=c{}", forms[random.below(forms.len())])
}

#[test]
fn cached_answers_are_the_bytes_of_uncached_ones_under_random_writes() {
    let seeds: u64 = std::env::var("CACHE_SEEDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(24);
    let mut hits = 0;
    for seed in 0..seeds {
        // A budget of a few entries, so that the clock evicts too.
        let cached = owner_with_cache(64 * 1024);
        let plain = owner_with_cache(0);
        let mut random = Random(SplitMix64(seed));
        for step in 0..150 {
            if random.below(3) == 0 {
                let (method, path, body) = random_write(&mut random);
                let uri = format!("{path}/.json?ns=c");
                let a = call(&cached, method, &uri, &[], Some(&body));
                let b = call(&plain, method, &uri, &[], Some(&body));
                assert_eq!(
                    (a.status, &a.body),
                    (b.status, &b.body),
                    "seed {seed} step {step}"
                );
            } else {
                let uri = random_read(&mut random);
                let headers = [("x-firebase-etag", "true")];
                // Twice, so that the second read can come from the cache.
                for _ in 0..2 {
                    let a = call(&cached, "GET", &uri, &headers, None);
                    let b = call(&plain, "GET", &uri, &headers, None);
                    assert_eq!(a.status, b.status, "seed {seed} step {step} {uri}");
                    assert_eq!(a.body, b.body, "seed {seed} step {step} {uri}");
                    assert_eq!(etag(&a), etag(&b), "seed {seed} step {step} {uri}");
                }
            }
        }
        hits += counts(&cached).0;
        assert_eq!(counts(&plain), (0, 0), "no lookups without a budget");
    }
    assert!(hits > 100, "the cache served reads ({hits})");
}
