//! The write side of a WebSocket connection, shared by the shard and the connection's task.
//!
//! Pushes are written to the socket by whoever produces them, in the same loop turn: the shard
//! as it routes a write's events or releases messages after a log sync, the task as it answers
//! requests. A push to a connection therefore costs one `writev` of frame bytes encoded once
//! for all its listeners, with no task wake-up and no copy. The connection's task is woken only
//! when the kernel's send buffer is full, to wait until the socket is writable again.
//!
//! The WebSocket library still reads frames and writes control frames (pings, pongs, close);
//! it writes through [`SharedStream`], into the same [`Outbox`], so every byte leaves in the
//! order it was produced.

use std::cell::{Cell, Ref, RefCell};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use hearth_net::budget::{Charge, ShardBudget};

/// Most buffers handed to one `writev`.
const MAX_IOVECS: usize = 64;

/// Where an [`Outbox`] writes: a non-blocking socket.
pub trait Transport {
    /// Writes what the kernel accepts now, or fails with `WouldBlock`.
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;
    /// Ready when a write may succeed; registers the task to be woken otherwise.
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// The socket's descriptor, when its bytes go to the kernel as they are (plain TCP), so
    /// that the edge may send them in a batch (`edge::uring`); `None` writes them one by one.
    fn raw_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl Transport for TcpStream {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // Most writes are one push: `write` skips the kernel's import of an iovec array.
        match bufs {
            [single] => TcpStream::try_write(self, single),
            _ => TcpStream::try_write_vectored(self, bufs),
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        TcpStream::poll_write_ready(self, cx)
    }

    fn raw_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

/// What an [`Outbox`] did with the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// All written to the kernel.
    Written,
    /// Some wait in the outbox: for the socket to become writable, or for the cork to lift.
    Pending,
    /// The socket failed; the connection is over.
    Failed,
}

/// What [`Outbox::defer`] did with the bytes it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferred {
    /// Queued for the edge's batched send, which must now include this outbox.
    Enlist,
    /// Queued behind bytes already in the batched send.
    InBatch,
    /// Handled as [`Outbox::send`] would (the outbox waits for its socket, is corked, or
    /// failed): the batch has nothing to send for it.
    Now(Sent),
}

/// An outbox's part of a batched send: its socket (open while this is held) and its pending
/// bytes.
pub struct BatchView<'a> {
    transport: Rc<dyn Transport>,
    pending: Ref<'a, VecDeque<Bytes>>,
}

impl BatchView<'_> {
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.transport.raw_fd()
    }

    /// The front of the pending bytes, at most [`MAX_IOVECS`] buffers.
    pub fn slices(&self) -> impl Iterator<Item = IoSlice<'_>> {
        self.pending
            .iter()
            .take(MAX_IOVECS)
            .map(|item| IoSlice::new(item))
    }
}

/// Bytes accepted for a connection and not yet taken by the kernel, in order.
pub struct Outbox {
    /// Dropped when the connection ends, so that the socket closes even while the shard still
    /// holds the outbox.
    transport: RefCell<Option<Rc<dyn Transport>>>,
    pending: RefCell<VecDeque<Bytes>>,
    bytes: Cell<usize>,
    /// While corked, bytes are only queued (the task is answering a burst of requests and
    /// writes the answers together).
    corked: Cell<bool>,
    failed: Cell<bool>,
    /// Since when the kernel has taken no byte while some wait.
    blocked_since: Cell<Option<Instant>>,
    /// The waiting bytes in the server's answer budget. Settled after each write attempt, so
    /// that bytes the kernel takes at once are never counted.
    charge: Charge,
    /// Set when waiting bytes did not fit in the server's budget: the connection must close.
    over_budget: Cell<bool>,
    /// Whether the pending bytes wait for the edge's batched send (`edge::uring`) rather than
    /// for the socket: they are not counted in the budget until the batch has tried them.
    enlisted: Cell<bool>,
}

impl Outbox {
    /// An outbox whose waiting bytes count in `budget`, if given.
    pub fn new(transport: Rc<dyn Transport>, budget: Option<Rc<ShardBudget>>) -> Outbox {
        Outbox {
            transport: RefCell::new(Some(transport)),
            pending: RefCell::new(VecDeque::new()),
            bytes: Cell::new(0),
            corked: Cell::new(false),
            failed: Cell::new(false),
            blocked_since: Cell::new(None),
            charge: Charge::new(budget),
            over_budget: Cell::new(false),
            enlisted: Cell::new(false),
        }
    }

