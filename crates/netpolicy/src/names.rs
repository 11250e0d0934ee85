//! The proxy's resolved names, kept a short while: an ecosystem's client opens many tunnels to
//! the same few hosts (a registry, its tarball host), and each resolution costs a round trip
//! to the host's resolver (10 to 30 ms where this was measured).
//!
//! What is kept is what the resolver answered, not a decision: every use checks the addresses
//! again (their classes, the proxy's own address) exactly as a fresh answer is checked, so a
//! cached answer refuses what a fresh one would. An answer is kept [`NAME_TTL`] at most (the
//! system resolver gives no TTL, so the proxy picks one short enough that a host that moves is
//! followed within it), for at most [`MAX_NAMES`] names; a failure is never kept (the next
//! request asks again). Keeping the answer also keeps a name from changing its answer
//! between two requests of one install, which only narrows what a rebinding could try.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a resolved name is kept.
pub(crate) const NAME_TTL: Duration = Duration::from_secs(30);

/// The most names kept at once; one more evicts the expired ones, else the oldest.
pub(crate) const MAX_NAMES: usize = 256;

/// A name and port, and when it was resolved to what.
type Kept = HashMap<(String, u16), (Instant, Arc<[SocketAddr]>)>;

/// The names the proxy resolved, with when.
#[derive(Default)]
pub(crate) struct Names {
    kept: Mutex<Kept>,
}

impl Names {
    /// The addresses of `name:port`: kept ones younger than [`NAME_TTL`] at `now`, else what
    /// `lookup` answers (kept when it is not empty).
    pub(crate) async fn resolve<F, Fut>(
        &self,
        name: &str,
        port: u16,
        now: Instant,
        lookup: F,
    ) -> Arc<[SocketAddr]>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Vec<SocketAddr>>,
    {
        let key = (name.to_owned(), port);
        if let Some((at, addrs)) = self.lock().get(&key)
            && now.saturating_duration_since(*at) < NAME_TTL
        {
            return Arc::clone(addrs);
        }
        let addrs: Arc<[SocketAddr]> = lookup().await.into();
        if !addrs.is_empty() {
            self.keep(key, now, Arc::clone(&addrs));
        }
        addrs
    }

    fn keep(&self, key: (String, u16), now: Instant, addrs: Arc<[SocketAddr]>) {
        let mut kept = self.lock();
        if kept.len() >= MAX_NAMES && !kept.contains_key(&key) {
            kept.retain(|_, (at, _)| now.saturating_duration_since(*at) < NAME_TTL);
            if kept.len() >= MAX_NAMES
                && let Some(oldest) = kept
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone())
            {
                kept.remove(&oldest);
            }
        }
        kept.insert(key, (now, addrs));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([203, 0, 113, last], 443))
    }

    /// Resolve through a lookup that counts its calls and answers `answer`.
    fn resolve(
        names: &Names,
        name: &str,
        now: Instant,
        calls: &Cell<usize>,
        answer: Vec<SocketAddr>,
    ) -> Arc<[SocketAddr]> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(names.resolve(name, 443, now, || async {
            calls.set(calls.get() + 1);
            answer
        }))
    }

    #[test]
    fn an_answer_is_kept_for_its_ttl_and_asked_again_after() {
        let names = Names::default();
        let calls = Cell::new(0);
        let t0 = Instant::now();
        assert_eq!(
            &*resolve(&names, "a.test", t0, &calls, vec![addr(1)]),
            [addr(1)]
        );
        // Within the TTL the kept answer comes back, whatever the resolver would say now.
        let just_before = t0 + NAME_TTL - Duration::from_millis(1);
        assert_eq!(
            &*resolve(&names, "a.test", just_before, &calls, vec![addr(2)]),
            [addr(1)]
        );
        assert_eq!(calls.get(), 1);
        // At the TTL it is asked again, and the new answer is kept.
        let at_ttl = t0 + NAME_TTL;
        assert_eq!(
            &*resolve(&names, "a.test", at_ttl, &calls, vec![addr(2)]),
            [addr(2)]
        );
        assert_eq!(calls.get(), 2);
        // Another port is another name.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let other = rt.block_on(names.resolve("a.test", 80, at_ttl, || async {
            calls.set(calls.get() + 1);
            vec![addr(3)]
        }));
        assert_eq!(&*other, [addr(3)]);
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn a_failure_is_never_kept() {
        let names = Names::default();
        let calls = Cell::new(0);
        let t0 = Instant::now();
        assert!(resolve(&names, "gone.test", t0, &calls, Vec::new()).is_empty());
        assert!(resolve(&names, "gone.test", t0, &calls, Vec::new()).is_empty());
        assert_eq!(calls.get(), 2);
        assert_eq!(names.len(), 0);
        assert_eq!(
            &*resolve(&names, "gone.test", t0, &calls, vec![addr(4)]),
            [addr(4)]
        );
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn at_most_max_names_are_kept_the_oldest_going_first() {
        let names = Names::default();
        let calls = Cell::new(0);
        let t0 = Instant::now();
        for i in 0..MAX_NAMES {
            let at = t0 + Duration::from_millis(i as u64);
            resolve(&names, &format!("n{i}.test"), at, &calls, vec![addr(1)]);
        }
        assert_eq!(names.len(), MAX_NAMES);
        // One more: the oldest (n0) goes, the rest stay.
        let later = t0 + Duration::from_secs(1);
        resolve(&names, "one-more.test", later, &calls, vec![addr(1)]);
        assert_eq!(names.len(), MAX_NAMES);
        let before = calls.get();
        resolve(&names, "n1.test", later, &calls, vec![addr(1)]);
        assert_eq!(calls.get(), before, "n1 is still kept");
        resolve(&names, "n0.test", later, &calls, vec![addr(1)]);
        assert_eq!(calls.get(), before + 1, "n0 was evicted and is asked again");
        assert_eq!(names.len(), MAX_NAMES);
        // Past the TTL, one more clears every expired name at once.
        let much_later = later + NAME_TTL + Duration::from_secs(1);
        resolve(&names, "fresh.test", much_later, &calls, vec![addr(1)]);
        assert_eq!(names.len(), 1);
    }
}
