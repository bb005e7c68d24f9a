//! The follower's replicated records that wait for this node's log to sync them, and the
//! acknowledgements that each sync allows.

use std::collections::VecDeque;

use hearth_ground::replica_messages::ToOwnerNode;
use hearth_peer::codec::MAX_ACKS_PER_MESSAGE as MAX_ACKS;

/// Replicated records appended to this node's log and not yet synced.
#[derive(Debug, Default)]
pub struct Pending {
    /// (local sequence number, owner node, owner shard, owner sequence number), in local order.
    records: VecDeque<(u64, usize, u32, u64)>,
}

impl Pending {
    pub fn push(&mut self, local: u64, node: usize, shard: u32, seq: u64) {
        self.records.push_back((local, node, shard, seq));
    }

    /// The acknowledgements that the local log durable up to `durable` allows, per owner
    /// node.
    pub fn synced(&mut self, durable: u64) -> Vec<(usize, ToOwnerNode)> {
        let mut acks: Vec<(usize, ToOwnerNode)> = Vec::new();
        while let Some(&(local, node, shard, seq)) = self.records.front() {
            if local > durable {
                break;
            }
            self.records.pop_front();
            match acks
                .iter_mut()
                .find(|(to, ack)| *to == node && ack.shard == shard && ack.seqs.len() < MAX_ACKS)
            {
                Some((_, ack)) => ack.seqs.push(seq),
                None => acks.push((
                    node,
                    ToOwnerNode {
                        shard,
                        seqs: vec![seq],
                    },
                )),
            }
        }
        acks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_follow_the_local_disk_and_group_by_owner() {
        let mut pending = Pending::default();
        pending.push(3, 1, 0, 10);
        pending.push(4, 2, 0, 7);
        pending.push(5, 1, 0, 11);
        pending.push(9, 1, 1, 12);
        let acks = pending.synced(5);
        let acks: Vec<(usize, u32, Vec<u64>)> = acks
            .into_iter()
            .map(|(node, ack)| (node, ack.shard, ack.seqs))
            .collect();
        assert_eq!(acks, vec![(1, 0, vec![10, 11]), (2, 0, vec![7])]);
        assert!(pending.synced(8).is_empty());
        assert_eq!(pending.synced(9).len(), 1);
    }
}
