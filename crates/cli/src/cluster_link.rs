//! How the node-to-node link is protected: `--cluster-tls-cert`, `--cluster-tls-key` and
//! `--cluster-ca` (mutual TLS), or `--cluster-plaintext`. Never a default: a node with the
//! link and neither does not start, and neither does one with a partial or unusable TLS
//! setting, so that a typo cannot leave a production link in plain text.

use std::path::Path;
use std::sync::Arc;

use hearth_server::peer::{LinkSecurity, LinkTls};

use crate::serve_args::ServeArgs;

/// The flags that decide it.
pub struct Flags<'a> {
    /// The link runs: `--cluster-secret-file` with `--cluster-etcd` or `--cluster-peers`.
    pub link: bool,
    pub node_id: Option<&'a str>,
    pub cert: Option<&'a Path>,
    pub key: Option<&'a Path>,
    pub ca: Option<&'a Path>,
    pub plaintext: bool,
}

impl<'a> Flags<'a> {
    pub fn of(args: &'a ServeArgs) -> Flags<'a> {
        Flags {
            link: args.cluster_secret_file.is_some()
                && (args.cluster_etcd.is_some() || !args.cluster_peers.is_empty()),
            node_id: args.node_id.as_deref(),
            cert: args.cluster_tls_cert.as_deref(),
            key: args.cluster_tls_key.as_deref(),
            ca: args.cluster_ca.as_deref(),
            plaintext: args.cluster_plaintext,
        }
    }
}

const NEITHER: &str = "the node-to-node link (--cluster-secret-file with --cluster-etcd or \
    --cluster-peers) needs --cluster-tls-cert, --cluster-tls-key and --cluster-ca (mutual TLS \
    with the cluster's CA, docs/cluster-link.md), or --cluster-plaintext to run it \
    unencrypted (tests on one machine only)";

/// The link's protection, `None` without a link; an error names the flags to fix.
pub fn security(flags: &Flags<'_>) -> anyhow::Result<Option<LinkSecurity>> {
    let given: Vec<&str> = [
        (flags.cert, "--cluster-tls-cert"),
        (flags.key, "--cluster-tls-key"),
        (flags.ca, "--cluster-ca"),
    ]
    .iter()
    .filter(|(file, _)| file.is_some())
    .map(|(_, flag)| *flag)
    .collect();
    if flags.plaintext && !given.is_empty() {
        anyhow::bail!(
            "--cluster-plaintext cannot be combined with {}: choose mutual TLS or plain text \
             for the node-to-node link",
            given.join(", ")
        );
    }
    if !flags.link {
        if given.is_empty() {
            return Ok(None);
        }
        // Certificates given for a link that does not run are a mistake to report, not to
        // ignore: the operator believes the link is protected.
        anyhow::bail!(
            "{} given, but this node runs no node-to-node link (it needs \
             --cluster-secret-file with --cluster-etcd or --cluster-peers)",
            given.join(", ")
        );
    }
    match (flags.cert, flags.key, flags.ca) {
        (Some(cert), Some(key), Some(ca)) => {
            let node = flags
                .node_id
                .ok_or_else(|| anyhow::anyhow!("--cluster-tls-cert needs --node-id"))?;
            let tls = LinkTls::load(node, cert, key, ca)?;
            Ok(Some(LinkSecurity::Tls(Arc::new(tls))))
        }
        (None, None, None) if flags.plaintext => Ok(Some(LinkSecurity::Plaintext)),
        (None, None, None) => anyhow::bail!("{NEITHER}"),
        _ => {
            let missing: Vec<&str> = [
                (flags.cert, "--cluster-tls-cert"),
                (flags.key, "--cluster-tls-key"),
                (flags.ca, "--cluster-ca"),
            ]
            .iter()
            .filter(|(file, _)| file.is_none())
            .map(|(_, flag)| *flag)
            .collect();
            anyhow::bail!(
                "mutual TLS on the node-to-node link needs --cluster-tls-cert, \
                 --cluster-tls-key and --cluster-ca together: {} missing",
                missing.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A path that is never there.
    fn nowhere() -> PathBuf {
        PathBuf::from("/nonexistent/hearth-test.pem")
    }

    fn flags<'a>(link: bool, files: [Option<&'a Path>; 3], plaintext: bool) -> Flags<'a> {
        Flags {
            link,
            node_id: Some("n1"),
            cert: files[0],
            key: files[1],
            ca: files[2],
            plaintext,
        }
    }

    fn error(flags: &Flags<'_>) -> String {
        format!("{:#}", security(flags).expect_err("refused"))
    }

    #[test]
    fn a_link_without_a_choice_is_refused_naming_the_flags() {
        let text = error(&flags(true, [None; 3], false));
        for flag in [
            "--cluster-tls-cert",
            "--cluster-tls-key",
            "--cluster-ca",
            "--cluster-plaintext",
        ] {
            assert!(text.contains(flag), "{text}");
        }
    }

    #[test]
    fn plaintext_is_chosen_not_given() {
        assert!(matches!(
            security(&flags(true, [None; 3], true)).expect("chosen"),
            Some(LinkSecurity::Plaintext)
        ));
        assert!(security(&flags(false, [None; 3], false))
            .expect("no link")
            .is_none());
        assert!(security(&flags(false, [None; 3], true))
            .expect("no link")
            .is_none());
    }

    #[test]
    fn partial_tls_names_what_is_missing() {
        let cert = nowhere();
        let text = error(&flags(true, [Some(&cert), None, None], false));
        assert!(
            text.contains("--cluster-tls-key, --cluster-ca missing"),
            "{text}"
        );
        let text = error(&flags(true, [Some(&cert), Some(&cert), None], false));
        assert!(text.ends_with("--cluster-ca missing"), "{text}");
    }

    #[test]
    fn tls_and_plaintext_together_are_refused() {
        let cert = nowhere();
        let text = error(&flags(true, [Some(&cert); 3], true));
        assert!(
            text.contains("--cluster-plaintext cannot be combined"),
            "{text}"
        );
    }

    #[test]
    fn certificates_without_a_link_are_refused() {
        let cert = nowhere();
        let text = error(&flags(false, [Some(&cert); 3], false));
        assert!(text.contains("runs no node-to-node link"), "{text}");
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let cert = nowhere();
        let text = error(&flags(true, [Some(&cert); 3], false));
        assert!(
            text.contains("--cluster-tls-cert") && text.contains("hearth-test.pem"),
            "{text}"
        );
    }
}
