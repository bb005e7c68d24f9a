use super::*;
use crate::recorder::Recorder;

fn bytes(text: &str) -> Bytes {
    Bytes::copy_from_slice(text.as_bytes())
}

#[test]
fn writes_at_once_when_the_kernel_has_room() {
    let recorder = Recorder::new(1024);
    let outbox = Outbox::new(recorder.clone(), None);
    assert_eq!(outbox.send([bytes("ab"), bytes("cd")]), Sent::Written);
    assert_eq!(&*recorder.written.borrow(), b"abcd");
    assert!(outbox.is_empty());
}

#[test]
fn keeps_the_order_across_a_full_socket() {
    let recorder = Recorder::new(3);
    let outbox = Outbox::new(recorder.clone(), None);
    assert_eq!(outbox.send([bytes("abcd")]), Sent::Pending);
    assert_eq!(outbox.send([bytes("ef")]), Sent::Pending);
    assert_eq!(outbox.bytes(), 3);
    assert!(outbox.blocked_for().is_some());
    recorder.room.set(100);
    assert_eq!(outbox.write_now(), Sent::Written);
    assert_eq!(&*recorder.written.borrow(), b"abcdef");
    assert!(outbox.blocked_for().is_none());
}

#[test]
fn any_progress_restarts_the_blocked_time() {
    let recorder = Recorder::new(2);
    let outbox = Outbox::new(recorder.clone(), None);
    assert_eq!(outbox.send([bytes("abcdef")]), Sent::Pending);
    let first = outbox.blocked_since.get().expect("blocked");
    std::thread::sleep(Duration::from_millis(5));
    recorder.room.set(2);
    assert_eq!(outbox.write_now(), Sent::Pending);
    let second = outbox.blocked_since.get().expect("blocked again");
    assert!(
        second > first,
        "a write that moved bytes restarts the count"
    );
    assert_eq!(outbox.write_now(), Sent::Pending);
    assert_eq!(
        outbox.blocked_since.get(),
        Some(second),
        "no progress: unchanged"
    );
}

#[test]
fn waiting_bytes_count_in_the_budget_and_the_overflow_is_flagged() {
    let budgets = hearth_net::budget::HttpBudgets::for_answers(10);
    let recorder = Recorder::new(3);
    let shard = ShardBudget::new(budgets.clone());
    let outbox = Outbox::new(recorder.clone(), Some(shard.clone()));
    assert_eq!(outbox.send([bytes("abc")]), Sent::Written);
    assert_eq!(budgets.answers.used(), 0, "written at once: not counted");
    assert_eq!(outbox.send([bytes("abcdefgh"), bytes("ij")]), Sent::Pending);
    assert_eq!(budgets.answers.used(), 10);
    assert!(!outbox.over_budget());
    assert_eq!(outbox.send([bytes("k")]), Sent::Pending);
    assert!(outbox.over_budget());
    outbox.shed();
    assert_eq!(outbox.bytes(), 8, "the front message stays whole");
    assert_eq!(outbox.charge.held(), 8);
    recorder.room.set(100);
    assert_eq!(outbox.write_now(), Sent::Written);
    assert_eq!(outbox.charge.held(), 0);
    drop(outbox);
    drop(shard);
    assert_eq!(budgets.answers.used(), 0);
}

#[test]
fn a_cork_holds_writes_until_lifted() {
    let recorder = Recorder::new(100);
    let outbox = Outbox::new(recorder.clone(), None);
    outbox.cork();
    assert_eq!(outbox.send([bytes("a")]), Sent::Pending);
    assert_eq!(outbox.send([bytes("b")]), Sent::Pending);
    assert!(recorder.written.borrow().is_empty());
    assert_eq!(outbox.uncork(), Sent::Written);
    assert_eq!(&*recorder.written.borrow(), b"ab");
}

