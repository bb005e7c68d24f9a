//! Push ids (spec §13): the keys that `POST` creates, in the client's own format, so that ids
//! made by the server and ids made by clients sort together chronologically.
//!
//! An id is 20 characters of an alphabet in ASCII order: 8 for the time in milliseconds, 12
//! random. Within one millisecond the random part of the previous id is incremented instead of
//! drawn again, so ids from one generator are strictly increasing. The caller supplies the time
//! and the randomness; nothing here reads a clock.

/// The 64 characters of push ids, in ASCII (and therefore key) order.
pub const PUSH_ID_ALPHABET: &[u8; 64] =
    b"-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

/// Characters of the time part.
const TIME_CHARS: usize = 8;

/// Characters of the random part.
pub const PUSH_ID_RANDOM_CHARS: usize = 12;

/// Length of a push id.
pub const PUSH_ID_LEN: usize = TIME_CHARS + PUSH_ID_RANDOM_CHARS;

/// Makes push ids. One generator per database owner (a shard) keeps that database's ids
/// strictly increasing even when the clock stands still or steps back.
#[derive(Debug, Clone, Default)]
pub struct PushIdGenerator {
    last_time: u64,
    /// The random part of the last id, as alphabet indices (0..64).
    last_random: [u8; PUSH_ID_RANDOM_CHARS],
    started: bool,
}

impl PushIdGenerator {
    pub fn new() -> PushIdGenerator {
        PushIdGenerator::default()
    }

    /// The next id for time `now_ms`. `random` supplies fresh randomness; only its low six
    /// bits per byte are used, and only when the time moved forward.
    pub fn next_id(&mut self, now_ms: u64, random: [u8; PUSH_ID_RANDOM_CHARS]) -> String {
        // A clock that steps back must not produce ids that sort before earlier ones: keep
        // using the last time and increment, as within one millisecond.
        if self.started && now_ms <= self.last_time {
            self.increment();
        } else {
            self.last_time = now_ms;
            for (slot, byte) in self.last_random.iter_mut().zip(random) {
                *slot = byte & 63;
            }
            self.started = true;
        }
        let mut id = String::with_capacity(PUSH_ID_LEN);
        let mut time = self.last_time;
        let mut time_chars = [0u8; TIME_CHARS];
        for slot in time_chars.iter_mut().rev() {
            *slot = PUSH_ID_ALPHABET[(time % 64) as usize];
            time /= 64;
        }
        id.extend(time_chars.iter().map(|&c| char::from(c)));
        id.extend(
            self.last_random
                .iter()
                .map(|&i| char::from(PUSH_ID_ALPHABET[usize::from(i)])),
        );
        id
    }

    /// Adds one to the random part, carrying from the last character. When every character
    /// is already the largest, the time part moves on by one millisecond instead, which keeps
    /// the order strict.
    fn increment(&mut self) {
        for slot in self.last_random.iter_mut().rev() {
            if *slot < 63 {
                *slot += 1;
                return;
            }
            *slot = 0;
        }
        self.last_time += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_time_prefix() {
        let mut generator = PushIdGenerator::new();
        let id = generator.next_id(1_700_000_000_000, [7; 12]);
        assert_eq!(id.len(), PUSH_ID_LEN);
        assert!(id.bytes().all(|b| PUSH_ID_ALPHABET.contains(&b)));
        // 1_700_000_000_000 in base 64 over the alphabet.
        assert_eq!(&id[..8], "-NjEtLV-");
        assert_eq!(&id[8..], "666666666666");
    }

    #[test]
    fn same_millisecond_increments() {
        let mut generator = PushIdGenerator::new();
        let first = generator.next_id(5, [63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 62]);
        let second = generator.next_id(5, [0; 12]);
        let third = generator.next_id(5, [0; 12]);
        assert!(first < second && second < third, "{first} {second} {third}");
        assert_eq!(&second[8..], "zzzzzzzzzzzz");
        // The random part overflowed: the time part moved on.
        assert_eq!(&third[..8], "-------5");
        assert_eq!(&third[8..], "------------");
    }

    #[test]
    fn a_clock_that_steps_back_keeps_order() {
        let mut generator = PushIdGenerator::new();
        let later = generator.next_id(10_000, [1; 12]);
        let earlier_clock = generator.next_id(9_000, [0; 12]);
        assert!(later < earlier_clock);
        let moved_on = generator.next_id(20_000, [0; 12]);
        assert!(earlier_clock < moved_on);
    }

    #[test]
    fn ids_sort_by_time() {
        let mut generator = PushIdGenerator::new();
        let mut previous = String::new();
        for (step, time) in [1u64, 63, 64, 4095, 4096, 1 << 40].into_iter().enumerate() {
            let id = generator.next_id(time, [step as u8; 12]);
            assert!(id > previous, "{id} after {previous}");
            previous = id;
        }
    }
}
