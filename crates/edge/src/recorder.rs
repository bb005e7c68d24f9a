//! A transport for tests of outboxes, here and in the crates above: it records what it is
//! given and takes only the room a test sets. Compiled always, as tests of other crates
//! cannot see this crate's test code; it opens no socket.

use std::cell::{Cell, RefCell};
use std::io::{self, IoSlice};
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::socket::Transport;

/// A transport that takes at most `room` bytes, then blocks until given more room.
pub struct Recorder {
    pub written: RefCell<Vec<u8>>,
    pub room: Cell<usize>,
    pub broken: Cell<bool>,
    /// How many times it was asked to write: each is one `write`/`writev` of a real socket.
    pub writes: Cell<usize>,
}

impl Recorder {
    pub fn new(room: usize) -> Rc<Recorder> {
        Rc::new(Recorder {
            written: RefCell::new(Vec::new()),
            room: Cell::new(room),
            broken: Cell::new(false),
            writes: Cell::new(0),
        })
    }
}

impl Transport for Recorder {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes.set(self.writes.get() + 1);
        if self.broken.get() {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        if self.room.get() == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut taken = 0;
        for buf in bufs {
            let n = buf.len().min(self.room.get());
            self.written.borrow_mut().extend_from_slice(&buf[..n]);
            self.room.set(self.room.get() - n);
            taken += n;
        }
        Ok(taken)
    }

    fn poll_write_ready(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.room.get() > 0 {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}