#[test]
fn a_broken_socket_fails_and_forgets_its_bytes() {
    let recorder = Recorder::new(0);
    let outbox = Outbox::new(recorder.clone(), None);
    assert_eq!(outbox.send([bytes("a")]), Sent::Pending);
    recorder.broken.set(true);
    assert_eq!(outbox.write_now(), Sent::Failed);
    assert_eq!(outbox.bytes(), 0);
    assert_eq!(outbox.send([bytes("b")]), Sent::Failed);
}

/// Takes `items` into the outbox's batch and returns what the batched send would carry.
fn enlist(outbox: &Outbox, items: &[&str]) -> Vec<u8> {
    assert_eq!(
        outbox.defer(items.iter().map(|item| bytes(item))),
        Deferred::Enlist
    );
    assert!(outbox.is_enlisted());
    let view = outbox.batch_view().expect("a socket with bytes");
    view.slices().flat_map(|slice| slice.to_vec()).collect()
}

#[test]
fn a_batched_send_taken_whole_counts_nothing() {
    let budgets = hearth_net::budget::HttpBudgets::for_answers(100);
    let recorder = Recorder::new(100);
    let outbox = Outbox::new(recorder.clone(), Some(ShardBudget::new(budgets.clone())));
    assert_eq!(enlist(&outbox, &["ab", "cd"]), b"abcd");
    assert_eq!(outbox.defer([bytes("ef")]), Deferred::InBatch);
    assert_eq!(
        budgets.answers.used(),
        0,
        "waiting for the batch: not counted"
    );
    assert_eq!(outbox.complete(Ok(6)), Sent::Written);
    assert!(outbox.is_empty() && !outbox.is_enlisted());
    assert!(recorder.written.borrow().is_empty(), "the ring wrote them");
    assert_eq!(budgets.answers.used(), 0);
}

#[test]
fn a_partly_taken_batched_send_writes_the_rest_in_order_then_waits() {
    let budgets = hearth_net::budget::HttpBudgets::for_answers(100);
    let recorder = Recorder::new(2);
    let outbox = Outbox::new(recorder.clone(), Some(ShardBudget::new(budgets.clone())));
    assert_eq!(enlist(&outbox, &["abc", "def"]), b"abcdef");
    // The ring took "ab"; the plain write takes "cd"; "ef" waits for the socket.
    assert_eq!(outbox.complete(Ok(2)), Sent::Pending);
    assert_eq!(&*recorder.written.borrow(), b"cd");
    assert_eq!(outbox.bytes(), 2);
    assert_eq!(budgets.answers.used(), 2, "refused bytes count");
    assert!(outbox.blocked_for().is_some());
    recorder.room.set(100);
    assert_eq!(outbox.write_now(), Sent::Written);
    assert_eq!(&*recorder.written.borrow(), b"cdef");
    assert_eq!(outbox.charge.held(), 0);
}

#[test]
fn a_refused_batched_send_waits_for_the_socket_and_counts() {
    let budgets = hearth_net::budget::HttpBudgets::for_answers(4);
    let recorder = Recorder::new(0);
    let outbox = Outbox::new(recorder.clone(), Some(ShardBudget::new(budgets.clone())));
    enlist(&outbox, &["abc"]);
    assert_eq!(
        outbox.complete(Err(io::ErrorKind::WouldBlock.into())),
        Sent::Pending
    );
    assert_eq!(outbox.bytes(), 3);
    assert_eq!(budgets.answers.used(), 3);
    assert!(outbox.blocked_for().is_some());
    assert!(!outbox.over_budget());
    // Behind waiting bytes, more are queued as before, not batched.
    assert_eq!(outbox.defer([bytes("de")]), Deferred::Now(Sent::Pending));
    assert!(outbox.over_budget(), "5 bytes do not fit in 4");
}

