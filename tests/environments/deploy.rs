//! What a deployment relies on, checked without a cluster:
//!
//! - `GET /healthz` answers `200` without the token (a kubelet's probe cannot carry one),
//!   beside its twins that are not answered without it (`/mcp`, `POST /healthz`,
//!   `/healthz/x`, another path), the Host and Origin checks kept for the probe too, and a
//!   server on every address answering a probe that names the pod's address;
//! - the Kubernetes manifests of `deploy/kubernetes/` hold every field the deployment's
//!   security rests on (gVisor, no capabilities, no privilege escalation, not root, seccomp,
//!   no service-account token, the token from a Secret, the probe on `/healthz`, a workspace
//!   volume, `--no-sandbox` in `args` since gVisor has no Landlock), each check shown to
//!   catch its field removed or changed;
//! - the image script takes its packages from the machine's own apt sources, naming no host.

use crate::support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use serde_json::Value;
use support::{census_flags, confine};

const TOKEN: &str = "deploy-token-3b8e1f6a2c9d4e7f0a1b2c3d4e5f6a7b";

/// A running `confine mcp --http ADDR` with the token in its environment.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(addr: &str, flags: &[&str]) -> (Server, tempfile::TempDir) {
        let root = tempfile::tempdir().unwrap();
        let mut server = confine();
        server
            .args(["mcp", "--root"])
            .arg(root.path())
            .args(["--http", addr])
            .args(census_flags())
            .args(flags)
            .env("CONFINE_HTTP_TOKEN", TOKEN);
        let (child, port) = support::spawn_http(server);
        (Server { child, port }, root)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request on a new connection to 127.0.0.1:`port`: its status and body. `headers` are
/// sent as given; a `Host` naming the bound address is added unless `headers` has one.
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn healthz_is_answered_without_the_token_and_nothing_else_is() {
    let (server, _root) = Server::start("127.0.0.1:0", &[]);
    let port = server.port;
    let (status, body) = request(port, "GET", "/healthz", &[]);
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    // A query string does not change the path.
    assert_eq!(request(port, "GET", "/healthz?probe=1", &[]).0, 200);
    // Twins without the token: nothing else is answered, whatever the path or the method.
    for (method, path) in [
        ("GET", "/mcp"),
        ("POST", "/mcp"),
        ("DELETE", "/mcp"),
        ("POST", "/healthz"),
        ("HEAD", "/healthz"),
        ("PUT", "/healthz"),
        ("GET", "/healthz/"),
        ("GET", "/healthz/x"),
        ("GET", "/healthzx"),
        ("GET", "/HEALTHZ"),
        ("GET", "/mcp/../healthz"),
        ("GET", "/"),
        ("GET", "/other"),
    ] {
        let (status, body) = request(port, method, path, &[]);
        assert_eq!(status, 401, "{method} {path} without the token: {body}");
        let wrong = format!("Bearer {TOKEN}x");
        let (status, _) = request(port, method, path, &[("Authorization", &wrong)]);
        assert_eq!(status, 401, "{method} {path} with a wrong token");
    }
    // With the token, another path is not found and /mcp is MCP's (a GET without a session
    // is refused by the transport, not by the front).
    let auth = format!("Bearer {TOKEN}");
    for (method, path) in [
        ("POST", "/healthz"),
        ("GET", "/healthz/x"),
        ("GET", "/other"),
    ] {
        let (status, _) = request(port, method, path, &[("Authorization", &auth)]);
        assert_eq!(status, 404, "{method} {path} with the token");
    }
    let (status, _) = request(port, "GET", "/mcp", &[("Authorization", &auth)]);
    assert!(![401, 403, 404].contains(&status), "GET /mcp: {status}");
    // The probe meets the Host and Origin checks as every request does.
    let (status, _) = request(port, "GET", "/healthz", &[("Host", "evil.example")]);
    assert_eq!(status, 403);
    let (status, _) = request(
        port,
        "GET",
        "/healthz",
        &[("Origin", "http://evil.example")],
    );
    assert_eq!(status, 403);
    let local = format!("localhost:{port}");
    assert_eq!(request(port, "GET", "/healthz", &[("Host", &local)]).0, 200);
}

