//! The waiting room: connections not yet known (no head, no credentials), bounded by letting
//! the oldest go rather than refusing the newest.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// Connections that have not yet shown who they are, in order of arrival, at most
/// `capacity` of them. One more does not wait and is not refused: it takes the place of the
/// oldest, which is told to leave ([`WaitingPlace::evicted`]).
///
/// Why the oldest: a server cannot tell whose a connection is before it has read what the
/// connection sends, so refusing the newest would let connections that send nothing keep out
/// every client. A client sends its request as soon as it has connected, so it waits a
/// moment at most and is never the oldest; a connection that sends nothing, or a byte now and
/// then, becomes the oldest and leaves first. The proxy keeps its unread connections here;
/// `confine mcp --http` its unauthenticated ones.
#[derive(Debug)]
pub struct WaitingRoom {
    capacity: usize,
    queue: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    next: u64,
    order: BTreeMap<u64, CancellationToken>,
}

impl WaitingRoom {
    /// A room for `capacity` connections (at least one).
    pub fn new(capacity: usize) -> Arc<WaitingRoom> {
        Arc::new(WaitingRoom {
            capacity: capacity.max(1),
            queue: Mutex::new(Queue::default()),
        })
    }

    /// A place for a new connection; when the room is full, the oldest is told to leave.
    pub fn enter(self: &Arc<Self>) -> WaitingPlace {
        let leave = CancellationToken::new();
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        // One pass in practice: the room never holds more than its capacity.
        while queue.order.len() >= self.capacity {
            match queue.order.pop_first() {
                Some((_, oldest)) => oldest.cancel(),
                None => break,
            }
        }
        let id = queue.next;
        queue.next += 1;
        queue.order.insert(id, leave.clone());
        WaitingPlace {
            room: Arc::clone(self),
            id,
            leave,
        }
    }

    /// How many connections wait now.
    pub fn len(&self) -> usize {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A connection's place in a [`WaitingRoom`]; dropping it (the connection has shown who it
/// is, or has ended) leaves the room.
#[derive(Debug)]
pub struct WaitingPlace {
    room: Arc<WaitingRoom>,
    id: u64,
    leave: CancellationToken,
}

impl WaitingPlace {
    /// Completes when newer connections have taken this one's place; never, once the place
    /// has been dropped. Owns what it needs, so it may outlive the place.
    pub fn evicted(&self) -> impl Future<Output = ()> + Send + 'static {
        self.leave.clone().cancelled_owned()
    }
}

impl Drop for WaitingPlace {
    fn drop(&mut self) {
        self.room
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .order
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evicted(place: &WaitingPlace) -> bool {
        place.leave.is_cancelled()
    }

    #[test]
    fn the_room_holds_its_capacity_and_the_next_one_evicts_the_oldest() {
        let room = WaitingRoom::new(3);
        let places: Vec<WaitingPlace> = (0..3).map(|_| room.enter()).collect();
        assert_eq!(room.len(), 3);
        assert!(places.iter().all(|p| !evicted(p)), "3 of 3 wait");
        let fourth = room.enter();
        assert!(evicted(&places[0]), "the oldest leaves");
        assert!(!evicted(&places[1]) && !evicted(&places[2]) && !evicted(&fourth));
        assert_eq!(room.len(), 3);
    }

    #[test]
    fn a_place_dropped_frees_it_and_is_never_evicted() {
        let room = WaitingRoom::new(2);
        let first = room.enter();
        let second = room.enter();
        let gone = first.evicted();
        drop(first);
        assert_eq!(room.len(), 1);
        let third = room.enter();
        assert!(
            !evicted(&second) && !evicted(&third),
            "room was made by the drop"
        );
        drop(gone);
        assert!(!room.is_empty());
        drop((second, third));
        assert!(room.is_empty());
    }
}
