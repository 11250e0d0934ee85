//! Helpers shared by this repository's tests, one copy each: the process census
//! ([`census`]), the workspace beside a prefix-sharing sibling and leftover scans
//! ([`fixture`]), the Node.js executable ([`node`], [`node_on_path`]), small images of each
//! format `read_media` serves ([`media`]), unique names ([`unique`]), and the record of tests
//! that could not run where they ran ([`not_run`], [`skip`]).
//!
//! A dev-dependency only (and a dependency of `xtask`, which runs the census after the test
//! suites); never published. It depends on no crate of this workspace, so every crate's tests
//! may use it.

#![deny(missing_docs)]

pub mod census;
pub mod fixture;
pub mod media;
pub mod skip;

pub use fixture::{Sibling, assert_no_pify, pify_entries};
pub use skip::not_run;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// The Node.js executable for the `nodeexec` tests: `/usr/bin/node` when present (an ordinary
/// user can run it wherever the tests are copied), else the first `node` on `PATH`.
pub fn node() -> PathBuf {
    let fixed = PathBuf::from("/usr/bin/node");
    if fixed.exists() {
        return fixed;
    }
    node_on_path()
}

/// The first `node` on `PATH` (what the `node_process` tool finds when it is given none).
pub fn node_on_path() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("node"))
                .find(|p| p.is_file())
        })
        .expect("Node.js on PATH")
}

/// `<prefix>-<pid>-<n>`: unique within this test process, and between test processes.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The kernel's Landlock ABI, as the caller probed it (`confine_nodeexec::LandlockSupport`, which this
/// crate cannot depend on): the sandbox suites need one and fail loudly on a kernel without.
pub fn landlock_abi(probed: Option<u32>) -> u32 {
    probed
        .expect("these tests need a kernel with Landlock (5.13 or later, enabled in the LSM list)")
}

/// Whether a run's server on TCP `port` of its own loopback also answers on the host's:
/// `false` where the host can bind `127.0.0.1:port` (nothing of the host's listens there) or
/// where what listens there is a socket of this test process (another test's listener: the
/// run's server is a process of its own); else whether what answers there says `answer`.
/// Connecting first would be wrong twice: the port can be another test's listener, which
/// then counts a stray connection, and the check cannot tell that listener from the run's
/// server without reading its answer.
pub fn host_loopback_answers(port: u16, answer: &[u8]) -> bool {
    use std::io::Read;
    if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() || listened_here(port) {
        return false;
    }
    let Ok(s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    s.set_read_timeout(Some(std::time::Duration::from_millis(500)))
        .ok();
    let mut got = Vec::new();
    // Bounded: a stranger's listener that never ends its side is cut at the timeout.
    let _ = s.take(64 * 1024).read_to_end(&mut got);
    got == answer
}

/// Whether a TCP socket listening on `port` (IPv4 or IPv6, any address) is one of this
/// process's descriptors: the listener's inode from `/proc/net/tcp{,6}`, looked for among
/// `/proc/self/fd`'s `socket:[inode]` links.
fn listened_here(port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address is ADDR:PORT in hex, st "0A" is LISTEN, the inode is field 9.
            let Some(local) = fields.get(1) else { continue };
            let listening = fields.get(3) == Some(&"0A");
            let local_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if listening
                && local_port == Some(port)
                && let Some(inode) = fields.get(9)
            {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|link| inodes.iter().any(|i| link.as_os_str() == i.as_str()))
    })
}

#[cfg(test)]
mod tests {
    /// A server of another process's on the host's loopback that answers is found, one with
    /// another answer is not taken for it; a listener of this process's is never connected
    /// to; a port nobody holds is not either.
    #[test]
    fn host_loopback_answers_tells_the_server_from_strangers() {
        for answer in ["from-run", "other"] {
            let source = format!(
                "const s = require('net').createServer((c) => c.end('{answer}')); \
                 s.listen(0, '127.0.0.1', () => console.log(s.address().port)); \
                 setTimeout(() => process.exit(0), 10000);"
            );
            // A plain child (testkit sits below nodeexec), killed and reaped below; the
            // timer ends it if the test panics first.
            #[allow(clippy::disallowed_methods)]
            let mut server = std::process::Command::new(super::node())
                .args(["-e", &source])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(server.stdout.take().unwrap()),
                &mut line,
            )
            .unwrap();
            let port: u16 = line.trim().parse().unwrap();
            let found = super::host_loopback_answers(port, b"from-run");
            server.kill().unwrap();
            server.wait().unwrap();
            assert_eq!(found, answer == "from-run", "{answer}");
        }
        let ours = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = ours.local_addr().unwrap().port();
        assert!(super::listened_here(port));
        assert!(!super::host_loopback_answers(port, b"from-run"));
        ours.set_nonblocking(true).unwrap();
        assert!(
            ours.accept().is_err(),
            "the check connected to our listener"
        );
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        assert!(!super::host_loopback_answers(port, b"from-run"));
    }
}