    /// Queues `items` after whatever is pending and writes what the kernel takes.
    pub fn send(&self, items: impl IntoIterator<Item = Bytes>) -> Sent {
        if self.failed.get() {
            return Sent::Failed;
        }
        let was_waiting = {
            let mut pending = self.pending.borrow_mut();
            let was_waiting = !pending.is_empty();
            // An empty item would make a `writev` of nothing but it, whose 0 reads as a
            // closed socket.
            for item in items.into_iter().filter(|item| !item.is_empty()) {
                self.bytes.set(self.bytes.get() + item.len());
                pending.push_back(item);
            }
            was_waiting
        };
        // With bytes already waiting, the socket is full (the task waits for it) or corked.
        if was_waiting || self.corked.get() {
            self.settle();
            return if self.is_empty() {
                Sent::Written
            } else {
                Sent::Pending
            };
        }
        self.write_now()
    }

    /// Queues `items` after whatever is pending, for the edge's batched send when nothing else
    /// holds them back: the bytes then leave with the batch (at the end of the loop turn's
    /// batch), in the order given, and count in the budget only if the socket refuses them.
    pub fn defer(&self, items: impl IntoIterator<Item = Bytes>) -> Deferred {
        if self.failed.get() {
            return Deferred::Now(Sent::Failed);
        }
        if !self.enlisted.get() && (!self.is_empty() || self.corked.get()) {
            return Deferred::Now(self.send(items));
        }
        let mut pending = self.pending.borrow_mut();
        for item in items.into_iter().filter(|item| !item.is_empty()) {
            self.bytes.set(self.bytes.get() + item.len());
            pending.push_back(item);
        }
        if self.enlisted.get() {
            Deferred::InBatch
        } else if pending.is_empty() {
            Deferred::Now(Sent::Written)
        } else {
            self.enlisted.set(true);
            Deferred::Enlist
        }
    }

    /// Whether bytes wait for the edge's batched send.
    pub fn is_enlisted(&self) -> bool {
        self.enlisted.get()
    }

