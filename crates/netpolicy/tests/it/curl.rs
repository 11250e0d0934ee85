//! A real client, curl, configured by nothing but a ticket's variables: plain HTTP forwarded,
//! a `CONNECT` tunnel (`--proxytunnel`), a refusal it reports, all attributed to the ticket.

use std::time::Duration;

use confine_netpolicy::{AllowList, Decision, Proxy, ProxyOptions, Ticket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A loopback HTTP server answering `hello` to each request; returns its port and what it
/// received, request by request.
async fn hello_server() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        // Serves until the test ends (the runtime drops the task).
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                    match stream.read(&mut byte).await {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (port, rx)
}

/// curl with the ticket's variables (but `NO_PROXY`, which would send loopback around the
/// proxy) and `extra` arguments; its exit code and stdout.
async fn curl(ticket: &Ticket, extra: &[String]) -> Option<(i32, String)> {
    let env: Vec<(String, String)> = ticket
        .env()
        .into_iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("no_proxy"))
        .collect();
    let args: Vec<String> = ["--silent", "--max-time", "20"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain(extra.iter().cloned())
        .collect();
    tokio::task::spawn_blocking(move || {
        // A test driver running a client against the proxy: no tool's child process.
        #[allow(clippy::disallowed_methods)]
        let out = std::process::Command::new("curl")
            .args(&args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(env)
            .output()
            .ok()?;
        Some((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_goes_through_the_proxy_with_nothing_but_the_variables() {
    const TEST: &str = "curl_goes_through_the_proxy_with_nothing_but_the_variables";
    let (port, mut seen) = hello_server().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let policy =
        AllowList::build(&[format!("127.0.0.1:{port}"), format!("localhost:{port}")]).unwrap();
    let proxy = Proxy::start(listener, policy, ProxyOptions::default()).unwrap();
    let ticket = proxy.ticket();

    let url = format!("http://127.0.0.1:{port}/plain");
    let Some((code, body)) = curl(&ticket, &[url]).await else {
        testkit::not_run(
            TEST,
            "curl is not installed here (the raw-socket tests cover the proxy)",
        );
        return;
    };
    assert_eq!((code, body.as_str()), (0, "hello"));
    let head = tokio::time::timeout(Duration::from_secs(20), seen.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(head.starts_with("GET /plain HTTP/1.1\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-authorization"),
        "{head}"
    );

    // Through a CONNECT tunnel: the bytes inside are curl's own request, passed unread.
    let url = format!("http://127.0.0.1:{port}/tunnelled");
    let (code, body) = curl(&ticket, &["--proxytunnel".into(), url]).await.unwrap();
    assert_eq!((code, body.as_str()), (0, "hello"));
    let head = seen.recv().await.unwrap();
    assert!(head.starts_with("GET /tunnelled HTTP/1.1\r\n"), "{head}");

    // A listed name that resolves to loopback: curl reports the proxy's refusal.
    let url = format!("http://localhost:{port}/refused");
    let (code, body) = curl(&ticket, &["--proxytunnel".into(), url]).await.unwrap();
    assert_eq!(code, 56, "curl's 'CONNECT refused' exit: {body}");
    let url = format!("http://localhost:{port}/refused");
    let (code, body) = curl(&ticket, &[url]).await.unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        body,
        format!("confine: localhost:{port} refused: resolves to a loopback address\n")
    );
    assert!(
        seen.try_recv().is_err(),
        "the refused requests reached nothing"
    );

    assert_eq!(
        ticket.decisions(),
        [
            Decision {
                host: "127.0.0.1".into(),
                port,
                allowed: true,
                reason: None
            },
            Decision {
                host: "localhost".into(),
                port,
                allowed: false,
                reason: Some("resolves to a loopback address".into())
            },
        ]
    );
}
