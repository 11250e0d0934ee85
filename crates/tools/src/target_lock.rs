//! The process-wide lock that serializes writes to one target.
//!
//! The key is the target's parent directory identity `(st_dev, st_ino)` and the file name, so
//! two tool instances over one workspace (or over two captures of it, or reaching the same
//! directory through an inside symlink) share one lock. Entries are weak: a lock lives while a
//! writer holds or awaits it, and dead entries are pruned when a new key is inserted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use confine_beneath::FileId;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};
use tokio_util::sync::CancellationToken;

use crate::error::Cancelled;

/// A target: its parent directory's identity and its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TargetKey {
    /// The parent directory's identity.
    pub(crate) dir: FileId,
    pub(crate) name: String,
}

type Table = Mutex<HashMap<TargetKey, Weak<AsyncMutex<()>>>>;

fn table() -> &'static Table {
    static LOCKS: OnceLock<Table> = OnceLock::new();
    LOCKS.get_or_init(Table::default)
}

/// The lock of `key` when no writer holds it now (`None` when one does: await
/// [`lock_target`]). Synchronous, so that a blocking job can take it on its way.
pub(crate) fn try_lock_target(key: &TargetKey) -> Option<OwnedMutexGuard<()>> {
    lock_of(key).try_lock_owned().ok()
}

/// The lock of `key`, shared by every writer of the target while one holds or awaits it.
fn lock_of(key: &TargetKey) -> Arc<AsyncMutex<()>> {
    let mut map = table().lock().unwrap_or_else(PoisonError::into_inner);
    match map.get(key).and_then(Weak::upgrade) {
        Some(lock) => lock,
        None => {
            map.retain(|_, w| w.strong_count() > 0);
            let lock = Arc::new(AsyncMutex::new(()));
            map.insert(key.clone(), Arc::downgrade(&lock));
            lock
        }
    }
}

/// Wait for the target's lock; a cancellation while waiting is a rejection (nothing has been
/// written yet).
pub(crate) async fn lock_target(
    key: TargetKey,
    cancel: &CancellationToken,
) -> Result<OwnedMutexGuard<()>, Cancelled> {
    let lock = lock_of(&key);
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(Cancelled),
        guard = lock.lock_owned() => Ok(guard),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> TargetKey {
        TargetKey {
            dir: FileId { dev: 1, ino: 2 },
            name: name.into(),
        }
    }

    #[tokio::test]
    async fn one_key_is_exclusive_two_keys_are_not() {
        let cancel = CancellationToken::new();
        let held = lock_target(key("a"), &cancel).await.unwrap();
        // Another key is free: its lock is taken at the first poll.
        let other = lock_target(key("b"), &cancel).await.unwrap();
        drop(other);
        // The same key is not: polled first (biased), the second writer stays pending while
        // the first holds the lock. Without the lock it would be granted at that first poll.
        let mut second = std::pin::pin!(lock_target(key("a"), &cancel));
        tokio::select! {
            biased;
            _ = &mut second => panic!("a second writer of one target got the lock while it was held"),
            () = tokio::task::yield_now() => {}
        }
        // Released, the waiting writer gets it.
        drop(held);
        let granted = second.await.unwrap();
        drop(granted);
    }

    #[tokio::test]
    async fn try_lock_is_refused_while_held_and_shares_the_awaited_lock() {
        let cancel = CancellationToken::new();
        let held = try_lock_target(&key("d")).expect("a free target");
        assert!(try_lock_target(&key("d")).is_none(), "held: refused");
        let mut awaited = std::pin::pin!(lock_target(key("d"), &cancel));
        tokio::select! {
            biased;
            _ = &mut awaited => panic!("granted while the try-lock holds it"),
            () = tokio::task::yield_now() => {}
        }
        drop(held);
        let granted = awaited.await.unwrap();
        assert!(
            try_lock_target(&key("d")).is_none(),
            "held by the awaiting writer"
        );
        drop(granted);
        assert!(try_lock_target(&key("d")).is_some());
    }

    #[tokio::test]
    async fn a_cancelled_wait_is_a_rejection() {
        let cancel = CancellationToken::new();
        let held = lock_target(key("c"), &cancel).await.unwrap();
        let waiting = CancellationToken::new();
        let wait = lock_target(key("c"), &waiting);
        waiting.cancel();
        assert_eq!(wait.await.unwrap_err(), Cancelled);
        drop(held);
    }
}
