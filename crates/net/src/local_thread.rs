//! A thread of its own that runs one future on a current-thread runtime with a `LocalSet`, for
//! the listeners that live beside the shards (metrics, the node-to-node link).

use std::future::Future;
use std::thread::JoinHandle;

use tracing::warn;

/// Spawns the thread `name` and runs the future `make` returns on it until it completes. A
/// runtime that cannot be built is logged (as `what`) and the thread ends.
pub fn spawn_local_thread<F, Fut>(
    name: &str,
    what: &'static str,
    make: F,
) -> std::io::Result<JoinHandle<()>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    warn!(%error, "cannot build the {what}'s runtime");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, make());
        })
}
