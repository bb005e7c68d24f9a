//! Batched socket sends through io_uring: many sockets' bytes handed to the kernel in one
//! `io_uring_enter` instead of one `write` each (the edge of `hearth-server`, `edge::uring`).
//!
//! Pushing a submission entry is `unsafe` because the kernel reads the buffers it names after
//! the push. [`Sender::send_all`] keeps that sound by taking the buffers and descriptors as
//! borrows and returning only once every entry it submitted has completed: the kernel is done
//! with them before the borrows end. Every send carries `MSG_DONTWAIT`, so a full socket
//! answers `EAGAIN` at once instead of leaving the request parked until the socket drains.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

/// One socket's send: the buffers go out in order, as far as the socket takes them.
pub struct Send<'a> {
    pub fd: BorrowedFd<'a>,
    pub bufs: &'a [IoSlice<'a>],
}

/// A ring for one thread's sends (`SINGLE_ISSUER`: only the thread that made it submits).
pub struct Sender {
    ring: IoUring,
    entries: usize,
    /// Set when the kernel refused a submission: entries it never took stay in the queue and
    /// must never be submitted, so the ring is not entered again.
    broken: bool,
}

impl Sender {
    /// A ring that submits at most `entries` sends per `io_uring_enter`.
    pub fn new(entries: u32) -> io::Result<Sender> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .build(entries)?;
        let entries = ring.params().sq_entries() as usize;
        Ok(Sender {
            ring,
            entries,
            broken: false,
        })
    }

    /// Sends each of `sends` (without waiting for room in its socket) and returns, in the same
    /// order, what each send returned: the bytes taken, or the socket's error (`WouldBlock`
    /// when it is full). `None` for a send that never reached the kernel because the ring
    /// failed; the caller writes those another way. Returns once the kernel is done with every
    /// buffer.
    pub fn send_all(&mut self, sends: &[Send<'_>]) -> Vec<Option<io::Result<usize>>> {
        let mut results: Vec<Option<io::Result<usize>>> = Vec::with_capacity(sends.len());
        results.resize_with(sends.len(), || None);
        for (offset, chunk) in sends.chunks(self.entries.max(1)).enumerate() {
            if self.broken {
                break;
            }
            let first = offset * self.entries.max(1);
            self.send_chunk(chunk, &mut results[first..]);
        }
        results
    }

    /// Submits the sends of `chunk` (at most the ring's entries) and reaps them all.
    fn send_chunk(&mut self, chunk: &[Send<'_>], results: &mut [Option<io::Result<usize>>]) {
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        // One header per send of several buffers. Filled before the first entry points into
        // it and not touched again until every entry is reaped, so it does not move.
        let mut headers: Vec<libc::msghdr> = chunk
            .iter()
            .map(|send| {
                // SAFETY: `msghdr` is plain data (integers and pointers); all-zero is the
                // empty header, and only its iovec fields are set below.
                #[allow(unsafe_code)]
                let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
                // `IoSlice` has the layout of `iovec` on Unix (documented by std).
                header.msg_iov = send.bufs.as_ptr() as *mut libc::iovec;
                header.msg_iovlen = send.bufs.len() as _;
                header
            })
            .collect();
        let mut pushed = 0;
        {
            let mut queue = self.ring.submission();
            for (index, (send, header)) in chunk.iter().zip(headers.iter_mut()).enumerate() {
                let fd = types::Fd(send.fd.as_raw_fd());
                let entry = match send.bufs {
                    [single] if u32::try_from(single.len()).is_ok() => {
                        opcode::Send::new(fd, single.as_ptr(), single.len() as u32)
                            .flags(flags)
                            .build()
                    }
                    _ => opcode::SendMsg::new(fd, header as *const libc::msghdr)
                        .flags(flags as u32)
                        .build(),
                };
                // SAFETY: the entry names `send.bufs` (or `header`, which points at them) and
                // `send.fd`, all borrowed for this whole call; this function returns only once
                // every entry it submitted has completed (or, if the kernel refused the
                // submission, once nothing it took is in flight: the rest is never submitted).
                #[allow(unsafe_code)]
                let pushed_now = unsafe { queue.push(&entry.user_data(index as u64)) };
                if pushed_now.is_err() {
                    break;
                }
                pushed += 1;
            }
        }
        let mut submitted = 0;
        let mut reaped = 0;
        while reaped < pushed {
            match self.ring.submit_and_wait(pushed - reaped) {
                Ok(count) => submitted += count,
                Err(error)
                    if matches!(
                        error.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(_) if reaped == submitted => {
                    // Nothing the kernel took is in flight; what it did not take stays in
                    // the queue, never to be submitted.
                    self.broken = true;
                    break;
                }
                Err(error) => {
                    // Entries the kernel took are still in flight and read the caller's
                    // buffers: returning now would let them be freed under it.
                    panic!("io_uring failed with sends in flight: {error}");
                }
            }
            for completion in self.ring.completion() {
                let result = completion.result();
                if let Some(slot) = results.get_mut(completion.user_data() as usize) {
                    *slot = Some(if result < 0 {
                        Err(io::Error::from_raw_os_error(-result))
                    } else {
                        Ok(result as usize)
                    });
                }
                reaped += 1;
            }
        }
        drop(headers);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (server, client)
    }

    #[test]
    fn sends_to_several_sockets_in_order_and_reports_a_full_one() {
        let Ok(mut sender) = Sender::new(4) else {
            eprintln!("no io_uring here: skipped");
            return;
        };
        let pairs: Vec<_> = (0..6).map(|_| pair()).collect();
        let full = &pairs[5].0;
        full.set_nonblocking(true).expect("nonblocking");
        // Fill the last socket until the kernel refuses more.
        let block = vec![0u8; 1 << 16];
        while std::io::Write::write(&mut &*full, &block).is_ok() {}
        let one = [IoSlice::new(b"hello")];
        let two = [IoSlice::new(b"ab"), IoSlice::new(b"cd")];
        let mut sends = Vec::new();
        for (index, (server, _)) in pairs.iter().enumerate() {
            let bufs: &[IoSlice<'_>] = if index % 2 == 0 { &one } else { &two };
            sends.push(Send {
                fd: server.as_fd(),
                bufs,
            });
        }
        let results = sender.send_all(&sends);
        for (index, result) in results.iter().enumerate().take(5) {
            let expected = if index % 2 == 0 { 5 } else { 4 };
            assert_eq!(
                result.as_ref().map(|r| r.as_ref().ok()),
                Some(Some(&expected))
            );
        }
        let refused = results[5].as_ref().expect("submitted");
        assert_eq!(
            refused.as_ref().map_err(io::Error::kind).err(),
            Some(io::ErrorKind::WouldBlock)
        );
        for (index, (_, client)) in pairs.iter().enumerate().take(5) {
            let mut got = vec![0u8; if index % 2 == 0 { 5 } else { 4 }];
            (&*client).read_exact(&mut got).expect("read");
            let want: &[u8] = if index % 2 == 0 { b"hello" } else { b"abcd" };
            assert_eq!(got, want);
        }
    }
}