    /// The batched send of this outbox: its socket and its pending bytes, which stay as they
    /// are while the view is held. `None` when there is nothing to send (the outbox failed or
    /// was detached); then, or when the transport has no descriptor,
    /// [`Outbox::complete_unbatched`] settles it.
    pub fn batch_view(&self) -> Option<BatchView<'_>> {
        if self.failed.get() {
            return None;
        }
        let transport = self.transport.borrow().clone()?;
        let pending = self.pending.borrow();
        if pending.is_empty() {
            return None;
        }
        Some(BatchView { transport, pending })
    }

    /// Accounts the result of the batched send: bytes written are consumed (and whatever is
    /// left is written as [`Outbox::write_now`] would, which then most likely finds the
    /// socket full); a refusal leaves the bytes waiting for the socket, counted in the budget;
    /// an error fails the outbox. The same outcome as a `writev` by [`Outbox::send`].
    pub fn complete(&self, result: io::Result<usize>) -> Sent {
        self.enlisted.set(false);
        match result {
            Ok(0) => self.fail(),
            Ok(written) => {
                consume(&mut self.pending.borrow_mut(), written);
                self.bytes.set(self.bytes.get().saturating_sub(written));
                self.blocked_since.set(None);
                self.write_now()
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                if self.blocked_since.get().is_none() {
                    self.blocked_since.set(Some(Instant::now()));
                }
                self.settle();
                Sent::Pending
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => self.write_now(),
            Err(_) => self.fail(),
        }
    }

    /// Leaves the batch without a batched send: what is pending is written now, if it can be.
    pub fn complete_unbatched(&self) -> Sent {
        self.enlisted.set(false);
        self.write_now()
    }

    /// Writes pending bytes until none are left or the kernel refuses more.
    pub fn write_now(&self) -> Sent {
        let sent = self.write_pending();
        self.settle();
        sent
    }

    /// Counts what still waits in the server's budget.
    fn settle(&self) {
        if !self.charge.settle(self.bytes.get()) {
            self.over_budget.set(true);
        }
    }

    fn write_pending(&self) -> Sent {
        if self.failed.get() {
            return Sent::Failed;
        }
        let Some(transport) = self.transport.borrow().clone() else {
            return self.fail();
        };
        loop {
            let mut pending = self.pending.borrow_mut();
            if pending.is_empty() {
                self.blocked_since.set(None);
                return Sent::Written;
            }
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (slot, item) in slices.iter_mut().zip(pending.iter()) {
                *slot = IoSlice::new(item);
                count += 1;
            }
            match transport.try_write_vectored(&slices[..count]) {
                Ok(0) => {
                    drop(pending);
                    return self.fail();
                }
                Ok(written) => {
                    consume(&mut pending, written);
                    self.bytes.set(self.bytes.get().saturating_sub(written));
                    // Progress: the write timeout counts from the next refusal.
                    self.blocked_since.set(None);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    if self.blocked_since.get().is_none() {
                        self.blocked_since.set(Some(Instant::now()));
                    }
                    return Sent::Pending;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    drop(pending);
                    return self.fail();
                }
            }
        }
    }

    /// Ready once every pending byte is written; fails when the socket does.
    pub fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.write_now() {
                Sent::Written => return Poll::Ready(Ok(())),
                Sent::Failed => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Sent::Pending => {
                    let Some(transport) = self.transport.borrow().clone() else {
                        return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                    };
                    ready!(transport.poll_write_ready(cx))?;
                }
            }
        }
    }

    /// Holds writes back until [`Outbox::uncork`].
    pub fn cork(&self) {
        self.corked.set(true);
    }

    /// Writes what was queued while corked.
    pub fn uncork(&self) -> Sent {
        self.corked.set(false);
        self.write_now()
    }

    pub fn is_corked(&self) -> bool {
        self.corked.get()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.borrow().is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes.get()
    }

    pub fn failed(&self) -> bool {
        self.failed.get()
    }

    /// Whether waiting bytes did not fit in the server's answer budget.
    pub fn over_budget(&self) -> bool {
        self.over_budget.get()
    }

    /// Drops the waiting messages that have not started to leave: the connection is closing
    /// because it holds too much. The front one may be partly written; it stays, so that the
    /// frames the client gets (and the close frame after them) stay whole.
    pub fn shed(&self) {
        let mut pending = self.pending.borrow_mut();
        pending.truncate(1);
        self.bytes.set(pending.front().map_or(0, Bytes::len));
        drop(pending);
        self.settle();
    }

    /// How long the kernel has taken no byte while some wait, if it has.
    pub fn blocked_for(&self) -> Option<Duration> {
        self.blocked_since.get().map(|since| since.elapsed())
    }

    /// Moves the outbox onto another socket, whose own outbox `first` holds bytes that must
    /// leave before this one's (a long-polling session moving to a WebSocket: the frames that
    /// WebSocket already sent, then the session's). `first` is left detached and empty.
    pub fn move_onto(&self, transport: Rc<dyn Transport>, first: &Outbox) -> Sent {
        let earlier = std::mem::take(&mut *first.pending.borrow_mut());
        first.bytes.set(0);
        first.settle();
        let failed = first.failed.get();
        first.detach();
        {
            let mut pending = self.pending.borrow_mut();
            for item in earlier.into_iter().rev() {
                self.bytes.set(self.bytes.get() + item.len());
                pending.push_front(item);
            }
        }
        *self.transport.borrow_mut() = Some(transport);
        self.blocked_since.set(None);
        if failed {
            return self.fail();
        }
        self.write_now()
    }

    /// Lets the socket go: nothing more will be written.
    pub fn detach(&self) {
        self.transport.borrow_mut().take();
    }

    fn fail(&self) -> Sent {
        self.failed.set(true);
        self.pending.borrow_mut().clear();
        self.bytes.set(0);
        self.settle();
        Sent::Failed
    }
}

/// Drops the first `written` bytes of `pending`.
fn consume(pending: &mut VecDeque<Bytes>, mut written: usize) {
    while written > 0 {
        let Some(front) = pending.front_mut() else {
            return;
        };
        if front.len() <= written {
            written -= front.len();
            pending.pop_front();
        } else {
            front.advance(written);
            written = 0;
        }
    }
}

/// Where the WebSocket library reads from: a non-blocking socket, plain or TLS.
pub trait Source {
    /// Reads what has arrived into `buf`, or registers the task to be woken when more does.
    fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>>;
}

