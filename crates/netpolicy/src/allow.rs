//! The allow list: entries parsed, presets expanded, the name-level match.

use crate::entry::{Entry, EntryError, RequestHost};
use crate::presets::{self, ClientEnv};

/// The hosts a server's children may reach through the proxy: `--allow-net` entries parsed,
/// presets expanded once, at build time.
#[derive(Clone, Debug, Default)]
pub struct AllowList {
    entries: Vec<Entry>,
    presets: Vec<(String, Vec<String>)>,
    /// The IP literals the embedder gave itself: only these pass the address classes. An IP
    /// literal a preset yields is in `entries` (the name-level match) but not here.
    literals: Vec<Entry>,
}

impl AllowList {
    /// No host at all (`--sandbox` without `--allow-net`).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parses every entry and expands the presets by asking their clients, with the
    /// embedding process's environment ([`ClientEnv::from_process`]).
    pub fn build<S: AsRef<str>>(entries: &[S]) -> Result<Self, EntryError> {
        Self::build_with_env(entries, &ClientEnv::from_process())
    }

    /// [`AllowList::build`] with the environment the preset clients are looked up in and run
    /// with given explicitly (`PATH`, `HOME`, `CARGO_HOME`, `PIP_INDEX_URL`, …).
    pub fn build_with_env<S: AsRef<str>>(
        entries: &[S],
        env: &ClientEnv,
    ) -> Result<Self, EntryError> {
        let mut list = Self::default();
        for text in entries {
            let text = text.as_ref();
            if let Some(preset) = text.strip_prefix('@') {
                if preset.is_empty() || !preset.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err(EntryError::Malformed(text.to_owned()));
                }
                if list.presets.iter().any(|(p, _)| p == text) {
                    continue;
                }
                let expanded = presets::resolve(preset, env)?;
                list.presets.push((
                    text.to_owned(),
                    expanded.iter().map(Entry::display).collect(),
                ));
                for e in expanded {
                    list.push(e);
                }
            } else {
                let entry = Entry::parse(text)?;
                if matches!(entry, Entry::Ip { .. }) && !list.literals.contains(&entry) {
                    list.literals.push(entry.clone());
                }
                list.push(entry);
            }
        }
        Ok(list)
    }

    fn push(&mut self, entry: Entry) {
        if !self.entries.contains(&entry) {
            self.entries.push(entry);
        }
    }

    /// What each preset resolved to, in the order given: `("@npm", ["registry.example.test"])`.
    pub fn presets_resolved(&self) -> Vec<(String, Vec<String>)> {
        self.presets.clone()
    }

    /// The entries, presets expanded, duplicates removed, in the order given.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether `host` on `port` matches an entry by name (or by IP literal): the first step of
    /// the proxy's decision alone, before any resolution.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = match host.parse::<std::net::Ipv6Addr>() {
            // A bare IPv6 literal, as a caller may pass it.
            Ok(v6) => Some(RequestHost::Ip(crate::entry::canonical_ip(v6.into()))),
            Err(_) => RequestHost::parse(host),
        };
        host.is_some_and(|h| self.matching(&h, port).is_some())
    }

    /// Whether the embedder listed `ip` on `port` itself, as an IP literal entry: the one case
    /// where an address of a refused class (loopback, private, …) may be reached. An IP
    /// literal a preset yields does not count: a preset is read from a client's configuration,
    /// which is not the embedder's word for a host inside.
    pub(crate) fn lists_literal(&self, ip: std::net::IpAddr, port: u16) -> bool {
        let host = RequestHost::Ip(crate::entry::canonical_ip(ip));
        self.literals.iter().any(|e| e.matches(&host, port))
    }

    /// The first entry that allows `host` on `port`.
    pub(crate) fn matching(&self, host: &RequestHost, port: u16) -> Option<&Entry> {
        self.entries.iter().find(|e| e.matches(host, port))
    }
}