#[test]
fn a_failed_batched_send_fails_the_outbox() {
    let outbox = Outbox::new(Recorder::new(100), None);
    enlist(&outbox, &["abc"]);
    assert_eq!(
        outbox.complete(Err(io::ErrorKind::ConnectionReset.into())),
        Sent::Failed
    );
    assert!(outbox.failed() && outbox.is_empty());
    assert_eq!(outbox.defer([bytes("x")]), Deferred::Now(Sent::Failed));
    let closed = Outbox::new(Recorder::new(100), None);
    enlist(&closed, &["abc"]);
    assert_eq!(
        closed.complete(Ok(0)),
        Sent::Failed,
        "0 bytes: the peer is gone"
    );
}

#[test]
fn a_corked_or_waiting_outbox_does_not_join_a_batch() {
    let recorder = Recorder::new(100);
    let outbox = Outbox::new(recorder.clone(), None);
    outbox.cork();
    assert_eq!(outbox.defer([bytes("a")]), Deferred::Now(Sent::Pending));
    assert!(!outbox.is_enlisted());
    assert_eq!(outbox.uncork(), Sent::Written);
    assert_eq!(&*recorder.written.borrow(), b"a");
}

#[test]
fn a_moved_outbox_writes_the_new_socket_after_its_own_bytes() {
    let old = Recorder::new(0);
    let outbox = Outbox::new(old.clone(), None);
    assert_eq!(outbox.send([bytes("cd")]), Sent::Pending);
    let socket = Recorder::new(3);
    let first = Outbox::new(socket.clone(), None);
    assert_eq!(first.send([bytes("ab")]), Sent::Written);
    socket.room.set(0);
    assert_eq!(first.send([bytes("AB")]), Sent::Pending);
    socket.room.set(5);
    assert_eq!(outbox.move_onto(socket.clone(), &first), Sent::Written);
    assert_eq!(&*socket.written.borrow(), b"abABcd");
    assert_eq!(outbox.send([bytes("ef")]), Sent::Pending);
    socket.room.set(100);
    assert_eq!(outbox.write_now(), Sent::Written);
    assert_eq!(&*socket.written.borrow(), b"abABcdef");
    assert!(old.written.borrow().is_empty());
    assert_eq!(first.send([bytes("x")]), Sent::Failed, "left detached");
}

#[test]
fn a_detached_outbox_writes_nothing() {
    let recorder = Recorder::new(100);
    let outbox = Outbox::new(recorder.clone(), None);
    outbox.detach();
    assert_eq!(outbox.send([bytes("a")]), Sent::Failed);
    assert!(recorder.written.borrow().is_empty());
}

/// A socket that has received `arrived` and hands out as much as each read asks for.
struct Received {
    arrived: RefCell<VecDeque<u8>>,
    reads: Cell<usize>,
}

impl Source for Received {
    fn poll_read_into(&self, _cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut arrived = self.arrived.borrow_mut();
        if arrived.is_empty() {
            return Poll::Pending;
        }
        self.reads.set(self.reads.get() + 1);
        let taken = arrived.len().min(buf.remaining());
        let bytes: Vec<u8> = arrived.drain(..taken).collect();
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}

#[test]
fn a_burst_is_read_once_and_handed_out_in_small_pieces() {
    let burst: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let socket = Rc::new(Received {
        arrived: RefCell::new(burst.iter().copied().collect()),
        reads: Cell::new(0),
    });
    let outbox = Rc::new(Outbox::new(Recorder::new(0), None));
    let mut shared = SharedStream::new(socket.clone(), outbox);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let mut got = Vec::new();
    let mut piece = [0u8; 512];
    loop {
        let mut buf = ReadBuf::new(&mut piece);
        match Pin::new(&mut shared).poll_read(&mut cx, &mut buf) {
            Poll::Ready(Ok(())) => got.extend_from_slice(buf.filled()),
            Poll::Ready(Err(error)) => panic!("{error}"),
            Poll::Pending => break,
        }
    }
    assert_eq!(got, burst);
    // One read of the socket for the whole burst, as with a buffer of its size.
    assert_eq!(socket.reads.get(), 1);
    // Nothing is held once the library has taken it all.
    assert_eq!(shared.spill.capacity(), 0);
}
