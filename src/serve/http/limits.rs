//! The front's limits: the request body's size and time, the head's time, the authenticated
//! connections and the waiting room of those not yet authenticated.

use std::time::Duration;

/// The largest request body accepted (`413` beyond).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// The most authenticated connections at once (a connection is authenticated by its first
/// request that passes the front's checks); a request that would authenticate one more is
/// `503`.
pub const MAX_CONNECTIONS: usize = 256;
/// The most connections not yet authenticated at once; one more takes the place of the
/// oldest, which is closed.
pub const MAX_UNAUTHENTICATED: usize = 64;
/// A request's head must arrive whole within this long of the connection's start (or of the
/// end of the previous request on it), whatever it sends meanwhile.
pub const HEAD_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A request's body must arrive within this long.
pub(super) const BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// One connection's standing: waiting unauthenticated (a place in the room), or
/// authenticated (a place among [`MAX_CONNECTIONS`]).
pub(super) struct Standing {
    pub(super) waiting: std::sync::Mutex<Option<confine_netpolicy::WaitingPlace>>,
    pub(super) served: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl super::Front {
    /// Moves a connection whose request passed the checks from the waiting room to the
    /// authenticated ones; `false` when those are all taken.
    pub(super) fn authenticate(&self, standing: &Standing) -> bool {
        let mut served = standing
            .served
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if served.is_some() {
            return true;
        }
        let Ok(place) = self.served.clone().try_acquire_owned() else {
            return false;
        };
        *served = Some(place);
        standing
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        true
    }
}
