//! The proxy's memory per open tunnel: 128 tunnels opened through it on loopback, each having
//! carried 8 KiB both ways, against the process's resident set (`VmRSS`) before and after.
//! A binary of its own, so that no other test's allocations share the process. The measure is
//! printed (docs/PERFORMANCE.md records it) and held to a generous bound.
//!
//! `cargo test -p confine-netpolicy --test tunnel_memory -- --nocapture`

use std::time::Duration;

use confine_netpolicy::{AllowList, Proxy, ProxyOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const PATIENCE: Duration = Duration::from_secs(30);

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

async fn open_tunnels(
    proxy: &Proxy,
    listener: &TcpListener,
    authority: &str,
    count: usize,
) -> Vec<(TcpStream, TcpStream)> {
    let payload = vec![7u8; 8192];
    let mut tunnels = Vec::with_capacity(count);
    for _ in 0..count {
        let mut client = TcpStream::connect(proxy.local_addr()).await.unwrap();
        client
            .write_all(format!("CONNECT {authority} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = [0u8; 39];
        tokio::time::timeout(PATIENCE, client.read_exact(&mut head))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 200 Connection established\r\n\r\n");
        let (mut server, _) = tokio::time::timeout(PATIENCE, listener.accept())
            .await
            .unwrap()
            .unwrap();
        let mut got = vec![0u8; payload.len()];
        client.write_all(&payload).await.unwrap();
        server.read_exact(&mut got).await.unwrap();
        server.write_all(&payload).await.unwrap();
        client.read_exact(&mut got).await.unwrap();
        tunnels.push((client, server));
    }
    tunnels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resident_memory_per_open_tunnel() {
    const WARM: usize = 16;
    const COUNT: usize = 128;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let options = ProxyOptions {
        max_tunnels: WARM + COUNT,
        // The tunnels carry no run's token.
        max_unattributed: WARM + COUNT,
        ..ProxyOptions::default()
    };
    let proxy = Proxy::start(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        AllowList::build(std::slice::from_ref(&authority)).unwrap(),
        options,
    )
    .unwrap();
    // Warm the allocator and the runtime, then measure the next tunnels alone.
    let warm = open_tunnels(&proxy, &listener, &authority, WARM).await;
    let before = vm_rss_kib();
    let tunnels = open_tunnels(&proxy, &listener, &authority, COUNT).await;
    let after = vm_rss_kib();
    let per_tunnel = after.saturating_sub(before) as f64 / COUNT as f64;
    println!(
        "netpolicy tunnel memory: {COUNT} tunnels, VmRSS {before} kB -> {after} kB, \
         {per_tunnel:.1} KiB per tunnel (both test ends included)"
    );
    // Two 8 KiB buffers and a task per tunnel; 256 KiB would mean something grew unbounded.
    assert!(per_tunnel < 256.0, "{per_tunnel:.1} KiB per tunnel");
    drop((warm, tunnels));
}
