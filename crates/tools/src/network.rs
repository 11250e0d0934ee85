//! The network policy of a tool set's children: while it is on, the children of
//! `node_process` and `run_command` (and background jobs) reach the network only through a
//! proxy of the server's own, to the hosts the embedder listed.
//!
//! [`NetworkPolicy::start`] makes, once per tool set (a server), the children's network
//! ([`confine_nodeexec::Network`]: a network namespace whose only way out is the proxy, or
//! Landlock TCP rules) and serves the proxy ([`confine_netpolicy::Proxy`]) on the listener it
//! gives. Each run gets a ticket of its own: the proxy's variables (with the ticket's token)
//! in its environment, and the proxy's decisions about that run's requests in its record,
//! `network: [{host, port, allowed, reason?}]`. Where no mechanism works the policy still
//! exists, unavailable: every call under it fails with `NETWORK_POLICY_UNAVAILABLE` and
//! nothing runs (never a child with the host's network in its place).

use confine_netpolicy::{AllowList, Decision, Proxy, ProxyOptions, Ticket};
use confine_nodeexec::{Network, NetworkMechanism};

/// The network policy of one tool set (share it in an `Arc` between the tools of a server).
///
/// The proxy runs on a runtime of the policy's own (one worker thread, `confine-proxy`), so
/// an embedder needs none and its own runtime's load never delays a child's request.
///
/// A policy made by [`NetworkPolicy::deferred`] makes the children's network and starts its
/// proxy at the first run under it (or the first question about its mechanism): a server
/// whose session only reads and writes files never forks the namespace's maker nor starts the
/// proxy's thread. [`NetworkPolicy::start`] does both at once.
pub struct NetworkPolicy {
    allow: AllowList,
    strongest: NetworkMechanism,
    started: std::sync::OnceLock<Started>,
}

/// The network made and the proxy serving (or why not).
struct Started {
    state: Result<Live, String>,
    /// The proxy's runtime: shut down (in the background, so the policy may be dropped
    /// anywhere, an async task included) after the proxy has been dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Started {
    fn drop(&mut self) {
        // The proxy first (its listener and tunnels closed), then its runtime.
        self.state = Err(String::new());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

struct Live {
    network: Network,
    proxy: Proxy,
}

impl std::fmt::Debug for NetworkPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Asks nothing of a policy not yet started (a `Debug` must not fork).
        let mechanism = self
            .started
            .get()
            .map(|s| s.state.as_ref().ok().map(|l| l.network.mechanism()));
        f.debug_struct("NetworkPolicy")
            .field("mechanism", &mechanism)
            .field("allow", &self.allow)
            .finish()
    }
}

/// One run's share of the policy: what its command needs, and its decisions afterwards.
#[derive(Clone, Debug)]
pub(crate) struct RunNetwork {
    pub network: Network,
    pub ticket: Ticket,
}

impl NetworkPolicy {
    /// Make the children's network with the strongest mechanism allowed, no stronger than
    /// `strongest`, and serve the proxy for `allow` on it, now. Never fails: where no
    /// mechanism works (or the proxy's runtime cannot start) the policy is unavailable (see
    /// [`NetworkPolicy::unavailable`]).
    pub fn start(allow: AllowList, strongest: NetworkMechanism) -> Self {
        let policy = Self::deferred(allow, strongest);
        policy.started();
        policy
    }

    /// [`NetworkPolicy::start`], done at the first run under the policy (or the first call of
    /// [`NetworkPolicy::mechanism`], [`NetworkPolicy::unavailable`] or
    /// [`NetworkPolicy::proxy_addr`]) instead of now.
    pub fn deferred(allow: AllowList, strongest: NetworkMechanism) -> Self {
        Self {
            allow,
            strongest,
            started: std::sync::OnceLock::new(),
        }
    }

    /// Whether the network is made and the proxy started (or found unavailable).
    pub fn is_started(&self) -> bool {
        self.started.get().is_some()
    }

    fn started(&self) -> &Started {
        self.started
            .get_or_init(|| Started::new(&self.allow, self.strongest))
    }

    /// The mechanism in use; `None` when the policy is unavailable.
    pub fn mechanism(&self) -> Option<NetworkMechanism> {
        self.started()
            .state
            .as_ref()
            .ok()
            .map(|l| l.network.mechanism())
    }

    /// Why no mechanism works here (for `confine doctor`), when the policy is unavailable.
    pub fn unavailable(&self) -> Option<&str> {
        self.started().state.as_ref().err().map(String::as_str)
    }

    /// The allow list.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow
    }

    /// The proxy's address as a child reaches it.
    pub fn proxy_addr(&self) -> Option<std::net::SocketAddr> {
        self.started()
            .state
            .as_ref()
            .ok()
            .map(|l| l.network.proxy_addr())
    }

    /// A run's network and ticket; `None` when the policy is unavailable.
    pub(crate) fn run(&self) -> Option<RunNetwork> {
        let live = self.started().state.as_ref().ok()?;
        Some(RunNetwork {
            network: live.network.clone(),
            ticket: live.proxy.ticket(),
        })
    }
}