impl Source for TcpStream {
    fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_read_ready(cx))?;
            match self.try_read(buf.initialize_unfilled()) {
                Ok(read) => {
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

/// A connection's stream once accepted: plain TCP, or TLS after its handshake. Its first
/// request head is read through it; a WebSocket connection then turns it into one socket that
/// the outbox writes and the WebSocket library reads.
pub trait Accepted: AsyncRead + AsyncWrite + Unpin + 'static {
    type Shared: Source + Transport + 'static;

    fn into_shared(self) -> Rc<Self::Shared>;

    /// The stream in a form that another core can take (its runtime registers it again).
    fn into_movable(self) -> io::Result<Movable>;
}

impl Accepted for TcpStream {
    type Shared = TcpStream;

    fn into_shared(self) -> Rc<TcpStream> {
        Rc::new(self)
    }

    fn into_movable(self) -> io::Result<Movable> {
        Ok(Movable::Plain(self.into_std()?))
    }
}

/// An accepted stream on its way to another core (defined with the listeners, so that the
/// messages that carry one need not know the edge).
pub use hearth_net::listener::Movable;

/// Bytes a read takes from a socket at most. They land in the shard thread's scratch buffer
/// ([`SCRATCH`]); a connection keeps only what its reader has not taken yet.
const SCRATCH_BYTES: usize = 64 * 1024;

thread_local! {
    /// One read buffer per shard thread, shared by all its connections: an idle connection
    /// then holds no read buffer of its own (BENCHMARKS.md §9, idle connections). Borrowed
    /// only for the length of one non-blocking read.
    static SCRATCH: RefCell<Box<[u8]>> = RefCell::new(vec![0; SCRATCH_BYTES].into_boxed_slice());
}

/// The socket as the WebSocket library sees it: reads go to the socket, writes go through the
/// connection's [`Outbox`], behind the pushes queued before them.
///
/// The library reads into a small buffer of its own (`READ_BUFFER_BYTES` in `websocket.rs`).
/// A read from the socket takes up to [`SCRATCH_BYTES`] into the shard's scratch buffer,
/// hands the library what fits and keeps the rest in `spill`, which later reads drain before
/// the socket is read again: a burst still costs one `read`, and `spill` is freed once empty.
pub struct SharedStream<S> {
    stream: Rc<S>,
    outbox: Rc<Outbox>,
    spill: Vec<u8>,
    /// How much of `spill` the library has taken.
    spill_taken: usize,
}

impl<S> SharedStream<S> {
    pub fn new(stream: Rc<S>, outbox: Rc<Outbox>) -> SharedStream<S> {
        SharedStream {
            stream,
            outbox,
            spill: Vec::new(),
            spill_taken: 0,
        }
    }

    /// Hands `buf` what it can take of the spilled bytes; `false` when there are none.
    fn take_spill(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let left = &self.spill[self.spill_taken..];
        if left.is_empty() {
            return false;
        }
        let taken = left.len().min(buf.remaining());
        buf.put_slice(&left[..taken]);
        self.spill_taken += taken;
        if self.spill_taken == self.spill.len() {
            self.spill = Vec::new();
            self.spill_taken = 0;
        }
        true
    }

    /// From now on the library writes through `outbox` (which must write to the same socket,
    /// after whatever the previous one held: see [`Outbox::move_onto`]).
    pub fn set_outbox(&mut self, outbox: Rc<Outbox>) {
        self.outbox = outbox;
    }
}

impl<S: Source> AsyncRead for SharedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.take_spill(buf) {
            return Poll::Ready(Ok(()));
        }
        if buf.remaining() >= SCRATCH_BYTES {
            return this.stream.poll_read_into(cx, buf);
        }
        SCRATCH.with_borrow_mut(|scratch| {
            let mut read = ReadBuf::new(scratch);
            ready!(this.stream.poll_read_into(cx, &mut read))?;
            let read = read.filled();
            let fits = read.len().min(buf.remaining());
            buf.put_slice(&read[..fits]);
            if fits < read.len() {
                this.spill = read[fits..].to_vec();
            }
            Poll::Ready(Ok(()))
        })
    }
}

impl<S> AsyncWrite for SharedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Always accepted whole, so that the library never holds half a frame that a push
        // could overtake.
        match self.outbox.send([Bytes::copy_from_slice(buf)]) {
            Sent::Failed => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
            Sent::Written | Sent::Pending => Poll::Ready(Ok(buf.len())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outbox.poll_drain(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.outbox.poll_drain(cx)
    }
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod tests;
