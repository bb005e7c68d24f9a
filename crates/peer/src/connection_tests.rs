//! When a change of the peer's address ends a live connection (`run`): a peer that left or
//! moved is gone; a peer whose address this node learns after it dialed here is not.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

use super::{run, Ended, Queues};
use crate::context::{Context, RestSettings};
use crate::link_tls::LinkStream;

fn context(address: Option<SocketAddr>) -> Rc<Context> {
    Rc::new(Context {
        node: 1,
        peer: Arc::from("n2"),
        address: watch::Sender::new(address),
        owners: Vec::new(),
        edges: Vec::new(),
        credits: Vec::new(),
        owner_room: Arc::new(Semaphore::new(1 << 20)),
        rest: Arc::new(RestSettings {
            auth: Default::default(),
            default_namespace: "default".into(),
            audit: None,
        }),
        state: RefCell::default(),
    })
}

fn at(port: u16) -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 2], port)))
}

/// Runs a connection with the link's address at `first`, changes it to each of `then` in
/// turn, then closes the shards' queue: `Closed` when none of the changes ended it.
async fn ended_by(first: Option<SocketAddr>, then: &[Option<SocketAddr>]) -> Ended {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let dialed = TcpStream::connect(listener.local_addr().expect("address"))
        .await
        .expect("connect");
    let (_peer, _) = listener.accept().await.expect("accept");
    let ctx = context(first);
    let (to_owner_tx, mut to_owner) = mpsc::unbounded_channel();
    let (_to_edge_tx, mut to_edge) = mpsc::unbounded_channel();
    let (_to_replica_tx, mut to_replica) = mpsc::unbounded_channel();
    let (_forwards_tx, mut forwards) = mpsc::unbounded_channel();
    let (_accepted_tx, mut accepted) = mpsc::channel(1);
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let connection = {
                let ctx = ctx.clone();
                tokio::task::spawn_local(async move {
                    let queues = Queues {
                        to_owner: &mut to_owner,
                        to_edge: &mut to_edge,
                        to_replica: &mut to_replica,
                        forwards: &mut forwards,
                        accepted: &mut accepted,
                    };
                    run(&ctx, LinkStream::Plain(dialed), queues, 1).await
                })
            };
            // The connection waits on its queues before anything changes.
            tokio::task::yield_now().await;
            for address in then {
                ctx.address.send_replace(*address);
                tokio::task::yield_now().await;
            }
            drop(to_owner_tx);
            connection.await.expect("the connection's task")
        })
        .await
}

fn how(ended: &Ended) -> String {
    match ended {
        Ended::Lost(why) => format!("lost: {why}"),
        Ended::Replaced(_) => "replaced".into(),
        Ended::Departed => "departed".into(),
        Ended::Closed => "closed".into(),
    }
}

#[tokio::test]
async fn a_peer_that_dialed_before_this_node_knew_its_address_keeps_its_connection() {
    let ended = ended_by(None, &[at(7400)]).await;
    assert_eq!(how(&ended), "closed");
}

#[tokio::test]
async fn a_peer_that_left_or_moved_loses_its_connection() {
    for (first, then) in [
        (at(7400), vec![None]),
        (at(7400), vec![at(7401)]),
        (None, vec![at(7400), None]),
        (None, vec![at(7400), at(7401)]),
    ] {
        let ended = ended_by(first, &then).await;
        assert_eq!(how(&ended), "departed", "{first:?} then {then:?}");
    }
}
