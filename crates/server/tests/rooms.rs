//! The imports of the server crate and of the transports' crate run one way (ARCHITECTURE.md,
//! "The server crate's layout"): no circle among the rooms of either, a room being a file of
//! `src/` or a folder of it taken whole.
//!
//! The compiler holds the direction between crates; inside one crate nothing does, and reviews
//! kept finding imports that ran back up. This test reads every source file's `crate::` paths
//! (test modules and `*_tests.rs` files left out: tests may reach anywhere) and fails with the
//! circle, file by file, when one appears.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The sources of a crate of the workspace, by its directory under `crates/`.
fn source_root(crate_dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src")
}

/// Every `.rs` file under `dir`, with its path relative to `src/`.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).expect("the source directory is readable");
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            into.push(path);
        }
    }
}

/// The room of a file: its first component under `src/`, without `.rs`.
fn room_of(relative: &Path) -> String {
    let first = relative
        .components()
        .next()
        .expect("a file under src")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The code of a file without its comments and what only tests compile: an item under
/// `#[cfg(test)]` is left out whole (a one-line declaration, or up to its closing brace).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if !trimmed.starts_with("#[cfg(test)]") {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        // The item's other attributes, then the item itself.
        while lines
            .peek()
            .is_some_and(|next| next.trim_start().starts_with("#["))
        {
            lines.next();
        }
        let mut depth = 0i64;
        for item_line in lines.by_ref() {
            depth += item_line.matches('{').count() as i64;
            depth -= item_line.matches('}').count() as i64;
            if depth <= 0 && (item_line.contains('}') || item_line.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    code
}

/// The rooms a file's code names through `crate::`, grouped imports (`crate::{a, b}`) too.
fn named_rooms(code: &str) -> BTreeSet<String> {
    let mut rooms = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                rooms.insert(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            rooms.insert(name);
        }
    }
    rooms
}

/// Room -> the rooms it imports, each with one file that does it.
fn room_graph(crate_dir: &str) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let root = source_root(crate_dir);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let rooms: BTreeSet<String> = files
        .iter()
        .map(|file| room_of(file.strip_prefix(&root).expect("under src")))
        .collect();
    let mut graph: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).expect("under src");
        let name = relative.to_string_lossy();
        if name.ends_with("_tests.rs") || name == "lib.rs" {
            continue;
        }
        let room = room_of(relative);
        let text = fs::read_to_string(file).expect("a readable source file");
        let imports = graph.entry(room.clone()).or_default();
        for named in named_rooms(&code_of(&text)) {
            if named != room && rooms.contains(&named) {
                imports
                    .entry(named)
                    .or_insert_with(|| relative.to_path_buf());
            }
        }
    }
    graph
}

/// A circle through `start`, if there is one: the rooms in order.
fn circle_through(
    graph: &BTreeMap<String, BTreeMap<String, PathBuf>>,
    start: &str,
) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((room, path)) = stack.pop() {
        for next in graph.get(&room).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                return Some(path.clone());
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

#[test]
fn the_server_rooms_import_one_way() {
    for (crate_dir, expected) in [
        ("server", ["shard", "server"]),
        ("transport", ["front", "serve"]),
    ] {
        let graph = room_graph(crate_dir);
        assert!(
            expected.iter().all(|room| graph.contains_key(*room)),
            "the rooms of {crate_dir} were not read: {:?}",
            graph.keys().collect::<Vec<_>>()
        );
        for room in graph.keys() {
            if let Some(circle) = circle_through(&graph, room) {
                let mut steps = Vec::new();
                for (at, from) in circle.iter().enumerate() {
                    let to = &circle[(at + 1) % circle.len()];
                    let file = &graph[from][to];
                    steps.push(format!("{from} -> {to} ({})", file.display()));
                }
                panic!(
                    "the rooms of crates/{crate_dir} import each other in a circle; move the \
                     type the lower room needs down, or let it take something that knows \
                     nothing of the higher (ARCHITECTURE.md, \"The server crate's layout\"):\n  {}",
                    steps.join("\n  ")
                );
            }
        }
    }
}

/// What a transport takes is the core's front (`transport/src/front.rs`), and the shard only
/// assembles it; the rooms below either take neither (the owner and the edge's state are
/// crates of their own, which cannot import these at all).
#[test]
fn the_rooms_below_the_front_and_the_shard_never_take_them() {
    let below = [
        (
            "transport",
            "front",
            &[
                "owner_side",
                "longpoll_session",
                "inboxes",
                "routes",
                "admin",
                "console",
            ][..],
        ),
        (
            "server",
            "shard",
            &["scrape", "backup", "offline", "reload"][..],
        ),
    ];
    for (crate_dir, top, rooms) in below {
        let graph = room_graph(crate_dir);
        for room in rooms {
            let imports = graph.get(*room).expect("the room exists");
            assert!(
                !imports.contains_key(top),
                "{room} imports the {top} ({}): a role takes what it needs, never the {top}",
                imports[top].display()
            );
        }
    }
}

#[test]
fn test_modules_and_comments_are_not_imports() {
    let text = "use crate::a::X;\n// crate::b\n#[cfg(test)]\nmod tests {\n    use crate::c;\n}\n";
    assert_eq!(
        named_rooms(&code_of(text)),
        BTreeSet::from(["a".to_owned()])
    );
    let grouped = "use crate::{d, e::F};\n#[cfg(test)]\nmod sim;\nuse crate::g;\n#[cfg(test)]\n\
                   impl X {\n    fn f() {\n        crate::h::f();\n    }\n}\nuse crate::i;\n";
    assert_eq!(
        named_rooms(&code_of(grouped)),
        BTreeSet::from(["d", "e", "g", "i"].map(str::to_owned))
    );
}
