//! Tickets: the decisions of one run or job, recorded under a token its requests carry.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

/// How many distinct (host, port) decisions a ticket keeps.
pub const MAX_DECISIONS: usize = 100;

/// One decision of the proxy: a host and port a child asked for, and whether it was let
/// through. `reason` is set on refusals (`not on the allow list`, `resolves to a loopback
/// address`, …).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// The host as asked (lower case, no trailing dot; an IPv6 literal without brackets).
    pub host: String,
    /// The port as asked.
    pub port: u16,
    /// Whether the request passed the policy.
    pub allowed: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The live tickets of one proxy, by token.
pub(crate) struct Registry {
    live: Mutex<HashMap<String, Weak<TicketState>>>,
    /// The connections each ticket may have at once (its head read).
    per_run: usize,
}

impl Registry {
    /// A registry whose tickets each hold at most `per_run` connections at once.
    pub(crate) fn new(per_run: usize) -> Registry {
        Registry {
            live: Mutex::new(HashMap::new()),
            per_run,
        }
    }

    /// The ticket whose token this is, while some clone of it lives.
    pub(crate) fn find(&self, token: &str) -> Option<Arc<TicketState>> {
        self.live.lock().ok()?.get(token)?.upgrade()
    }
}

pub(crate) struct TicketState {
    token: String,
    addr: SocketAddr,
    decisions: Mutex<Vec<Decision>>,
    registry: Weak<Registry>,
    /// The run's connections: one permit per connection whose head carried this token, held
    /// until it closes (the permit outlives the ticket if the run ends first).
    connections: Arc<tokio::sync::Semaphore>,
}

impl TicketState {
    /// A place among the run's connections, or `None` when it already has its bound.
    pub(crate) fn connection(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.connections).try_acquire_owned().ok()
    }

    /// Records a decision: the first one for each (host, port) is kept, at most
    /// [`MAX_DECISIONS`] of them.
    pub(crate) fn record(&self, decision: &Decision) {
        let Ok(mut list) = self.decisions.lock() else {
            return;
        };
        if list.len() < MAX_DECISIONS
            && !list
                .iter()
                .any(|d| d.host == decision.host && d.port == decision.port)
        {
            list.push(decision.clone());
        }
    }
}

impl Drop for TicketState {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade()
            && let Ok(mut live) = registry.live.lock()
        {
            live.remove(&self.token);
        }
    }
}

/// A ticket for one run or job: the requests that carry its token are recorded under it.
///
/// Clone it freely; when every clone is dropped the proxy forgets the token (a request that
/// still carries it is then decided like one without a token, and recorded nowhere).
#[derive(Clone)]
pub struct Ticket {
    state: Arc<TicketState>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is not printed: it is what attributes a request to this ticket.
        f.debug_struct("Ticket")
            .field("proxy", &self.state.addr)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    pub(crate) fn issue(registry: &Arc<Registry>, addr: SocketAddr) -> Ticket {
        let token = random_token();
        let state = Arc::new(TicketState {
            token: token.clone(),
            addr,
            decisions: Mutex::new(Vec::new()),
            registry: Arc::downgrade(registry),
            connections: Arc::new(tokio::sync::Semaphore::new(registry.per_run)),
        });
        if let Ok(mut live) = registry.live.lock() {
            live.insert(token, Arc::downgrade(&state));
        }
        Ticket { state }
    }

    /// The variables a child gets: `HTTPS_PROXY`, `HTTP_PROXY`, `https_proxy`, `http_proxy` =
    /// `http://confine:TOKEN@ADDR:PORT`; `NO_PROXY`, `no_proxy` = `localhost,127.0.0.1,::1`;
    /// `NODE_USE_ENV_PROXY=1`.
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://confine:{}@{}", self.state.token, self.state.addr);
        let mut vars: Vec<(String, String)> =
            ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
                .iter()
                .map(|k| ((*k).to_owned(), url.clone()))
                .collect();
        for k in ["NO_PROXY", "no_proxy"] {
            vars.push((k.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
        }
        vars.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
        vars
    }

    /// Decisions so far: distinct (host, port) in first-asked order, at most
    /// [`MAX_DECISIONS`].
    pub fn decisions(&self) -> Vec<Decision> {
        self.state
            .decisions
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default()
    }

    /// The ticket's token (128 random bits in hex), as `Proxy-Authorization: Basic
    /// base64(confine:TOKEN)` carries it.
    pub fn token(&self) -> &str {
        &self.state.token
    }
}

/// The one reader of randomness of the workspace's crates: `buf` filled from the kernel
/// (`/dev/urandom`). The proxy's tickets and the HTTP front's token come from here.
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read as _;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// 128 random bits from the kernel ([`random_bytes`]), in hex. Where that cannot be read, the
/// bits come from std's randomly keyed hasher instead: the token attributes decisions, it
/// guards nothing (see the crate docs), so a weaker source only weakens attribution.
fn random_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = [0u8; 16];
    if random_bytes(&mut bytes).is_err() {
        for (i, half) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            half.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_every_clone_forgets_the_token() {
        let registry = Arc::new(Registry::new(1));
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let ticket = Ticket::issue(&registry, addr);
        let token = ticket.token().to_owned();
        let clone = ticket.clone();
        drop(ticket);
        assert!(registry.find(&token).is_some(), "a clone still lives");
        drop(clone);
        assert!(registry.find(&token).is_none());
        assert!(registry.live.lock().unwrap().is_empty());
    }

    #[test]
    fn a_ticket_holds_its_bound_of_connections_and_no_more() {
        let registry = Arc::new(Registry::new(2));
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let ticket = Ticket::issue(&registry, addr);
        let other = Ticket::issue(&registry, addr);
        let first = ticket.state.connection().expect("1 of 2");
        let second = ticket.state.connection().expect("2 of 2");
        assert!(ticket.state.connection().is_none(), "3 of 2");
        // Another run's bound is its own.
        assert!(other.state.connection().is_some());
        drop(first);
        assert!(
            ticket.state.connection().is_some(),
            "a closed one gives its place back"
        );
        drop(second);
    }

    #[test]
    fn tokens_are_128_bits_of_hex_and_differ() {
        let a = random_token();
        let b = random_token();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