#[test]
fn a_server_on_every_address_answers_a_probe_naming_the_pod_address() {
    // A kubelet's probe connects to the pod's address and sends it as the Host.
    let (server, _root) = Server::start("0.0.0.0:0", &["--http-public"]);
    let port = server.port;
    let pod = format!("10.42.0.17:{port}");
    assert_eq!(request(port, "GET", "/healthz", &[("Host", &pod)]).0, 200);
    // Its twin: the same Host on /mcp still needs the token.
    assert_eq!(request(port, "POST", "/mcp", &[("Host", &pod)]).0, 401);
    // A Host naming another port is not this server.
    let other = format!("10.42.0.17:{}", port.wrapping_add(1).max(1));
    assert_eq!(request(port, "GET", "/healthz", &[("Host", &other)]).0, 403);
}

#[test]
fn healthz_is_answered_by_an_unauthenticated_loopback_server_too() {
    let (server, _root) = Server::start("127.0.0.1:0", &["--http-no-auth"]);
    assert_eq!(request(server.port, "GET", "/healthz", &[]).0, 200);
    assert_eq!(request(server.port, "GET", "/other", &[]).0, 404);
}

// ---- The manifests ----

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// Every YAML document of `deploy/kubernetes/NAME`, as JSON values.
fn documents(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy_dir().join("kubernetes").join(name)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc).unwrap();
            value
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}: {docs:?}");
    found[0]
}

