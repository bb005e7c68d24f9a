//! The onDisconnect queue of one connection: operations that run, in order, when it ends.

use hearth_tree::Path;
use serde_json::Value;

use crate::limits::{MAX_ONDISCONNECT_BYTES, MAX_ONDISCONNECT_OPS};
use crate::write::WriteTarget;

/// One queued operation, kept unresolved: server values are computed when it runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum QueuedOp {
    Put {
        target: WriteTarget,
        data: Value,
    },
    Merge {
        path: Path,
        entries: Vec<(WriteTarget, Value)>,
    },
}

/// Why an operation could not be queued.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum QueueError {
    #[error("a connection may queue at most {MAX_ONDISCONNECT_OPS} onDisconnect operations")]
    TooManyOps,
    #[error("a connection may queue at most {MAX_ONDISCONNECT_BYTES} bytes of onDisconnect data")]
    TooManyBytes,
}

#[derive(Debug, Default)]
pub(crate) struct OnDisconnectQueue {
    ops: Vec<QueuedOp>,
    bytes: usize,
}

impl OnDisconnectQueue {
    pub fn push(&mut self, op: QueuedOp) -> Result<(), QueueError> {
        if self.ops.len() >= MAX_ONDISCONNECT_OPS {
            return Err(QueueError::TooManyOps);
        }
        let bytes = op_bytes(&op);
        if self.bytes + bytes > MAX_ONDISCONNECT_BYTES {
            return Err(QueueError::TooManyBytes);
        }
        self.bytes += bytes;
        self.ops.push(op);
        Ok(())
    }

    /// Cancels everything queued at or below `path`. A queued value that covers `path` from
    /// above loses just that part, as the client's own model of the queue does.
    pub fn cancel(&mut self, path: &Path) {
        let mut kept = Vec::with_capacity(self.ops.len());
        for op in self.ops.drain(..) {
            match op {
                QueuedOp::Put { target, mut data } => {
                    if target.path.starts_with(path) {
                        continue;
                    }
                    if let Some(relative) = path.strip_prefix(&target.path) {
                        if target.priority_only {
                            kept.push(QueuedOp::Put { target, data });
                            continue;
                        }
                        remove_json_path(&mut data, &relative);
                    }
                    kept.push(QueuedOp::Put { target, data });
                }
                QueuedOp::Merge {
                    path: base,
                    entries,
                } => {
                    let mut remaining = Vec::with_capacity(entries.len());
                    for (target, mut data) in entries {
                        let absolute = base.join(&target.path);
                        if absolute.starts_with(path) {
                            continue;
                        }
                        if let Some(relative) = path.strip_prefix(&absolute) {
                            if !target.priority_only {
                                remove_json_path(&mut data, &relative);
                            }
                        }
                        remaining.push((target, data));
                    }
                    if !remaining.is_empty() {
                        kept.push(QueuedOp::Merge {
                            path: base,
                            entries: remaining,
                        });
                    }
                }
            }
        }
        self.ops = kept;
        self.bytes = self.ops.iter().map(op_bytes).sum();
    }

    pub fn take(&mut self) -> Vec<QueuedOp> {
        self.bytes = 0;
        std::mem::take(&mut self.ops)
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }
}

/// Deletes the value at `relative` inside `data`, if the JSON holds anything there.
fn remove_json_path(data: &mut Value, relative: &Path) {
    let Some((last, parents)) = relative.keys().split_last() else {
        *data = Value::Null;
        return;
    };
    let mut node = data;
    for key in parents {
        let next = match node {
            Value::Object(map) => map.get_mut(key.as_str()),
            Value::Array(items) => key
                .as_str()
                .parse::<usize>()
                .ok()
                .and_then(|index| items.get_mut(index)),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => return,
        }
    }
    match node {
        Value::Object(map) => {
            map.remove(last.as_str());
        }
        Value::Array(items) => {
            if let Ok(index) = last.as_str().parse::<usize>() {
                if let Some(item) = items.get_mut(index) {
                    *item = Value::Null;
                }
            }
        }
        _ => {}
    }
}

fn op_bytes(op: &QueuedOp) -> usize {
    match op {
        QueuedOp::Put { target, data } => target.path.to_string().len() + json_bytes(data),
        QueuedOp::Merge { path, entries } => {
            path.to_string().len()
                + entries
                    .iter()
                    .map(|(target, data)| target.path.to_string().len() + json_bytes(data))
                    .sum::<usize>()
        }
    }
}

/// A cheap upper-bound estimate of the JSON text size of a value.
pub(crate) fn json_bytes(value: &Value) -> usize {
    let mut total = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        total += match value {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 24,
            Value::String(text) => text.len() + 2,
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len()
            }
            Value::Object(map) => {
                stack.extend(map.values());
                2 + map.keys().map(|key| key.len() + 4).sum::<usize>()
            }
        };
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(text: &str) -> WriteTarget {
        WriteTarget::parse(text).expect("valid test target")
    }

    fn path(text: &str) -> Path {
        Path::parse(text).expect("valid test path")
    }

    #[test]
    fn cancel_removes_ops_at_and_below() {
        let mut queue = OnDisconnectQueue::default();
        for p in ["/a", "/a/b", "/c"] {
            queue
                .push(QueuedOp::Put {
                    target: target(p),
                    data: json!(1),
                })
                .expect("room in the queue");
        }
        queue.cancel(&path("/a"));
        assert_eq!(
            queue.take(),
            vec![QueuedOp::Put {
                target: target("/c"),
                data: json!(1)
            }]
        );
    }

    #[test]
    fn cancel_below_a_put_trims_its_value() {
        let mut queue = OnDisconnectQueue::default();
        queue
            .push(QueuedOp::Put {
                target: target("/a"),
                data: json!({"b": {"c": 1, "d": 2}, "e": 3}),
            })
            .expect("room in the queue");
        queue
            .push(QueuedOp::Merge {
                path: path("/"),
                entries: vec![(target("x/y"), json!(1)), (target("a/b"), json!({"c": 5}))],
            })
            .expect("room in the queue");
        queue.cancel(&path("/a/b/c"));
        assert_eq!(
            queue.take(),
            vec![
                QueuedOp::Put {
                    target: target("/a"),
                    data: json!({"b": {"d": 2}, "e": 3})
                },
                QueuedOp::Merge {
                    path: path("/"),
                    entries: vec![(target("x/y"), json!(1)), (target("a/b"), json!({}))],
                }
            ]
        );
    }

    #[test]
    fn queue_is_bounded() {
        let mut queue = OnDisconnectQueue::default();
        for _ in 0..MAX_ONDISCONNECT_OPS {
            queue
                .push(QueuedOp::Put {
                    target: target("/a"),
                    data: json!(1),
                })
                .expect("room in the queue");
        }
        assert_eq!(
            queue.push(QueuedOp::Put {
                target: target("/a"),
                data: json!(1)
            }),
            Err(QueueError::TooManyOps)
        );
        let big = "x".repeat(MAX_ONDISCONNECT_BYTES);
        let mut queue = OnDisconnectQueue::default();
        assert_eq!(
            queue.push(QueuedOp::Put {
                target: target("/a"),
                data: json!(big)
            }),
            Err(QueueError::TooManyBytes)
        );
    }
}