impl Started {
    fn new(allow: &AllowList, strongest: NetworkMechanism) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("confine-proxy")
            .enable_all()
            .build();
        let runtime = match runtime {
            Ok(runtime) => runtime,
            Err(e) => {
                let why = format!("the proxy's runtime could not start: {e}");
                tracing::warn!("the network policy is unavailable: {why}");
                return Self {
                    state: Err(why),
                    runtime: None,
                };
            }
        };
        let entered = runtime.enter();
        let state = Network::new(strongest)
            .map_err(|e| {
                let why = std::error::Error::source(&e).map(ToString::to_string);
                why.unwrap_or_else(|| e.to_string())
            })
            .and_then(|(network, listener)| {
                Proxy::start(listener, allow.clone(), ProxyOptions::default())
                    .map(|proxy| Live { network, proxy })
                    .map_err(|e| format!("the proxy could not start: {e}"))
            });
        drop(entered);
        if let Err(why) = &state {
            tracing::warn!("the network policy is unavailable: {why}");
        }
        Self {
            state,
            runtime: Some(runtime),
        }
    }
}

impl RunNetwork {
    /// The decisions so far, for a record.
    pub(crate) fn decisions(&self) -> Vec<Decision> {
        self.ticket.decisions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    impl NetworkPolicy {
        /// A policy whose mechanism failed, as on a system with neither namespaces nor
        /// Landlock (which this machine is not).
        fn unavailable_for_tests() -> Self {
            let policy = Self::deferred(AllowList::empty(), NetworkMechanism::Landlock);
            let _ = policy.started.set(Started {
                state: Err("no mechanism (test)".into()),
                runtime: None,
            });
            policy
        }
    }

    /// Under an unavailable policy both process tools fail with the token and run nothing.
    #[test]
    fn an_unavailable_policy_runs_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let options = crate::ToolSetOptions {
            commands: Some(crate::RunCommandOptions::default()),
            network: Some(Arc::new(NetworkPolicy::unavailable_for_tests())),
            ..Default::default()
        };
        let registry = crate::create_selected_tools(
            tmp.path(),
            options,
            &["run_command".to_owned(), "node_process".to_owned()],
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        for (name, arguments) in [
            ("run_command", r#"{"command":"touch ran"}"#),
            (
                "node_process",
                r#"{"source":"require('fs').writeFileSync('ran', '')"}"#,
            ),
        ] {
            let call = crate::ToolCall {
                id: "1".into(),
                name: name.into(),
                arguments: serde_json::value::RawValue::from_string(arguments.into()).unwrap(),
            };
            let (record, is_error) = rt
                .block_on(crate::execute_tool_call_record(&registry, &call, &cancel))
                .unwrap();
            assert!(is_error);
            let record = serde_json::to_value(&record).unwrap();
            assert_eq!(
                record,
                serde_json::json!({"error": {"code": "TOOL_EXECUTION_FAILED",
                    "message": "NETWORK_POLICY_UNAVAILABLE"}})
            );
            assert!(!tmp.path().join("ran").exists());
        }
    }

    #[test]
    fn a_started_policy_names_its_mechanism_and_gives_tickets() {
        let policy = NetworkPolicy::start(AllowList::empty(), NetworkMechanism::Namespace);
        assert!(policy.unavailable().is_none(), "{:?}", policy.unavailable());
        assert!(policy.mechanism().is_some());
        let run = policy.run().unwrap();
        assert!(run.decisions().is_empty());
        assert!(run.ticket.env().iter().any(|(k, _)| k == "HTTPS_PROXY"));
        // Dropped inside an async task: the proxy's runtime shuts down in the background.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async move { drop(policy) });
    }

    /// A deferred policy is not started until its first run, which it then serves as a
    /// started one does; started inside a multi-thread runtime's task, as a server's first
    /// run starts it. (That a server's process has no proxy thread before then is asserted
    /// from outside, by the serving tests: the threads of this test process are shared.)
    #[test]
    fn a_deferred_policy_starts_nothing_until_its_first_run() {
        let policy = Arc::new(NetworkPolicy::deferred(
            AllowList::empty(),
            NetworkMechanism::Namespace,
        ));
        assert!(!policy.is_started());
        assert!(format!("{policy:?}").contains("mechanism: None"));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let in_task = Arc::clone(&policy);
        let run = rt
            .block_on(async move { tokio::spawn(async move { in_task.run() }).await })
            .unwrap();
        assert!(policy.is_started());
        assert!(policy.unavailable().is_none(), "{:?}", policy.unavailable());
        let run = run.unwrap();
        assert!(run.ticket.env().iter().any(|(k, _)| k == "HTTPS_PROXY"));
        rt.block_on(async move { drop(policy) });
    }
}