/// What the pod spec lacks of the fields a deployment's security rests on, one line each.
/// `claims` names the volume claim templates that also provide volumes (agent-sandbox).
fn pod_spec_problems(spec: &Value, claims: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_owned());
        }
    };
    need(
        spec["runtimeClassName"] == "gvisor",
        "runtimeClassName: gvisor",
    );
    need(
        spec["automountServiceAccountToken"] == false,
        "automountServiceAccountToken: false",
    );
    for shared in ["hostNetwork", "hostPID", "hostIPC"] {
        need(
            spec[shared].is_null() || spec[shared] == false,
            &format!("no {shared}"),
        );
    }
    let pod = &spec["securityContext"];
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| spec[k].as_array())
        .flatten()
        .collect();
    need(!containers.is_empty(), "a container");
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .chain(claims.iter().copied())
        .collect();
    for c in &containers {
        let name = c["name"].as_str().unwrap_or("?");
        let sc = &c["securityContext"];
        // A container's own setting wins over the pod's.
        let effective = |field: &str| {
            if sc[field].is_null() {
                pod[field].clone()
            } else {
                sc[field].clone()
            }
        };
        need(
            sc["allowPrivilegeEscalation"] == false,
            &format!("{name}: allowPrivilegeEscalation: false"),
        );
        need(
            sc["privileged"].is_null() || sc["privileged"] == false,
            &format!("{name}: not privileged"),
        );
        need(
            sc["capabilities"]["drop"] == serde_json::json!(["ALL"]),
            &format!("{name}: capabilities: {{drop: [ALL]}}"),
        );
        need(
            sc["capabilities"]["add"]
                .as_array()
                .is_none_or(|a| a.is_empty()),
            &format!("{name}: no capability added"),
        );
        need(
            effective("runAsNonRoot") == true,
            &format!("{name}: runAsNonRoot: true"),
        );
        need(
            effective("runAsUser").as_u64().is_none_or(|u| u != 0),
            &format!("{name}: runAsUser not 0"),
        );
        need(
            effective("seccompProfile")["type"] == "RuntimeDefault",
            &format!("{name}: seccompProfile: {{type: RuntimeDefault}}"),
        );
        for mount in c["volumeMounts"].as_array().into_iter().flatten() {
            let mount_name = mount["name"].as_str().unwrap_or("?");
            need(
                volumes.contains(&mount_name),
                &format!("{name}: volume {mount_name} defined"),
            );
        }
    }
    let Some(confine) = containers.iter().find(|c| c["name"] == "confine") else {
        problems.push("a container named confine".to_owned());
        return problems;
    };
    let probe = &confine["readinessProbe"]["httpGet"];
    let port_8080 = |port: &Value| {
        port == 8080
            || confine["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["name"] == *port && p["containerPort"] == 8080)
    };
    need(
        probe["path"] == "/healthz" && port_8080(&probe["port"]),
        "readinessProbe: httpGet /healthz on 8080",
    );
    need(
        confine["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["containerPort"] == 8080),
        "containerPort 8080",
    );
    let token: Vec<&Value> = confine["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == "CONFINE_HTTP_TOKEN")
        .collect();
    need(
        token.len() == 1
            && token[0].get("value").is_none()
            && token[0]["valueFrom"]["secretKeyRef"]["name"].is_string()
            && token[0]["valueFrom"]["secretKeyRef"]["key"].is_string(),
        "CONFINE_HTTP_TOKEN from a Secret (secretKeyRef), never a literal",
    );
    need(
        confine["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["mountPath"] == "/workspace" && m["readOnly"] != true),
        "a writable workspace volume at /workspace",
    );
    need(
        confine["command"].is_null(),
        "the image's entry point kept (no command)",
    );
    // gVisor has no Landlock: a server offering node_process refuses to start sandboxed.
    need(
        confine["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a == "--no-sandbox")),
        "args: --no-sandbox (gVisor has no Landlock)",
    );
    problems
}

#[test]
fn the_deployment_and_its_service_hold_every_required_field() {
    let docs = documents("deployment.yaml");
    let deployment = of_kind(&docs, "Deployment");
    assert_eq!(deployment["apiVersion"], "apps/v1");
    // One server per agent session.
    assert_eq!(deployment["spec"]["replicas"], 1);
    let template = &deployment["spec"]["template"];
    let problems = pod_spec_problems(&template["spec"], &[]);
    assert!(problems.is_empty(), "deployment.yaml lacks: {problems:#?}");
    let labels = &template["metadata"]["labels"];
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(&labels[k], v, "the selector matches the pod's labels");
    }
    let service = of_kind(&docs, "Service");
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the Service selects the pod");
    }
    let ports = service["spec"]["ports"].as_array().unwrap();
    assert!(
        ports
            .iter()
            .any(|p| p["targetPort"] == 8080 || p["targetPort"] == "mcp"),
        "{ports:?}"
    );
    assert_ne!(service["spec"]["type"], "LoadBalancer", "not public");
}

#[test]
fn the_sandbox_template_holds_the_same_pod_spec() {
    let docs = documents("sandbox-template.yaml");
    let template = of_kind(&docs, "SandboxTemplate");
    assert_eq!(template["apiVersion"], "extensions.agents.x-k8s.io/v1beta1");
    let spec = &template["spec"];
    let claims: Vec<&str> = spec["volumeClaimTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .collect();
    let pod = &spec["podTemplate"]["spec"];
    let problems = pod_spec_problems(pod, &claims);
    assert!(
        problems.is_empty(),
        "sandbox-template.yaml lacks: {problems:#?}"
    );
    // Claims cannot replace the token or the volumes.
    assert_eq!(spec["envVarsInjectionPolicy"], "Disallowed");
    assert_eq!(spec["volumeClaimTemplatesPolicy"], "Disallowed");
    // The same container as the Deployment's, but for the workspace volume's source.
    let deployment = documents("deployment.yaml");
    let deployed = &of_kind(&deployment, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"], deployed["containers"]);
    assert_eq!(pod["securityContext"], deployed["securityContext"]);
}

#[test]
fn each_check_catches_its_field_removed_or_changed() {
    let docs = documents("deployment.yaml");
    let good = of_kind(&docs, "Deployment")["spec"]["template"]["spec"].clone();
    assert!(pod_spec_problems(&good, &[]).is_empty());
    type Change = fn(&mut Value);
    let changes: [(&str, Change); 17] = [
        ("runtimeClassName", |s| {
            s["runtimeClassName"] = "runc".into()
        }),
        ("automountServiceAccountToken", |s| {
            s.as_object_mut()
                .unwrap()
                .remove("automountServiceAccountToken");
        }),
        ("hostNetwork", |s| s["hostNetwork"] = true.into()),
        ("allowPrivilegeEscalation", |s| {
            s["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = true.into()
        }),
        ("privileged", |s| {
            s["containers"][0]["securityContext"]["privileged"] = true.into()
        }),
        ("capabilities: {drop", |s| {
            s["containers"][0]["securityContext"]["capabilities"]["drop"] =
                serde_json::json!(["NET_RAW"])
        }),
        ("no capability added", |s| {
            s["containers"][0]["securityContext"]["capabilities"]["add"] =
                serde_json::json!(["SYS_ADMIN"])
        }),
        ("runAsNonRoot", |s| {
            s["containers"][0]["securityContext"]["runAsNonRoot"] = false.into()
        }),
        ("runAsUser", |s| {
            s["containers"][0]["securityContext"]["runAsUser"] = 0.into()
        }),
        ("seccompProfile", |s| {
            s["containers"][0]["securityContext"]["seccompProfile"]["type"] = "Unconfined".into()
        }),
        ("readinessProbe", |s| {
            s["containers"][0]["readinessProbe"]["httpGet"]["path"] = "/mcp".into()
        }),
        (
            "CONFINE_HTTP_TOKEN",
            |s| {
                s["containers"][0]["env"] =
                    serde_json::json!([{"name": "CONFINE_HTTP_TOKEN", "value": "literal"}])
            },
        ),
        ("workspace", |s| {
            s["containers"][0]["volumeMounts"][0]["readOnly"] = true.into()
        }),
        ("volume workspace defined", |s| {
            s["volumes"] = serde_json::json!([])
        }),
        ("entry point", |s| {
            s["containers"][0]["command"] = serde_json::json!(["/bin/sh"])
        }),
        ("a container named confine", |s| {
            s["containers"][0]["name"] = "other".into()
        }),
        ("args: --no-sandbox", |s| {
            s["containers"][0]["args"] = serde_json::json!(["--timeout-ms", "5000"])
        }),
    ];
    for (field, change) in changes {
        let mut spec = good.clone();
        change(&mut spec);
        let problems = pod_spec_problems(&spec, &[]);
        assert!(
            problems.iter().any(|p| p.contains(field)),
            "changing {field} went unnoticed: {problems:?}"
        );
    }
}

#[test]
fn the_image_script_uses_the_machines_apt_sources_and_names_no_host() {
    let script = std::fs::read_to_string(deploy_dir().join("image/build.sh")).unwrap();
    assert!(!script.contains("://"), "a URL in build.sh");
    assert!(script.contains("/etc/apt/sources.list.d/"));
    for name in [
        "kubernetes/deployment.yaml",
        "kubernetes/sandbox-template.yaml",
    ] {
        let text = std::fs::read_to_string(deploy_dir().join(name)).unwrap();
        assert!(!text.contains("://"), "a URL in {name}");
    }
    // The entry point the manifests and docs describe.
    for part in [
        "--http 0.0.0.0:8080",
        "--http-public",
        "/run/secrets/confine-token",
        "--root",
    ] {
        let flat = script.replace(" \\\n    --config.entrypoint ", " ");
        assert!(flat.contains(part), "{part} not in the entry point");
    }
    // The manifests' args add --no-sandbox; given twice, the server would refuse to start.
    assert!(!script.contains("--config.entrypoint --no-sandbox"));
}
