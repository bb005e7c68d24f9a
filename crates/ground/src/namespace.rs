//! Which database a request is for, and which shard owns it.

/// The longest namespace name accepted.
pub const MAX_NAMESPACE_BYTES: usize = 128;

/// Why a namespace name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamespaceError {
    #[error("namespace names are 1 to {MAX_NAMESPACE_BYTES} characters of a-z, A-Z, 0-9, '-' and '_'; got {0:?}")]
    Invalid(String),
}

/// Resolves the namespace: the `ns` query parameter, else the first label of a host name with
/// at least three labels, else the default.
pub fn resolve(
    ns_param: Option<&str>,
    host: Option<&str>,
    default: &str,
) -> Result<String, NamespaceError> {
    if let Some(ns) = ns_param.filter(|ns| !ns.is_empty()) {
        let name = validate(ns)?;
        if named_after_ip_host(&name, host) {
            warn_named_after_host(&name, host.unwrap_or_default());
        }
        return Ok(name);
    }
    if let Some(label) = host.and_then(host_label) {
        return validate(label);
    }
    Ok(default.to_owned())
}

fn host_label(host: &str) -> Option<&str> {
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    let labels: Vec<&str> = name.split('.').collect();
    let is_ip = labels
        .iter()
        .all(|label| label.chars().all(|c| c.is_ascii_digit()));
    (labels.len() >= 3 && !is_ip).then(|| labels[0])
}

/// Whether `ns` is what the SDK makes of a database URL without `?ns=` whose host is an IPv4
/// address: the address's first number (`http://127.0.0.1:9000` gives `127`). Nobody names a
/// database that on purpose, so it is worth a warning.
fn named_after_ip_host(ns: &str, host: Option<&str>) -> bool {
    let Some(host) = host else { return false };
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    name.parse::<std::net::Ipv4Addr>().is_ok() && name.split('.').next() == Some(ns)
}

/// The most names warned about by [`warn_named_after_host`]: such names are the first number
/// of an IPv4 address, so there are at most 256 of them anyway.
pub const MAX_HOST_NAMED_WARNINGS: usize = 256;

/// Logs, once per name for the life of the process, that a database was named after the host.
/// Shared by every shard (a connection is resolved where it lands), behind a lock taken only
/// for such names.
fn warn_named_after_host(ns: &str, host: &str) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut warned) = WARNED.lock() else {
        return;
    };
    if warned.len() >= MAX_HOST_NAMED_WARNINGS || warned.iter().any(|name| name == ns) {
        return;
    }
    warned.push(ns.to_owned());
    tracing::warn!(
        namespace = ns,
        host,
        "a client opened the database {ns:?}, named after the first number of the address \
         {host}: the SDK takes that name from a database URL without ?ns= (http://{host}). Pass \
         ?ns=NAME in the database URL (http://{host}?ns=my-app) to choose the database"
    );
}

/// Checks a database name given on the command line.
pub fn validate_name(name: &str) -> Result<(), NamespaceError> {
    validate(name).map(|_| ())
}

pub(crate) fn validate(name: &str) -> Result<String, NamespaceError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAMESPACE_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(NamespaceError::Invalid(name.to_owned()))
    }
}

/// The shard that owns `namespace`: a fast, stable hash (FNV-1a) modulo the shard count.
///
/// FNV-1a alone is a poor choice for a small modulus: its lowest bit is just the parity of the
/// name's odd bytes, so with two shards the split follows that parity. The final avalanche step
/// (the 64-bit finalizer of MurmurHash3) mixes every input bit into the low bits.
pub fn owner_shard(namespace: &str, shards: usize) -> usize {
    (stable_hash(namespace.bytes()) % shards.max(1) as u64) as usize
}

/// A 64-bit hash that is the same on every machine and every version (FNV-1a, then a
/// finalizer that spreads the bits): data directories are laid out by it.
pub fn stable_hash(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        assert_eq!(resolve(Some("abc"), Some("x.y.z"), "d"), Ok("abc".into()));
        assert_eq!(
            resolve(Some(""), Some("localhost:9000"), "d"),
            Ok("d".into())
        );
        assert_eq!(
            resolve(None, Some("proj.example.com:443"), "d"),
            Ok("proj".into())
        );
        assert_eq!(resolve(None, Some("127.0.0.1:9000"), "d"), Ok("d".into()));
        assert_eq!(
            resolve(Some("a/b"), None, "d"),
            Err(NamespaceError::Invalid("a/b".into()))
        );
        let long = "x".repeat(MAX_NAMESPACE_BYTES + 1);
        assert_eq!(
            resolve(Some(&long), None, "d"),
            Err(NamespaceError::Invalid(long.clone()))
        );
        let longest = "x".repeat(MAX_NAMESPACE_BYTES);
        assert_eq!(resolve(Some(&longest), None, "d"), Ok(longest.clone()));
        // A bad first label of the host is refused, not skipped.
        assert_eq!(
            resolve(None, Some("b_d!.example.com"), "d"),
            Err(NamespaceError::Invalid("b_d!".into()))
        );
    }

    #[test]
    fn a_name_taken_from_an_ip_address_is_recognized() {
        assert!(named_after_ip_host("127", Some("127.0.0.1:9000")));
        assert!(named_after_ip_host("10", Some("10.1.2.3")));
        assert!(!named_after_ip_host("my-app", Some("127.0.0.1:9000")));
        assert!(!named_after_ip_host("127", Some("localhost:9000")));
        assert!(!named_after_ip_host("proj", Some("proj.example.com")));
        assert!(!named_after_ip_host("127", Some("127.example.com")));
        assert!(!named_after_ip_host("127", None));
    }

    #[test]
    fn short_names_spread_over_two_shards() {
        let names = [
            "one", "two", "three", "four", "five", "six", "seven", "eight",
        ];
        let on_first = names
            .iter()
            .filter(|name| owner_shard(name, 2) == 0)
            .count();
        assert!((2..=6).contains(&on_first), "{on_first} of 8 on shard 0");
    }

    /// The same values as the JavaScript copy of this function in the compat suite
    /// (`compat/test/rest/rest-client.mjs`), which picks namespaces by shard, for every shard
    /// count from one to seven: the choice must not change between versions (data directories
    /// are laid out by shard).
    #[test]
    fn shard_choice_is_pinned_for_every_count() {
        let cases: [(&str, [usize; 7]); 6] = [
            ("demo", [0, 0, 2, 2, 1, 2, 0]),
            ("home-0-abc", [0, 0, 1, 0, 3, 4, 6]),
            ("pool-3-xyz", [0, 0, 1, 2, 1, 4, 2]),
            ("one", [0, 0, 0, 0, 4, 0, 4]),
            ("six", [0, 1, 2, 3, 1, 5, 1]),
            ("seven", [0, 1, 2, 1, 3, 5, 1]),
        ];
        for (name, expected) in cases {
            let actual: Vec<usize> = (1..=7).map(|shards| owner_shard(name, shards)).collect();
            assert_eq!(actual, expected, "{name}");
        }
        assert_eq!(owner_shard("demo", 0), 0, "no shards counts as one");
    }
}
