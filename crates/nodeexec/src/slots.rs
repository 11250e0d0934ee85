//! A bound on how many runs are alive at once, shared by every tool that starts processes.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind};

/// At most `size` runs at once; later ones wait in the order they asked (tokio's semaphore is
/// fair: first come, first served) and can be cancelled while they wait.
///
/// Share one `Arc<RunSlots>` between everything of an embedder that starts processes (every
/// [`Command`](crate::Command) given it with [`Command::slots`](crate::Command::slots)), so
/// that the bound is per embedder, not per tool. The wait does not count towards a run's time
/// bound: the clock starts when the run does.
#[derive(Debug)]
pub struct RunSlots {
    semaphore: Arc<Semaphore>,
    size: usize,
}

impl RunSlots {
    /// At most `size` runs at once (at least 1).
    pub fn new(size: usize) -> Self {
        let size = size.max(1);
        Self {
            semaphore: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// The default size: the number of CPUs this process may use (1 when unknown).
    pub fn default_size() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// How many runs may be alive at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// How many more runs could start now.
    pub fn available(&self) -> usize {
        self.semaphore.available_permits()
    }

    /// Wait (in order) for a slot, held until the returned value drops;
    /// [`ErrorKind::Cancelled`] when `cancel` fires first.
    pub async fn acquire(&self, cancel: &CancellationToken) -> Result<RunSlot, Error> {
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(Error::new(ErrorKind::Cancelled, None)),
            permit = Arc::clone(&self.semaphore).acquire_owned() => match permit {
                Ok(permit) => Ok(RunSlot { _permit: permit }),
                // Never closed: a closed semaphore would be our bug; refuse to run rather
                // than run unbounded.
                Err(_) => Err(Error::new(ErrorKind::StartFailed, None)),
            },
        }
    }
}

impl Default for RunSlots {
    /// [`RunSlots::default_size`] slots.
    fn default() -> Self {
        Self::new(Self::default_size())
    }
}

/// One held slot of a [`RunSlots`]; dropping it frees the slot.
#[derive(Debug)]
pub struct RunSlot {
    _permit: OwnedSemaphorePermit,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_bound_order_and_cancel() {
        let slots = Arc::new(RunSlots::new(2));
        assert_eq!((slots.size(), slots.available()), (2, 2));
        let never = CancellationToken::new();
        let a = slots.acquire(&never).await.unwrap();
        let _b = slots.acquire(&never).await.unwrap();
        assert_eq!(slots.available(), 0);

        // A third waits; cancelled while waiting, it gives up without a slot.
        let cancel = CancellationToken::new();
        let waiting = {
            let slots = Arc::clone(&slots);
            let cancel = cancel.clone();
            tokio::spawn(async move { slots.acquire(&cancel).await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        cancel.cancel();
        let e = waiting.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled);

        // Waiters are served in the order they came.
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (slots, order) = (Arc::clone(&slots), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let slot = slots.acquire(&CancellationToken::new()).await.unwrap();
                order.lock().unwrap().push(i);
                drop(slot);
            }));
            // Let each queue before the next.
            tokio::task::yield_now().await;
        }
        drop(a);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(RunSlots::new(0).size(), 1);
        assert!(RunSlots::default().size() >= 1);
    }
}
