//! The volatile tick of an owner: the databases with volatile changes waiting
//! (`hearth_sync::Database::flush_volatile`), the replies of the volatile writes held until
//! the pushes that carry their values, and the task that flushes both once per tick.
//!
//! A flush queues its pushes like any other (`route_effects`): sessions on this core get them
//! at once, those of other cores in this loop turn's batch for their edge (`link::Outgoing`).
//! The held replies are queued right after them, so each writer's `ok` follows a push of its
//! value or a newer one on every connection (an `ok` first would make the SDK show the old
//! value for a moment).

use std::rc::Rc;
use std::time::Duration;

use hearth_sync::Effects;

use crate::effects::route_effects;
use crate::state::Owner;
use hearth_net::time::now_ms;

pub use hearth_config::{DEFAULT_VOLATILE_HZ, MAX_VOLATILE_HZ};

/// The tick's period in milliseconds for `hz` ticks per second (clamped to 1..=MAX).
pub fn period_ms(hz: u32) -> u64 {
    1_000 / u64::from(hz.clamp(1, MAX_VOLATILE_HZ))
}

/// When the next tick after `now_ms` is due: ticks fall on multiples of the period, so a
/// change waits at most one period and two flushes are never closer than one.
pub fn next_tick(now_ms: u64, period_ms: u64) -> u64 {
    let period = period_ms.max(1);
    (now_ms / period + 1) * period
}

/// Pushes the volatile changes of every database of this owner, then the replies they held.
pub fn flush(owner: &Owner) {
    let dirty = owner.volatile().take_dirty();
    if dirty.is_empty() {
        return;
    }
    for namespace in dirty {
        let mut effects = Effects::new();
        owner.with_loaded(&namespace, |database| database.flush_volatile(&mut effects));
        route_effects(owner, &namespace, effects);
        for (conn, reply) in owner.volatile().take_held(&namespace) {
            // A connection that ended meanwhile has nobody to tell.
            if let Some(handle) = owner.session(conn) {
                handle.send_text(reply);
            }
        }
    }
}

/// The owner's tick: sleeps while nothing is dirty, else flushes on each tick boundary. Ends
/// with the server, after a last flush.
pub async fn tick_loop(owner: Rc<Owner>) {
    let period = period_ms(owner.config().volatile_hz);
    let mut shutdown = owner.shutdown();
    loop {
        if owner.volatile().is_idle() {
            tokio::select! {
                _ = owner.volatile().woken() => {}
                _ = shutdown.changed() => break,
            }
        }
        let now = now_ms();
        let wait = next_tick(now, period).saturating_sub(now);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = shutdown.changed() => break,
        }
        flush(&owner);
    }
    flush(&owner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_multiples_of_the_period() {
        assert_eq!(period_ms(DEFAULT_VOLATILE_HZ), 33);
        assert_eq!(period_ms(60), 16);
        assert_eq!(period_ms(0), 1_000, "at least one tick a second");
        assert_eq!(period_ms(10_000), period_ms(MAX_VOLATILE_HZ));
        assert_eq!(next_tick(0, 33), 33);
        assert_eq!(next_tick(32, 33), 33);
        assert_eq!(next_tick(33, 33), 66);
        assert_eq!(next_tick(1_000, 0), 1_001);
        // Whenever a change comes, it waits at most one period.
        for now in 990..1_100 {
            let due = next_tick(now, 16);
            assert!(due > now && due - now <= 16 && due.is_multiple_of(16));
        }
    }
}
