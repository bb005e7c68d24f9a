//! The server's administration endpoints (`/.admin/...`), for admins only (checked when the
//! request is parsed, `rest/parse.rs`).
//!
//! `GET /.admin/databases` lists every database of every shard. Each shard's owner role
//! answers for its own databases through its message queue (`ShardMessage::Databases`), so
//! that no shard reads another's state; the shard that received the request gathers the
//! answers.

use hearth_store::{snapshot_name, Storage, StorageFile};
use serde::Serialize;

use crate::inboxes::Inboxes;
use hearth_ground::inbox::DatabaseInfo;
use hearth_ground::rest::RestResponse;
use hearth_owner::Owner;

/// The answer of `GET /.admin/databases`: `{"databases": [...]}`, sorted by name.
pub async fn databases(inboxes: &Inboxes) -> RestResponse {
    let mut databases = inboxes.all_databases().await;
    databases.sort_by(|a, b| a.name.cmp(&b.name));
    #[derive(Serialize)]
    struct Listing {
        databases: Vec<DatabaseInfo>,
    }
    match serde_json::to_vec(&Listing { databases }) {
        Ok(body) => RestResponse::json(200, body),
        Err(error) => RestResponse::error(500, error.to_string()),
    }
}

/// `GET /.inspect/databases.json`: every database as the emulator lists them, `[{"name": ..}]`
/// (firebase-tools' export asks it which databases to write out).
pub async fn inspect_databases(inboxes: &Inboxes) -> RestResponse {
    let mut names: Vec<String> = inboxes
        .all_databases()
        .await
        .into_iter()
        .map(|database| database.name)
        .collect();
    names.sort();
    let listing: Vec<serde_json::Value> = names
        .into_iter()
        .map(|name| serde_json::json!({ "name": name }))
        .collect();
    RestResponse::json(200, serde_json::Value::Array(listing).to_string())
}

/// The databases this shard owns: those in memory, then those only on disk.
pub fn local_databases(owner: &Owner) -> Vec<DatabaseInfo> {
    let loaded = owner.databases();
    let mut list: Vec<DatabaseInfo> = loaded
        .values()
        .map(|database| DatabaseInfo {
            name: database.name().to_string(),
            loaded: true,
            bytes: database.root().estimated_bytes() as u64,
            clients: database.session_count(),
            shard: owner.index(),
        })
        .collect();
    if let Some(store) = owner.store() {
        for (name, covered) in store.newest_snapshots() {
            if loaded.contains_key(&name) {
                continue;
            }
            let bytes = store
                .storage()
                .open(&snapshot_name(&name, covered))
                .ok()
                .and_then(|file| file.size().ok())
                .unwrap_or(0);
            list.push(DatabaseInfo {
                name,
                loaded: false,
                bytes,
                clients: 0,
                shard: owner.index(),
            });
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_tree::Node;

    use hearth_config::ServeConfig;

    #[test]
    fn a_loaded_database_is_listed_with_its_estimated_size() {
        let config = ServeConfig::for_tests(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let owner = Owner::for_tests(config);
        assert_eq!(local_databases(&owner), Vec::new());
        let root = Node::from_json(&serde_json::json!({"a": "xyz", "b": 12})).expect("a tree");
        let bytes = root.estimated_bytes() as u64;
        owner.with_database("shop", |loaded| {
            **loaded = hearth_sync::Database::with_root(root);
        });
        assert_eq!(
            local_databases(&owner),
            vec![DatabaseInfo {
                name: "shop".into(),
                loaded: true,
                bytes,
                clients: 0,
                shard: 0,
            }]
        );
    }
}
