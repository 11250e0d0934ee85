//! `confine doctor`: what this machine gives the tools, checked rather than assumed.
//!
//! * Landlock: available or not (not built in, not enabled at boot) and the kernel's ABI;
//! * the sandbox that node_process, run_command and jobs run under unless `--no-sandbox`:
//!   usable or not, the ABI its rules use, its effective policy (the paths it may read and
//!   write, metadata changes, which mechanism keeps pathname Unix sockets out of reach), and
//!   an end-to-end check through `node_process` in a scratch workspace (a write and a
//!   `chmod` inside must succeed; a write to the host's `/tmp`, a
//!   read of a file outside and a `chmod` of it must be refused: the write with `EROFS` or
//!   `EACCES`, the read with `EACCES`, the `chmod` with `EROFS` where the run's read-only view
//!   was made, `EPERM` where no mount namespace could be made and the seccomp rule refuses
//!   metadata changes everywhere, the workspace included; the check names which held);
//! * the containment `nodeexec` gets for a run (a cgroup v2 of its own with a PID namespace
//!   inside where one can be made, else a PID namespace, with a user namespace when
//!   unprivileged, else the waiter as child subreaper), and what bounds a run's processes;
//! * the Node.js found (`--node`, else `node` on PATH) and its version;
//! * the protected paths (the defaults, `--protect`, `--unprotect-defaults`: the patterns the
//!   write tools refuse with `PATH_PROTECTED`) and whether sandboxed children find them
//!   read-only here: a check writes a hook in a scratch repository through `node_process`
//!   (`EROFS`: a mount namespace of the run's own binds them read-only;
//!   `NODE_SANDBOX_UNAVAILABLE`: none can be made, so a sandboxed call in a workspace holding
//!   one is refused);
//! * the denied paths (`--deny`: the patterns every file tool refuses with `PATH_DENIED`) and
//!   whether sandboxed children find denied entries covered here: a check reads a denied
//!   file of a scratch workspace through `node_process` (empty: covered in a mount namespace
//!   of the run's own; `NODE_SANDBOX_UNAVAILABLE`: none can be made, so a sandboxed call in a
//!   workspace holding a denied entry is refused).
//!
//! Text by default, one JSON object with `--json`. The exit status is 0 whenever the report was
//! made, whatever it says: a machine without Landlock is a fact to report, not a failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use confine_nodeexec::{Containment, LandlockSupport, ProcessBound, Sandbox, SandboxRules};
use confine_tools::{ToolCall, ToolSetOptions, execute_tool_call};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Arguments of `confine doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Node.js executable (default: `node` found on PATH, canonicalized).
    #[arg(long, value_name = "PATH")]
    pub node: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also protect paths matching GLOB, as for `mcp` and `call` (shown in the report).
    #[arg(long = "protect", value_name = "GLOB", value_parser = super::common::protect_pattern)]
    pub protect: Vec<String>,
    /// Drop the default protected paths, as for `mcp` and `call`.
    #[arg(long)]
    pub unprotect_defaults: bool,
    /// Also deny paths matching GLOB, as for `mcp` and `call` (shown in the report).
    #[arg(long = "deny", value_name = "GLOB", value_parser = super::common::deny_pattern)]
    pub deny: Vec<String>,
    /// Also allow ENTRY through the network policy's proxy, as for `mcp` and `call` (each
    /// preset is shown with the hosts its client named).
    #[arg(long = "allow-net", value_name = "ENTRY")]
    pub allow_net: Vec<String>,
}

/// The denied-path probe: read the scratch workspace's denied file, its text or error code.
const DENIED_PROBE: &str = "const fs = require('fs');\
    let r; try { r = fs.readFileSync('secret.txt', 'utf8'); } catch (e) { r = e.code || String(e); }\
    console.log(JSON.stringify(r));";

/// What the probe's denied file holds.
const DENIED_TEXT: &str = "doctor's secret";

/// The protected-path probe: plant a hook in the scratch repository, as an error code.
const PROTECTED_PROBE: &str = "const fs = require('fs');\
    let r = 'ok'; try { fs.writeFileSync('.git/hooks/pre-commit', 'x'); } catch (e) { r = e.code || String(e); }\
    console.log(JSON.stringify(r));";

/// How long each probe run may take (a cold Node.js on a loaded machine is slow).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The end-to-end sandbox probe: a write inside, a write to `/tmp`, a read and a `chmod` of a
/// file outside (`argv[2]`), as error codes.
const SANDBOX_PROBE: &str = "const fs = require('fs');\
    const code = (f) => { try { f(); return 'ok'; } catch (e) { return e.code || String(e); } };\
    const outside = '/tmp/.confine-doctor-' + process.argv[1];\
    const r = { inside: code(() => fs.writeFileSync('inside.txt', 'x')),\
                chmodInside: code(() => fs.chmodSync('inside.txt', 0o755)),\
                outside: code(() => fs.writeFileSync(outside, 'x')),\
                read: code(() => fs.readFileSync(process.argv[2])),\
                chmod: code(() => fs.chmodSync(process.argv[2], 0o600)) };\
    if (r.outside === 'ok') fs.unlinkSync(outside);\
    console.log(JSON.stringify(r));";

/// The report, built once and printed as text or JSON.
struct Report {
    landlock: LandlockSupport,
    rules: Result<SandboxRules, confine_nodeexec::ErrorKind>,
    check: Value,
    /// The mode, and whether it had a PID namespace and a user namespace.
    containment: Option<(Containment, bool, bool)>,
    /// What bounds a run's processes.
    process_bound: Option<ProcessBound>,
    node: Option<(PathBuf, Option<String>)>,
    /// The protected patterns, and how many of them are the defaults.
    protected: (Vec<String>, usize),
    /// Whether a sandboxed child found a protected path read-only.
    protected_check: Value,
    /// The denied patterns (`--deny`).
    denied: Vec<String>,
    /// Whether a sandboxed child found a denied file covered.
    denied_check: Value,
    /// The network policy's mechanism here, the allow list and the presets resolved.
    network: Value,
    /// What sandboxed children may run from the home, and why.
    home_tools: confine_nodeexec::HomeTools,
    /// The sandboxed children's private /tmp and /dev/shm: the tmpfs's bound (bytes,
    /// entries), or why none could be made.
    private_tmp: Result<(u64, u64), String>,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(_) => return super::common::usage("cannot start the async runtime"),
    };
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(_) => return super::common::usage("cannot make a scratch directory"),
    };
    let protected =
        match confine_tools::ProtectedPaths::new(!args.unprotect_defaults, &args.protect) {
            Ok(list) => list,
            Err(e) => return super::common::usage(&format!("--protect: {e}")),
        };
    let denied = match confine_tools::DeniedPaths::new(&args.deny) {
        Ok(list) => list,
        Err(e) => return super::common::usage(&format!("--deny: {e}")),
    };
    let allow = match confine_netpolicy::AllowList::build(&args.allow_net) {
        Ok(allow) => allow,
        Err(e) => return super::common::usage(&e.to_string()),
    };
    let strongest = match super::common::ToolArgs::network_mechanism() {
        Ok(strongest) => strongest,
        Err(code) => return code,
    };
    let mut report = runtime.block_on(examine(&args, scratch.path(), protected));
    report.denied = denied.patterns().to_vec();
    report.network = network_report(&args.allow_net, allow, strongest);
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    ExitCode::SUCCESS
}

async fn examine(args: &Args, scratch: &Path, protected: confine_tools::ProtectedPaths) -> Report {
    let landlock = LandlockSupport::probe();
    let mut options = ToolSetOptions::default();
    options.node.executable = args.node.clone();
    options.node.timeout = Some(PROBE_TIMEOUT);
    let node = confine_tools::create_node_process_tool(scratch, options.clone())
        .ok()
        .map(|tool| tool.node().to_owned());

    // The rules the sandbox gives a call: node_process adds Node.js's installation.
    let mut policy = Sandbox::new();
    if let Some(node) = &node {
        policy.allow_installation(node);
    }
    let rules = std::fs::File::open(scratch)
        .map_err(|_| confine_nodeexec::ErrorKind::StartFailed)
        .and_then(|dir| policy.build(&dir).map_err(|e| e.kind()));

    // The containment a run gets: run Node.js (or, without one, this binary) once.
    let probe_program = node
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/bin/true"));
    let mut cmd = confine_nodeexec::Command::new(&probe_program);
    cmd.arg("--version")
        .current_dir(scratch)
        .timeout(PROBE_TIMEOUT);
    let outcome = cmd.run(&CancellationToken::new()).await.ok();
    let containment = outcome
        .as_ref()
        .map(|o| (o.containment, o.pid_namespace, o.user_namespace));
    let process_bound = outcome.as_ref().map(|o| o.process_bound);
    let node = node.map(|path| {
        let version = outcome
            .as_ref()
            .filter(|o| o.exit_code == Some(0))
            .map(|o| o.stdout.text.trim().to_owned());
        (path, version)
    });

    let shown_protected = (protected.patterns().to_vec(), protected.default_count());
    let (check, protected_check, denied_check) = if node.is_none() {
        let not_run = json!({"ran": false, "reason": "no Node.js"});
        (not_run.clone(), not_run.clone(), not_run)
    } else {
        options.sandbox = Some(Sandbox::new());
        let check = sandbox_check(scratch, options.clone()).await;
        let denied_check = denied_check(scratch, options.clone()).await;
        options.protected = std::sync::Arc::new(protected);
        (check, protected_check(scratch, options).await, denied_check)
    };
    Report {
        landlock,
        rules,
        check,
        containment,
        process_bound,
        node,
        protected: shown_protected,
        protected_check,
        denied: Vec::new(),
        denied_check,
        network: Value::Null,
        home_tools: confine_nodeexec::HomeTools::discover(&|name| std::env::var_os(name)),
        private_tmp: private_tmp(),
    }
}

/// Make a server's private tmpfs as a sandboxed server's first run would (default bound),
/// and drop it.
fn private_tmp() -> Result<(u64, u64), String> {
    let dirs = confine_nodeexec::PrivateDirs::create(None).map_err(|e| e.to_string())?;
    dirs.make_tmp().map_err(|e| e.to_string())
}

/// The private /tmp and /dev/shm, in words.
fn private_tmp_text(made: &Result<(u64, u64), String>) -> String {
    match made {
        Ok((bytes, inodes)) => format!(
            "a tmpfs of the server's own shown at /tmp and /dev/shm, shared by its runs and \
             jobs, gone with the server; {} MiB and {inodes} entries together \
             (--sandbox-tmp-size)",
            bytes >> 20
        ),
        Err(e) => format!(
            "plain directories of the server's (beneath $XDG_RUNTIME_DIR or the system's \
             temporary directory), bounded only by their file system: no tmpfs of its own \
             could be made ({e})"
        ),
    }
}

/// Run [`DENIED_PROBE`] through a sandboxed `node_process` in a scratch workspace whose
/// `secret.txt` is denied: `""` where denied entries are covered for children.
async fn denied_check(scratch: &Path, mut options: ToolSetOptions) -> Value {
    let workspace = scratch.join("denied");
    if std::fs::create_dir_all(&workspace).is_err()
        || std::fs::write(workspace.join("secret.txt"), DENIED_TEXT).is_err()
    {
        return json!({"ran": false, "reason": "cannot make a scratch workspace"});
    }
    let Ok(list) = confine_tools::DeniedPaths::new(&["secret.txt"]) else {
        return json!({"ran": false, "reason": "the probe's list does not compile"});
    };
    options.denied = std::sync::Arc::new(list);
    let Ok(registry) = confine_tools::create_coding_tools(&workspace, options) else {
        return json!({"ran": false, "reason": "the tools could not be built"});
    };
    let arguments = json!({"source": DENIED_PROBE});
    let call = ToolCall::new("doctor", "node_process", &arguments);
    let Ok(result) = execute_tool_call(&registry, &call, &CancellationToken::new()).await else {
        return json!({"ran": false, "reason": "cancelled"});
    };
    let record = result.record();
    let said = match result.is_error {
        true => record["error"]["message"].clone(),
        false => record["stdout"]
            .as_str()
            .and_then(|s| serde_json::from_str(s.trim()).ok())
            .unwrap_or(Value::Null),
    };
    json!({"ran": true, "covered": said == "", "readDenied": said})
}

/// Run [`PROTECTED_PROBE`] through a sandboxed `node_process` in a scratch repository
/// whose `.git/hooks` exists: `EROFS` where the protected paths are read-only for children.
async fn protected_check(scratch: &Path, options: ToolSetOptions) -> Value {
    let repository = scratch.join("repository");
    if std::fs::create_dir_all(repository.join(".git/hooks")).is_err() {
        return json!({"ran": false, "reason": "cannot make a scratch repository"});
    }
    let covered = options
        .protected
        .is_protected(Path::new(".git/hooks/pre-commit"));
    let Ok(registry) = confine_tools::create_coding_tools(&repository, options) else {
        return json!({"ran": false, "reason": "the tools could not be built"});
    };
    let arguments = json!({"source": PROTECTED_PROBE});
    let call = ToolCall::new("doctor", "node_process", &arguments);
    let Ok(result) = execute_tool_call(&registry, &call, &CancellationToken::new()).await else {
        return json!({"ran": false, "reason": "cancelled"});
    };
    let record = result.record();
    let said = match result.is_error {
        true => record["error"]["message"].clone(),
        false => record["stdout"]
            .as_str()
            .and_then(|s| serde_json::from_str(s.trim()).ok())
            .unwrap_or(Value::Null),
    };
    json!({"ran": true, "hooksProtected": covered, "plantHook": said})
}

/// Run [`SANDBOX_PROBE`] through `node_process` with the sandbox's options.
async fn sandbox_check(scratch: &Path, options: ToolSetOptions) -> Value {
    let Ok(registry) = confine_tools::create_coding_tools(scratch, options) else {
        return json!({"ran": false, "reason": "the tools could not be built"});
    };
    let tag = format!("{}", std::process::id());
    // A file outside the workspace, as a secret elsewhere on the disk would be.
    let Some((outside, file)) = tempfile::tempdir().ok().and_then(|dir| {
        let file = dir.path().join("outside.txt");
        std::fs::write(&file, "x").ok()?;
        Some((dir, file))
    }) else {
        return json!({"ran": false, "reason": "cannot make a scratch file"});
    };
    let arguments = json!({"source": SANDBOX_PROBE, "arguments": [tag, file]});
    let call = ToolCall::new("doctor", "node_process", &arguments);
    let Ok(result) = execute_tool_call(&registry, &call, &CancellationToken::new()).await else {
        return json!({"ran": false, "reason": "cancelled"});
    };
    let record = result.record();
    if result.is_error {
        let token = record["error"]["message"].clone();
        return json!({"ran": false, "reason": token});
    }
    let said: Value = record["stdout"]
        .as_str()
        .and_then(|s| serde_json::from_str(s.trim()).ok())
        .unwrap_or(Value::Null);
    drop(outside);
    // The read-only view (a mount namespace): EROFS outside, metadata changeable inside; the
    // fallback where none can be made: the seccomp rule, EPERM everywhere.
    let view = said["chmod"] == "EROFS" && said["chmodInside"] == "ok";
    let fallback = said["chmod"] == "EPERM" && said["chmodInside"] == "EPERM";
    let passed = said["inside"] == "ok"
        && (said["outside"] == "EACCES" || said["outside"] == "EROFS")
        && said["read"] == "EACCES"
        && (view || fallback);
    let metadata = match (view, fallback) {
        (true, _) => "read-only view (mount namespace): metadata changeable inside, EROFS outside",
        (_, true) => "no mount namespace: seccomp refuses every metadata change, inside too",
        _ => "unexpected",
    };
    json!({
        "ran": true,
        "passed": passed,
        "metadataHere": metadata,
        "chmodInside": said["chmodInside"],
        "writeInside": said["inside"],
        "writeTmp": said["outside"],
        "readOutside": said["read"],
        "chmodOutside": said["chmod"],
    })
}

impl Report {
    fn to_json(&self) -> Value {
        let landlock = match self.landlock {
            LandlockSupport::Available { abi } => json!({"available": true, "abi": abi}),
            LandlockSupport::NotEnabled => {
                json!({"available": false, "abi": null, "reason": "not enabled at boot"})
            }
            _ => json!({"available": false, "abi": null, "reason": "not in this kernel"}),
        };
        let home_tools: Vec<Value> = self
            .home_tools
            .readable
            .iter()
            .map(|(path, why)| json!({"path": path, "why": why}))
            .collect();
        let sandbox = match &self.rules {
            Ok(rules) => json!({
                "usable": true,
                "byDefault": true,
                "homeTools": home_tools,
                "privateTmp": match &self.private_tmp {
                    Ok((bytes, inodes)) => json!({"tmpfs": true, "bytes": bytes, "inodes": inodes}),
                    Err(e) => json!({"tmpfs": false, "error": e}),
                },
                "abi": rules.abi(),
                "read": shown(&rules.readable()),
                "readOwnProc": true,
                "write": shown(&rules.writable()),
                "metadata": metadata_policy(rules),
                "etc": {
                    "whole": rules.etc_readable(),
                    "covered": rules.etc_secrets(),
                    "why": etc_policy(rules),
                },
                "pathnameUnixSockets": rules.pathname_socket_mechanism(),
                "refusesTcp": rules.refuses_tcp(),
                "refusesIpSockets": rules.refuses_ip_sockets(),
                "scoped": rules.scoped(),
                "minAbi": confine_nodeexec::DEFAULT_MIN_ABI,
                "addressSpaceBytes": confine_nodeexec::DEFAULT_ADDRESS_SPACE,
                "openFiles": confine_nodeexec::DEFAULT_OPEN_FILES,
                "check": self.check,
            }),
            Err(kind) => json!({
                "usable": false,
                "error": kind.code(),
                "minAbi": confine_nodeexec::DEFAULT_MIN_ABI,
                "check": self.check,
            }),
        };
        let containment = match self.containment {
            Some((mode, _, _)) => json!(mode.name()),
            None => Value::Null,
        };
        let namespaces = self.containment.map(|(_, pid, user)| (pid, user));
        let node = match &self.node {
            Some((path, version)) => json!({"path": path, "version": version}),
            None => Value::Null,
        };
        json!({
            "landlock": landlock,
            "sandbox": sandbox,
            "containment": containment,
            "pidNamespace": namespaces.map(|(pid, _)| pid),
            "userNamespace": namespaces.map(|(_, user)| user),
            "processBound": self.process_bound.map(ProcessBound::name),
            "node": node,
            "protected": {
                "patterns": self.protected.0,
                "defaults": self.protected.1,
                "check": self.protected_check,
            },
            "denied": {
                "patterns": self.denied,
                "check": self.denied_check,
            },
            "network": self.network,
        })
    }

    fn to_text(&self) -> String {
        let landlock = match self.landlock {
            LandlockSupport::Available { abi } => format!("available, ABI {abi}"),
            LandlockSupport::NotEnabled => "built in but not enabled at boot".to_owned(),
            _ => "not in this kernel".to_owned(),
        };
        let sandbox = match &self.rules {
            Ok(rules) => format!(
                "usable, on by default for node_process, run_command and jobs (--no-sandbox \
                 turns it off): rules of Landlock ABI {}; network only through the proxy (below){}{}; \
                 {} GiB of address space, {} open files, no capabilities\n\
                 sandbox read:  {}, and the program's own /proc/<pid>\n\
                 sandbox write: {}\n\
                 home tools:    {}\n\
                 /tmp, /dev/shm: {}\n\
                 metadata:      {}\n\
                 /etc:          {}\n\
                 unix sockets:  {}",
                rules.abi(),
                if rules.refuses_ip_sockets() {
                    ", no socket but TCP (and UDP on its own loopback): no raw, packet, \
                     netlink or Unix socket (Unix stream pairs only)"
                } else {
                    ""
                },
                if rules.scoped() {
                    ", no signals or abstract-socket connections out of the sandbox"
                } else {
                    ""
                },
                confine_nodeexec::DEFAULT_ADDRESS_SPACE >> 30,
                confine_nodeexec::DEFAULT_OPEN_FILES,
                shown(&rules.readable()).join(", "),
                shown(&rules.writable()).join(", "),
                home_tools_text(&self.home_tools),
                private_tmp_text(&self.private_tmp),
                metadata_policy(rules),
                etc_policy(rules),
                rules.pathname_socket_mechanism().map_or_else(
                    || "pathname sockets reachable (no mechanism)".to_owned(),
                    |m| format!("pathname sockets unreachable ({m})"),
                ),
            ),
            Err(kind) => format!(
                "unusable ({}): a server offering node_process or run_command refuses to \
                 start unless --no-sandbox is given (the sandbox needs Landlock ABI {} or newer)",
                kind.code(),
                confine_nodeexec::DEFAULT_MIN_ABI
            ),
        };
        let sandbox_check_text = if self.check["ran"] == true {
            format!(
                "{}: a write inside: {}; a write to /tmp: {}; a read outside: {}; \
                 a chmod outside: {}; a chmod inside: {} ({})",
                if self.check["passed"] == true {
                    "passed"
                } else {
                    "FAILED"
                },
                self.check["writeInside"],
                self.check["writeTmp"],
                self.check["readOutside"],
                self.check["chmodOutside"],
                self.check["chmodInside"],
                self.check["metadataHere"].as_str().unwrap_or("")
            )
        } else {
            format!("not run ({})", self.check["reason"])
        };
        let containment = match self.containment {
            Some((Containment::Cgroup, true, user_namespace)) => format!(
                "cgroup v2 with a PID namespace{} inside (every process a call starts dies with \
                 the call; pids are the namespace's)",
                if user_namespace {
                    " in a user namespace"
                } else {
                    ""
                }
            ),
            Some((Containment::Cgroup, false, _)) => "cgroup v2 without a PID namespace, none \
                 can be made here (every process a call starts dies with the call; pids are the \
                 host's)"
                .to_owned(),
            Some((Containment::PidNamespace, _, user_namespace)) => format!(
                "PID namespace{} (every process a call starts dies with the call; pids are the \
                 namespace's)",
                if user_namespace {
                    " in a user namespace"
                } else {
                    ""
                }
            ),
            Some((Containment::Subreaper, _, _)) => "subreaper (the waiter adopts and kills \
                 every process a call starts; no privilege needed; pids are the host's)"
                .to_owned(),
            Some((Containment::ProcessGroup, _, _)) => {
                "process group only (a descendant that leaves the group outlives the call)"
                    .to_owned()
            }
            Some((other, _, _)) => other.name().to_owned(),
            None => "unknown (the probe run failed)".to_owned(),
        };
        let max = confine_nodeexec::DEFAULT_MAX_PROCESSES;
        let processes = match self.process_bound {
            Some(ProcessBound::Cgroup) => {
                format!("at most {max} a call (pids.max of its cgroup v2)")
            }
            Some(ProcessBound::CgroupV1) => format!(
                "at most {max} a call (pids.max of a cgroup of its own in the cgroup v1 `pids` \
                 hierarchy)"
            ),
            Some(ProcessBound::Rlimit) => format!("at most {max} a call (RLIMIT_NPROC)"),
            Some(ProcessBound::Unbounded) => "no bound: root ignores RLIMIT_NPROC and no `pids` \
                 cgroup can be had here (the time bound and the kill end a fork bomb)"
                .to_owned(),
            Some(other) => other.name().to_owned(),
            None => "unknown (the probe run failed)".to_owned(),
        };
        let node = match &self.node {
            Some((path, Some(version))) => format!("{} ({version})", path.display()),
            Some((path, None)) => format!("{} (version unknown)", path.display()),
            None => "not found (node_process is unavailable)".to_owned(),
        };
        let (patterns, defaults) = &self.protected;
        let protected = match patterns.is_empty() {
            true => "none (--unprotect-defaults, no --protect)".to_owned(),
            false => patterns
                .iter()
                .enumerate()
                .map(|(i, p)| match i < *defaults {
                    true => format!("{p} (default)"),
                    false => p.clone(),
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let check = &self.protected_check;
        let children = match (check["ran"] == true, check["plantHook"].as_str()) {
            (false, _) => format!("not checked ({})", check["reason"]),
            (true, _) if check["hooksProtected"] != true => {
                "not checked (.git/hooks is not protected)".to_owned()
            }
            (true, Some("EROFS")) => {
                "protected paths read-only for sandboxed children (a mount namespace of \
                 each run's own; a hook planted in a scratch repository: EROFS)"
                    .to_owned()
            }
            (true, Some("NODE_SANDBOX_UNAVAILABLE")) => "no mount namespace can be made here: \
                 a sandboxed call in a workspace holding a protected path fails with \
                 NODE_SANDBOX_UNAVAILABLE (--unprotect-defaults lifts it)"
                .to_owned(),
            (true, other) => format!("FAILED: a hook planted in a scratch repository: {other:?}"),
        };
        let denied = match self.denied.is_empty() {
            true => "none (no --deny)".to_owned(),
            false => self.denied.join(", "),
        };
        let check = &self.denied_check;
        let covered = match (check["ran"] == true, check["readDenied"].as_str()) {
            (false, _) => format!("not checked ({})", check["reason"]),
            (true, Some("")) => "denied entries covered for sandboxed children (a mount \
                 namespace of each run's own; a denied file in a scratch workspace read as \
                 empty)"
                .to_owned(),
            (true, Some("NODE_SANDBOX_UNAVAILABLE")) => "no mount namespace can be made here: \
                 a sandboxed call in a workspace holding a denied entry fails with \
                 NODE_SANDBOX_UNAVAILABLE"
                .to_owned(),
            (true, other) => format!("FAILED: a denied file in a scratch workspace: {other:?}"),
        };
        let network = &self.network;
        let mechanism = match (
            network["mechanism"].as_str(),
            network["unavailable"].as_str(),
        ) {
            (Some(m), _) => format!(
                "{m}: sandboxed (the default) or with --allow-net, children reach the network \
                 only through the server's proxy, to the --allow-net entries"
            ),
            (None, why) => format!(
                "unavailable ({}): sandboxed calls and calls under --allow-net fail with \
                 NETWORK_POLICY_UNAVAILABLE",
                why.unwrap_or("no mechanism")
            ),
        };
        let mut allowed: Vec<String> = Vec::new();
        for entry in network["entries"].as_array().into_iter().flatten() {
            let entry = entry.as_str().unwrap_or_default();
            let hosts = network["presets"].as_array().and_then(|ps| {
                ps.iter()
                    .find(|p| p["preset"] == entry)
                    .map(|p| p["hosts"].clone())
            });
            allowed.push(match hosts {
                Some(Value::Array(hosts)) => format!(
                    "{entry} ({})",
                    hosts
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => entry.to_owned(),
            });
        }
        let allowed = match allowed.is_empty() {
            true => "no host (no --allow-net)".to_owned(),
            false => allowed.join(", "),
        };
        format!(
            "landlock:      {landlock}\n\
             sandbox:       {sandbox}\n\
             sandbox check: {check_text}\n\
             containment:   {containment}\n\
             processes:     {processes}\n\
             node:          {node}\n\
             protected:     {protected}\n\
             read-only:     {children}\n\
             denied:        {denied}\n\
             covered:       {covered}\n\
             network:       {mechanism}\n\
             allowed:       {allowed}\n",
            check_text = sandbox_check_text,
        )
    }
}

/// The network policy as the sandbox or `--allow-net` would make it here: the mechanism (or
/// why none works), the proxy's address as children reach it, the entries, and what each
/// preset resolved to.
fn network_report(
    entries: &[String],
    allow: confine_netpolicy::AllowList,
    strongest: confine_nodeexec::NetworkMechanism,
) -> Value {
    let presets: Vec<Value> = allow
        .presets_resolved()
        .into_iter()
        .map(|(name, hosts)| json!({"preset": name, "hosts": hosts}))
        .collect();
    let policy = confine_tools::NetworkPolicy::start(allow, strongest);
    json!({
        "mechanism": policy.mechanism().map(|m| m.describe()),
        "unavailable": policy.unavailable(),
        "ownLoopback": policy.mechanism().map(|m| m != confine_nodeexec::NetworkMechanism::Landlock),
        "entries": entries,
        "presets": presets,
    })
}

/// The toolchains of the home a sandboxed child may run, each with why, in words.
fn home_tools_text(tools: &confine_nodeexec::HomeTools) -> String {
    if tools.readable.is_empty() {
        return "none found in the home (no PATH directory, rustup, cargo, nvm or pyenv there)"
            .to_owned();
    }
    let opened: Vec<String> = tools
        .readable
        .iter()
        .map(|(path, why)| format!("{} ({why})", path.display()))
        .collect();
    format!(
        "read-only at their real paths: {}; credentials beside them stay unreadable",
        opened.join(", ")
    )
}

/// The metadata policy, in words.
fn metadata_policy(rules: &SandboxRules) -> &'static str {
    if rules.read_only_outside() {
        "changeable in the workspace and the private /tmp, /dev/shm and HOME; read-only \
         (EROFS) everywhere else, in a mount namespace of the run's; set-ID bits and other \
         owners refused everywhere (seccomp); where no mount namespace can be made, every \
         change refused, the workspace's included (seccomp)"
    } else if rules.refuses_metadata_changes() {
        "mode, owner, times and extended attributes unchangeable, the workspace's included \
         (seccomp)"
    } else {
        "changeable on any file the user owns"
    }
}

/// What of `/etc` a sandboxed run reads, and why.
fn etc_policy(rules: &SandboxRules) -> String {
    if rules.etc_readable() {
        let covered: Vec<String> = rules
            .etc_secrets()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!(
            "all readable (programs read many small files there), but its secrets, covered \
             in the run's mount namespace (by name, and whatever the system keeps from other \
             users): {}; where no mount namespace can be made, only the files listed above",
            covered.join(", ")
        )
    } else {
        "only the files listed above (no mount namespace to cover its secrets in)".to_owned()
    }
}

/// A rule list as shown: the first rule is the workspace (here the scratch directory), named
/// as such.
fn shown(paths: &[&Path]) -> Vec<String> {
    let rest = paths.iter().skip(1).map(|p| p.display().to_string());
    std::iter::once("<workspace>".to_owned())
        .chain(rest)
        .collect()
}
