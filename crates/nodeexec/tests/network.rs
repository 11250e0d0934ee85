//! The network policy's mechanism ([`confine_nodeexec::Network`]) as attacks: every probe runs
//! twice, under the network and without it, and the twin shows the probe reaches its target
//! without the policy, so each failure is the policy's doing.
//!
//! The targets are listeners of the test's own on the host's loopback (TCP, and UDP for
//! datagrams and a resolver); the proxy's listener is the one [`Network::new`] returns, which
//! these tests accept on themselves (the proxy is another crate's). Each mechanism the system
//! offers is tested; one it does not offer is recorded with `testkit::not_run`.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use confine_nodeexec::{Network, NetworkMechanism, Outcome, Sandbox};
use tokio_util::sync::CancellationToken;

mod support;
use support::{command, node};

const HELPERS: &str = "const net = require('net'), dgram = require('dgram'), dns = require('dns'), os = require('os');\
    const say = (v) => { console.log(JSON.stringify(v)); process.exit(0); };\
    setTimeout(() => say('timeout'), 4000);";

/// Run `source` under `network` (or without it: the twin), optionally sandboxed too.
fn run(network: Option<&Network>, sandbox: bool, source: &str) -> Outcome {
    let ws = tempfile::tempdir().unwrap();
    let mut cmd = command(node());
    cmd.arg("-e")
        .arg(format!("{HELPERS}\n{source}"))
        .current_dir(ws.path())
        .timeout(Duration::from_secs(20))
        .max_memory(None);
    match (network, sandbox) {
        (Some(network), true) => {
            let dir = std::fs::File::open(ws.path()).unwrap();
            let mut s = Sandbox::new();
            s.allow_installation(std::fs::canonicalize(node()).unwrap());
            s.network(network);
            cmd.sandbox(&s.build(&dir).expect("sandbox builds"));
        }
        (Some(network), false) => {
            cmd.network(network);
        }
        (None, _) => {}
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(cmd.run(&CancellationToken::new()))
        .expect("the run completes")
}

fn said(outcome: &Outcome) -> String {
    outcome
        .stdout
        .text
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output; stderr: {}", outcome.stderr.text))
        .to_owned()
}

/// Every mechanism this system offers, strongest first, each with its proxy listener; the
/// ones it does not offer are recorded as not run.
fn mechanisms(test: &str) -> Vec<(Network, TcpListener)> {
    let mut made = Vec::new();
    for strongest in [
        NetworkMechanism::Namespace,
        NetworkMechanism::UserNamespace,
        NetworkMechanism::Landlock,
    ] {
        match Network::new(strongest) {
            Ok((network, listener)) if network.mechanism() == strongest => {
                made.push((network, listener))
            }
            Ok((network, _)) => testkit::not_run(
                &format!("network mechanism {strongest:?} in the network tests"),
                &format!("{test}: this system gives {:?}", network.mechanism()),
            ),
            Err(e) => testkit::not_run(
                &format!("network mechanism {strongest:?} in the network tests"),
                &format!("{test}: {e}"),
            ),
        }
    }
    assert!(!made.is_empty(), "no network mechanism at all here");
    made
}

/// What the probe sends once connected: a connection that carries it is the probe's, any
/// other is the machine's (another test's check of a port of its own may land on the
/// listener), so a stray connection cannot fail or pass the test.
const TOKEN: &[u8] = b"confine-network-probe";

/// Whether a connection carrying [`TOKEN`] reaches `listener` within a moment.
fn accepted(listener: &TcpListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    for _ in 0..20 {
        // At most a few connections a round: strays are rare, and the loop stays bounded.
        for _ in 0..8 {
            let Ok((mut conn, _)) = listener.accept() else {
                break;
            };
            conn.set_nonblocking(false).unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut got = Vec::new();
            // Bounded: the probe ends its side after the token.
            let _ = (&mut conn).take(64).read_to_end(&mut got);
            if got.windows(TOKEN.len()).any(|w| w == TOKEN) {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn connect_probe(port: u16) -> String {
    let token = std::str::from_utf8(TOKEN).unwrap();
    format!(
        "const s = net.connect({{host: '127.0.0.1', port: {port}}}); \
         s.on('connect', () => s.end('{token}', () => say('ok'))); s.on('error', (e) => say(e.code));"
    )
}

#[test]
fn a_direct_tcp_connect_to_the_hosts_loopback_never_arrives() {
    const TEST: &str = "a_direct_tcp_connect_to_the_hosts_loopback_never_arrives";
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = target.local_addr().unwrap().port();
    // The twin: the probe reaches the listener without the policy.
    assert_eq!(said(&run(None, false, &connect_probe(port))), "\"ok\"");
    assert!(accepted(&target), "the twin's connection arrived");
    for (network, _proxy) in mechanisms(TEST) {
        for sandbox in [false, true] {
            let got = said(&run(Some(&network), sandbox, &connect_probe(port)));
            let want = match network.mechanism() {
                // Its own loopback: nothing listens there.
                NetworkMechanism::Landlock => "\"EACCES\"",
                _ => "\"ECONNREFUSED\"",
            };
            assert_eq!(got, want, "{:?} sandbox {sandbox}", network.mechanism());
            assert!(
                !accepted(&target),
                "{:?}: a connection arrived",
                network.mechanism()
            );
        }
    }
}

#[test]
fn the_proxy_is_reached_and_bytes_pass() {
    const TEST: &str = "the_proxy_is_reached_and_bytes_pass";
    for (network, proxy) in mechanisms(TEST) {
        let addr = network.proxy_addr();
        assert!(addr.ip().is_loopback());
        let source = format!(
            "const s = net.connect({{host: '127.0.0.1', port: {}}}); \
             s.on('connect', () => s.write('hello')); s.on('data', (d) => say(String(d))); \
             s.on('error', (e) => say(e.code));",
            addr.port()
        );
        let server = std::thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                let (mut conn, _) = proxy.accept().unwrap();
                let mut buf = [0u8; 5];
                conn.read_exact(&mut buf).unwrap();
                conn.write_all(b"world").unwrap();
                got.push(buf);
            }
            got
        });
        for sandbox in [false, true] {
            assert_eq!(
                said(&run(Some(&network), sandbox, &source)),
                "\"world\"",
                "{sandbox}"
            );
        }
        assert_eq!(server.join().unwrap(), [*b"hello"; 2]);
    }
}

#[test]
fn udp_and_a_resolver_of_the_hosts_loopback_get_nothing() {
    const TEST: &str = "udp_and_a_resolver_of_the_hosts_loopback_get_nothing";
    let target = UdpSocket::bind("127.0.0.1:0").unwrap();
    target
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    let port = target.local_addr().unwrap().port();
    let datagram = format!(
        "const u = dgram.createSocket('udp4'); u.on('error', (e) => say(e.code)); \
         u.send('leak', {port}, '127.0.0.1', (e) => say(e ? e.code : 'sent'));"
    );
    let resolver = format!(
        "const r = new dns.Resolver({{timeout: 500, tries: 1}}); r.setServers(['127.0.0.1:{port}']); \
         r.resolve4('secret.example', (e) => say(e ? 'failed' : 'resolved'));"
    );
    let mut buf = [0u8; 512];
    // The twins: the datagram and the query arrive.
    assert_eq!(said(&run(None, false, &datagram)), "\"sent\"");
    assert!(target.recv(&mut buf).is_ok(), "the twin's datagram arrived");
    run(None, false, &resolver);
    assert!(target.recv(&mut buf).is_ok(), "the twin's query arrived");
    for (network, _proxy) in mechanisms(TEST) {
        for sandbox in [false, true] {
            let mechanism = network.mechanism();
            let got = said(&run(Some(&network), sandbox, &datagram));
            // In a namespace the datagram goes to the run's own loopback; in the Landlock
            // mode no UDP socket can be made.
            let want = if network.own_loopback() {
                "\"sent\""
            } else {
                "\"EACCES\""
            };
            assert_eq!(got, want, "{mechanism:?} sandbox {sandbox}");
            assert!(
                target.recv(&mut buf).is_err(),
                "{mechanism:?}: a datagram arrived"
            );
            assert_eq!(said(&run(Some(&network), sandbox, &resolver)), "\"failed\"");
            assert!(
                target.recv(&mut buf).is_err(),
                "{mechanism:?}: a query arrived"
            );
        }
    }
}

#[test]
fn unix_netlink_and_listening_sockets_follow_the_mechanism() {
    const TEST: &str = "unix_netlink_and_listening_sockets_follow_the_mechanism";
    let unix = "const p = require('path').join(process.cwd(), 's.sock'); \
        const srv = net.createServer(); srv.on('error', (e) => say(e.code)); srv.listen(p, () => say('ok'));";
    // getifaddrs reads the interfaces over netlink.
    let netlink = "try { os.networkInterfaces(); say('ok'); } catch (e) { say('refused'); }";
    // A server and its client in one command, on the run's own loopback.
    let own = "const srv = net.createServer((c) => c.end('pong')); srv.on('error', (e) => say(e.code)); \
        srv.listen(0, '127.0.0.1', () => { const c = net.connect(srv.address().port, '127.0.0.1'); \
        c.on('data', (d) => say(String(d))); c.on('error', (e) => say(e.code)); });";
    assert_eq!(said(&run(None, false, unix)), "\"ok\"");
    assert_eq!(said(&run(None, false, netlink)), "\"ok\"");
    assert_eq!(said(&run(None, false, own)), "\"pong\"");
    for (network, _proxy) in mechanisms(TEST) {
        let mechanism = network.mechanism();
        for sandbox in [false, true] {
            assert_eq!(
                said(&run(Some(&network), sandbox, unix)),
                "\"EACCES\"",
                "{mechanism:?}"
            );
            assert_eq!(
                said(&run(Some(&network), sandbox, netlink)),
                "\"refused\"",
                "{mechanism:?}"
            );
            let want = if network.own_loopback() {
                "\"pong\""
            } else {
                "\"EACCES\""
            };
            assert_eq!(
                said(&run(Some(&network), sandbox, own)),
                want,
                "{mechanism:?} {sandbox}"
            );
        }
    }
}

#[test]
fn runs_of_one_network_share_one_loopback() {
    const TEST: &str = "runs_of_one_network_share_one_loopback";
    for (network, _proxy) in mechanisms(TEST) {
        if !network.own_loopback() {
            continue;
        }
        // A run that listens on its loopback and stays (a dev server), a second run that
        // connects to it; the host does not see that port.
        let port_file = tempfile::NamedTempFile::new().unwrap();
        let path = port_file.path().to_str().unwrap().to_owned();
        let server = format!(
            "const srv = net.createServer((c) => {{ c.end('from-run-one'); }}); \
             srv.listen(0, '127.0.0.1', () => require('fs').writeFileSync('{path}', String(srv.address().port)));"
        );
        let net2 = network.clone();
        let handle = std::thread::spawn(move || run(Some(&net2), false, &server));
        let mut port = String::new();
        for _ in 0..100 {
            port = std::fs::read_to_string(&path).unwrap_or_default();
            if !port.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !port.is_empty(),
            "{:?}: the first run listened",
            network.mechanism()
        );
        let client = format!(
            "const c = net.connect({port}, '127.0.0.1'); c.on('data', (d) => say(String(d))); \
             c.on('error', (e) => say(e.code));"
        );
        assert_eq!(
            said(&run(Some(&network), false, &client)),
            "\"from-run-one\""
        );
        // From the host, that port is not the run's server.
        let port = port.trim().parse::<u16>().unwrap();
        assert!(!testkit::host_loopback_answers(port, b"from-run-one"));
        let first = handle.join().unwrap();
        assert_eq!(said(&first), "\"timeout\"");
    }
}
