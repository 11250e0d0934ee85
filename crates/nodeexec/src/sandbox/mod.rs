//! The opt-in kernel sandbox: Landlock rules and a seccomp filter, prepared in the parent and
//! enforced after `fork`.
//!
//! [`Sandbox`] is the policy (which Landlock ABI is required, what may be read and written
//! besides the defaults, the resource limits, whether capabilities are dropped, which seccomp
//! rules apply). [`Sandbox::build`] turns it, with the write root, into [`SandboxRules`]: the
//! paths are opened and checked **in the parent** (opening paths and allocating are not
//! async-signal-safe), and [`Command::sandbox`] adds a pre-exec step that makes only raw
//! system calls in the process that becomes the program, in this order:
//!
//! 0. a mount namespace of the program's own (`mounts.rs`): everything read-only but the
//!    writable places (see *Metadata* below), the private `/tmp` and `/dev/shm` bound over the
//!    host's, the read-only paths beneath the write root ([`Sandbox::read_only`]) bound
//!    read-only and the hidden ones covered;
//! 1. `prctl(PR_SET_NO_NEW_PRIVS)`: no set-user-id, set-group-id or file-capability gain by
//!    any later `exec` (and what Landlock and seccomp require of an unprivileged caller);
//! 2. the capabilities dropped (`privilege.rs`, the same code that drops them for every run
//!    that does not opt out): the bounding set (where we may), then
//!    effective, permitted and inheritable to nothing. With no-new-privs an `exec` cannot
//!    give them back, so even a root embedder's child runs without `CAP_DAC_OVERRIDE`,
//!    `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`, `CAP_CHOWN`, `CAP_SYS_ADMIN`, `CAP_NET_RAW`, …;
//! 3. the Landlock ruleset made and enforced (`ruleset.rs`: made in the child so that it can
//!    name the program's own `/proc/<pid>`, or the run's own `/proc`);
//! 4. `setrlimit` of the address space, open files and (optionally) data segment, soft and
//!    hard limit alike, so the program cannot raise them again (`limits.rs`, shared with the
//!    run's own bounds);
//! 5. the seccomp filter (`seccomp.rs`).
//!
//! # What the program may do
//!
//! Landlock handles every file-system right of the ABI in use (denied unless a rule allows
//! it) and TCP bind and connect (no rule: always refused). The rules:
//!
//! * **read** (read files, list directories, execute): the write root; the system trees
//!   `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32`; the installation of the
//!   program's interpreter where the embedder names it ([`Sandbox::allow_installation`]:
//!   `node_process` names Node.js's, wherever it lives); the non-secret parts of `/etc`
//!   listed and explained in `paths.rs` (the loader cache, `passwd` and `group` but not
//!   `shadow`, name resolution, the time zone, OpenSSL's configuration and the public CA
//!   certificates but not `/etc/ssl/private`, …), and, where the run gets its read-only view,
//!   all of `/etc` with its secrets covered (see *`/etc`* below); `/dev/null`, `/dev/tty` (the
//!   program's own controlling terminal: a terminal job's pty, else none), `/dev/zero`, `/dev/random`,
//!   `/dev/urandom`; `/proc/meminfo`, `/proc/stat`, `/proc/cpuinfo`; the program's own
//!   `/proc/<pid>` (see below); and what [`Sandbox::allow_read`] adds. Nothing else: not the
//!   home directory, not `/root`, not `/tmp`, not `/etc/shadow`, not another project.
//! * **write** (create, write, truncate, rename, remove, link, make directories, pipes and
//!   sockets): beneath the write root and what [`Sandbox::allow_write`] adds, with every
//!   right but creating character and block devices; `/dev/null` may be written and
//!   truncated.
//! * **`/proc`**: where the run is in a PID namespace other than the embedder's (the
//!   containment makes one wherever the kernel lets it) and has a mount namespace of its
//!   own, a fresh `/proc` of that namespace is mounted over the host's before Landlock
//!   (`mounts.rs`), and all of it is readable: it holds the run's processes and nothing of
//!   the host's, so `ps` lists them. Elsewhere (or where the kernel refuses that mount, as
//!   it does over a partly masked `/proc`) the program's own `/proc/<pid>` is readable (the
//!   C library reads `/proc/self/maps`, Node.js `/proc/self/cgroup`), and a process it starts
//!   is a new `/proc/<pid>` that no rule names: descendants run without their own `/proc`
//!   entries (Node.js and the usual tools start and run without them; `ps` does not). Other
//!   processes' entries are absent or unreadable (their command lines may hold secrets);
//!   their `environ`, `maps` and `mem` would be refused anyway by Landlock's ptrace
//!   restriction.
//! * From ABI 6, signals to processes outside the sandbox and connections to abstract Unix
//!   sockets made outside it are refused (Landlock scopes).
//!
//! The seccomp filter ([`Sandbox::socket_filter`], [`Sandbox::metadata_filter`], both on by
//! default) refuses `socket(2)` for every family (no UDP, no other family, and no Unix
//! socket that could reach a pathname socket outside the workspace: Landlock has no right
//! for connecting to one at ABI 7), `socketpair(2)` but `AF_UNIX`/`SOCK_STREAM`, every
//! set-ID modes and other owners (and, where no mount namespace could be made, every system
//! call that changes a file's mode, owner, times or extended attributes, everywhere),
//! `io_uring_setup`, and system calls of another ABI. Always, whatever those two say, it
//! refuses every namespace: `unshare` and `clone` with a namespace flag and `setns`
//! (`EPERM`), and `clone3` (`ENOSYS`, so the C library falls back to `clone`). The program
//! has no capability, so only a user namespace was left to it, and inside one it would hold
//! every capability again: mounts of its own (a cgroup file system whose bounds it could
//! lift), and the kernel's code that only `CAP_SYS_ADMIN` reaches elsewhere. Threads and
//! forks carry no namespace flag and work as before; programs that make namespaces
//! (`unshare`, `bwrap`, rootless containers, Chromium's own sandbox) fail.
//!
//! # Metadata: inside the writable places, never outside
//!
//! Landlock does not govern `chmod`, `chown`, `utimes` or extended attributes, and the owner
//! of a file needs no capability for them: a root program could make every system file
//! world-writable. So, by default ([`Sandbox::read_only_outside`]), each sandboxed run gets
//! a mount namespace of its own (`mounts.rs`) in which every mount is made read-only
//! (`mount_setattr(AT_RECURSIVE, MOUNT_ATTR_RDONLY)` on `/`) after the write root, the
//! [`Sandbox::allow_write`] paths and the covers ([`Sandbox::cover`]: the server's private
//! `/tmp` and `/dev/shm`, [`PrivateDirs`]) were bound onto themselves; those alone are made
//! writable again, each checked against the identity the parent opened. Outside them every
//! change of mode, times, owner or extended attributes, and every write, is `EROFS`, as
//! root too; inside them `chmod +x`, `touch -d`, `tar x`, `cp -a`, a linker's `chmod`,
//! `python3 -m venv` and git's lock files work. The seccomp filter keeps refusing what the
//! mounts cannot tell apart: set-user-ID and set-group-ID modes (by `chmod` and at
//! creation), an owner other than the program's own uid, `openat2` (`ENOSYS`) and the
//! inode-flag ioctls. Writes outside also meet `EROFS` before Landlock's `EACCES`; reads are
//! Landlock's alone.
//!
//! Where no mount namespace can be made (a container whose seccomp profile refuses
//! namespaces, `CAP_SYS_ADMIN` dropped and user namespaces disabled), the run goes on
//! without the view and the child loads the older filter instead: every metadata change
//! refused with `EPERM`, the workspace included (one filter is chosen in the child, both
//! prepared in the parent), and no private `/tmp` or `/dev/shm` (they stay unwritable). A
//! run with read-only or hidden paths still fails there ([`ErrorKind::SandboxUnavailable`]).
//! `confine doctor` says which held. The cost is a namespace per run (its teardown waits for
//! an RCU grace period; see `docs/PERFORMANCE.md`).
//!
//! # `/etc`
//!
//! Where the run gets the read-only view, all of `/etc` is readable (a rule the child adds
//! only when the view was made) and the view covers its secrets, found by a bounded walk
//! when the sandbox is built (`paths::etc_secrets`; its answer is kept between builds while
//! an inotify watch on every directory it listed reports no change, `paths::EtcSecrets`):
//! those named in `paths::ETC_SECRETS`
//! and the SSH host keys, and every file others may not read and directory others may not
//! list or enter. A file is covered by `/dev/null` (reads as empty), a directory by an empty
//! read-only tmpfs of mode 0, after everything was made read-only. Without the view, or past
//! the walk's bounds, `/etc` is the allow-list of `paths::ETC` alone
//! ([`SandboxRules::etc_readable`] says which; [`SandboxRules::etc_secrets`] lists the
//! covers).
//!
//! # Which ABI
//!
//! The kernel must offer at least [`Sandbox::min_abi`] ([`DEFAULT_MIN_ABI`], 4: file system
//! and TCP); otherwise [`Sandbox::build`] fails with [`ErrorKind::SandboxUnavailable`] and
//! nothing is started. Above that, the rules use the rights of the newest ABI both the kernel
//! and this crate have been tested with ([`MAX_TESTED_ABI`], 7), every one handled: a
//! ruleset is never silently weaker than [`SandboxRules::abi`] says. The parent builds a
//! throw-away ruleset from the same rules before anything starts, so a kernel that refuses
//! one is found there; a step that still fails in the child fails the start.

mod mounts;
mod paths;
mod private;
mod ruleset;
pub(crate) mod seccomp;
mod tmpfs;
mod toolchains;

pub(crate) use mounts::UNAVAILABLE_ERRNO;
pub use private::{GIT_IDENTITY, PrivateDirs};
pub(crate) use ruleset::restrict_tcp_to;
pub use tmpfs::{DEFAULT_INODES as DEFAULT_TMP_INODES, default_bytes as default_tmp_bytes};
pub use toolchains::{HomeTools, SECRET_PLACES};

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{ABI, Access, AccessFs, AccessNet, BitFlags, Scope};

use crate::command::Command;
use crate::error::{Error, ErrorKind};
use crate::limits::{self, Resource};
use ruleset::{PathRule, RulesetAttr};

/// The Landlock ABI a sandbox requires unless told otherwise: 4 (Linux 6.7), the first with
/// network rules, so that "no TCP" is always part of the sandbox.
pub const DEFAULT_MIN_ABI: u32 = 4;

/// The newest Landlock ABI whose rights the sandbox uses (tested on Linux 6.18, ABI 7). A
/// newer kernel is used at this ABI.
pub const MAX_TESTED_ABI: u32 = 7;

/// The default address-space limit of a sandboxed program: 4 GiB. Node.js starts and runs
/// ordinary scripts under it (its JavaScript heap limit is lower); a `WebAssembly.Memory`
/// cannot be made under it, V8 reserving about 10 GiB of address space for each.
pub const DEFAULT_ADDRESS_SPACE: u64 = 4 << 30;

/// The default open-file limit of a sandboxed program: 1024 descriptors.
pub const DEFAULT_OPEN_FILES: u64 = 1024;

/// The policy of the opt-in kernel sandbox (Linux Landlock, seccomp and resource limits);
/// see the crate docs, section *Sandbox*. Build it, then [`build`](Sandbox::build) it with
/// the write root and give the result to [`Command::sandbox`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    min_abi: u32,
    readable: Vec<PathBuf>,
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    address_space: Option<u64>,
    open_files: Option<u64>,
    data: Option<u64>,
    drop_capabilities: bool,
    socket_filter: bool,
    metadata_filter: bool,
    read_only_outside: bool,
    covers: Vec<(PathBuf, PathBuf)>,
    private: Option<Arc<PrivateDirs>>,
    network: Option<crate::Network>,
    /// The walk of `/etc` kept between builds (shared by clones).
    etc: Arc<paths::EtcSecrets>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    /// The default policy: Landlock ABI 4 or newer required, reads confined to the write root
    /// and the system's defaults, writes to the write root and `/dev/null`, 4 GiB of address
    /// space, 1024 open files, no data-segment limit, capabilities dropped, no socket (but a
    /// Unix stream pair) and no metadata change.
    pub fn new() -> Self {
        Self {
            min_abi: DEFAULT_MIN_ABI,
            readable: Vec::new(),
            writable: Vec::new(),
            read_only: Vec::new(),
            hidden: Vec::new(),
            address_space: Some(DEFAULT_ADDRESS_SPACE),
            open_files: Some(DEFAULT_OPEN_FILES),
            data: None,
            drop_capabilities: true,
            socket_filter: true,
            metadata_filter: true,
            read_only_outside: true,
            covers: Vec::new(),
            private: None,
            network: None,
            etc: Arc::default(),
        }
    }

    /// Require at least this Landlock ABI (default [`DEFAULT_MIN_ABI`]); a kernel with less
    /// makes [`Sandbox::build`] fail with [`ErrorKind::SandboxUnavailable`]. 6 insists on
    /// the signal and abstract-socket scopes. Values below 4 are raised to 4: a sandbox
    /// without network rules is not offered.
    pub fn min_abi(&mut self, abi: u32) -> &mut Self {
        self.min_abi = abi.max(DEFAULT_MIN_ABI);
        self
    }

    /// Also allow reading (and executing) beneath `path` (a directory) or `path` (a file).
    /// It must exist when the sandbox is built; a symbolic link is followed then.
    pub fn allow_read(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.readable.push(path.as_ref().to_owned());
        self
    }

    /// Also allow reading the installation `executable` belongs to: the directory above its
    /// `bin/` (`/opt/node-v22/bin/node` gives `/opt/node-v22`), else its own directory. Give
    /// it the canonical path (`node_process` does, for Node.js).
    pub fn allow_installation(&mut self, executable: impl AsRef<Path>) -> &mut Self {
        if let Some(prefix) = paths::installation(executable.as_ref())
            && !self.readable.iter().any(|p| p == prefix)
        {
            self.readable.push(prefix.to_owned());
        }
        self
    }

    /// Also allow writing beneath `path` (a directory) or to `path` (a file), with the rights
    /// the write root has (reading included). It must exist when the sandbox is built.
    pub fn allow_write(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.writable.push(path.as_ref().to_owned());
        self
    }

    /// Keep `path`, an existing file or directory beneath the write root (absolute, as the
    /// write root's path names it), read-only for the program: bound read-only onto itself in
    /// a mount namespace of the program's own, the directories between the write root and it
    /// bound onto themselves so they cannot be renamed or removed (`mounts.rs`). Where no
    /// mount namespace can be made, a start fails with [`ErrorKind::SandboxUnavailable`] and
    /// nothing runs. Only for paths that exist at [`build`](Sandbox::build): a path created
    /// later by the program is not covered.
    pub fn read_only(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.read_only.push(path.as_ref().to_owned());
        self
    }

    /// Keep `path`, an existing entry beneath the write root (absolute, as the write root's
    /// path names it), unreadable for the program: covered in a mount namespace of the
    /// program's own, a directory by an empty read-only tmpfs of mode 0 and anything else but
    /// a symbolic link by `/dev/null` (`mounts.rs`); the covered path can be neither renamed
    /// nor removed (`EBUSY`). A symbolic link is refused at [`build`](Sandbox::build) (the
    /// mount would land on its target: name the target). Where no mount namespace can be
    /// made, a start fails with [`ErrorKind::SandboxUnavailable`] and nothing runs. Only for
    /// paths that exist at [`build`](Sandbox::build).
    pub fn hide(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.hidden.push(path.as_ref().to_owned());
        self
    }

    /// The address-space limit (`RLIMIT_AS`) in bytes; `None` leaves the embedder's.
    pub fn address_space(&mut self, bytes: Option<u64>) -> &mut Self {
        self.address_space = bytes;
        self
    }

    /// The open-file limit (`RLIMIT_NOFILE`); `None` leaves the embedder's.
    pub fn open_files(&mut self, count: Option<u64>) -> &mut Self {
        self.open_files = count;
        self
    }

    /// The data-segment limit (`RLIMIT_DATA`: private writable memory, which V8's reservations
    /// do not count against until used) in bytes; `None` (the default) leaves the embedder's.
    /// With `address_space(None)` this bounds memory while letting WebAssembly reserve.
    pub fn data_size(&mut self, bytes: Option<u64>) -> &mut Self {
        self.data = bytes;
        self
    }

    /// Whether to drop every capability before `exec` (default `true`).
    pub fn drop_capabilities(&mut self, drop: bool) -> &mut Self {
        self.drop_capabilities = drop;
        self
    }

    /// Whether the seccomp filter refuses sockets (default `true`): `socket(2)` of every
    /// family, Unix included, and `socketpair(2)` but a connected Unix stream or sequenced-packet pair. Without it the
    /// network rules are Landlock's alone: TCP bind and connect refused, UDP and Unix
    /// sockets (pathname ones outside the workspace included) allowed.
    pub fn socket_filter(&mut self, filter: bool) -> &mut Self {
        self.socket_filter = filter;
        self
    }

    /// Whether the seccomp filter's metadata rule is on (default `true`): with the read-only
    /// view ([`Sandbox::read_only_outside`]) it refuses set-user-ID and set-group-ID modes
    /// and other owners; where no mount namespace can be made, every change of mode, owner,
    /// times and extended attributes, the workspace included (see the module docs). Without
    /// it, and without the view, the program can change them on any file its user owns,
    /// wherever it is.
    pub fn metadata_filter(&mut self, filter: bool) -> &mut Self {
        self.metadata_filter = filter;
        self
    }

    /// Whether the program runs in a mount namespace of its own in which every mount but the
    /// write root, the [`allow_write`](Sandbox::allow_write) paths and the covers is
    /// read-only (default `true`): changes of mode, times and owner are then `EROFS` outside
    /// those places, as root too, and allowed inside them. Where no mount namespace can be
    /// made (a container that refuses namespaces) the program runs without the view, under
    /// the metadata rule that refuses those changes everywhere; `false` asks for that
    /// everywhere.
    pub fn read_only_outside(&mut self, view: bool) -> &mut Self {
        self.read_only_outside = view;
        self
    }

    /// Give the program the server's private directories ([`PrivateDirs`]): its bounded
    /// tmpfs (or, where none can be made, its `tmp` and `shm` directories) shown at `/tmp`
    /// and `/dev/shm` like a [`Sandbox::cover`], its home writable. The
    /// embedder sets `HOME` to [`PrivateDirs::home`] in the program's environment. The
    /// directories live as long as any sandbox holding them.
    pub fn private_dirs(&mut self, dirs: Arc<PrivateDirs>) -> &mut Self {
        self.allow_write(dirs.home());
        // The toolchains of the home, read-only at their real paths (`toolchains.rs`).
        for (tree, _) in &dirs.tools().readable {
            self.allow_read(tree);
        }
        self.private = Some(dirs);
        self
    }

    /// The private directories given with [`Sandbox::private_dirs`].
    pub fn private(&self) -> Option<&Arc<PrivateDirs>> {
        self.private.as_ref()
    }

    /// Show `source` (an existing directory, which the program may write like an
    /// [`allow_write`](Sandbox::allow_write) path) at `target` (an existing directory
    /// outside the write root: `/tmp`, `/dev/shm`) in the program's mount namespace. The
    /// workspace and the readable paths that lie beneath `target` are bound again at their
    /// own paths inside it (their mount points are made in `source` at
    /// [`build`](Sandbox::build)). Only with the read-only view, where a mount namespace can
    /// be made; elsewhere `target` stays as the other rules leave it (unwritable, unless
    /// allowed).
    pub fn cover(&mut self, target: impl AsRef<Path>, source: impl AsRef<Path>) -> &mut Self {
        self.covers
            .push((source.as_ref().to_owned(), target.as_ref().to_owned()));
        self
    }

    /// Run under the network policy with `network` as the program's only network (see
    /// [`Network`](crate::Network)): the sandbox then handles no Landlock network right of its
    /// own (the network's mechanism decides: a namespace, or Landlock TCP rules allowing the
    /// proxy's port alone), its socket rule lets TCP (and, in a namespace, UDP) sockets be
    /// made instead of none, and [`Command::sandbox`] adds [`Command::network`] too.
    pub fn network(&mut self, network: &crate::Network) -> &mut Self {
        self.network = Some(network.clone());
        self
    }

    /// Prepare the rules now, in the calling process, with `write_root` (a directory
    /// descriptor) as the tree the program may write. Fails with
    /// [`ErrorKind::SandboxUnavailable`] when the kernel cannot enforce the policy in full,
    /// and with [`ErrorKind::StartFailed`] when the rules cannot be made (an `allow_read` or
    /// `allow_write` path missing, a descriptor that is not a directory).
    pub fn build(&self, write_root: impl AsFd) -> Result<SandboxRules, Error> {
        let unavailable = |e: Option<io::Error>| Error::new(ErrorKind::SandboxUnavailable, e);
        let failed = |e: io::Error| Error::new(ErrorKind::StartFailed, Some(e));
        let kernel = match LandlockSupport::probe() {
            LandlockSupport::Available { abi } if abi >= self.min_abi => abi,
            _ => return Err(unavailable(None)),
        };
        if !seccomp::SUPPORTED {
            // No filter for this architecture (its namespace rule is always part of the
            // policy): the policy cannot be enforced in full.
            return Err(unavailable(None));
        }
        // The private home's files, at the first run that needs them.
        if let Some(private) = &self.private {
            private.furnish().map_err(failed)?;
        }
        let abi = kernel.min(MAX_TESTED_ABI).max(self.min_abi);
        let target = ABI::from(abi as i32);
        let attr = RulesetAttr {
            handled_access_fs: AccessFs::from_all(target).bits(),
            // Under the network policy its mechanism handles the network.
            handled_access_net: match self.network {
                None => AccessNet::from_all(target).bits(),
                Some(_) => 0,
            },
            scoped: Scope::from_all(target).bits(),
        };
        let sockets = match (&self.network, self.socket_filter) {
            (_, false) => seccomp::Sockets::Any,
            (None, true) => seccomp::Sockets::Refused,
            (Some(network), true) => seccomp::Sockets::Inet {
                datagram: network.own_loopback(),
            },
        };
        // All of `/etc` with its secrets covered, where the view can cover them; past the
        // bounds of the walk, the allow-list alone.
        let etc_secrets = match self.read_only_outside {
            true => self.etc.get(Path::new(paths::ETC_TREE)),
            false => None,
        };
        let covers = self.resolve_covers().map_err(failed)?;
        let rules = self
            .rules(target, write_root.as_fd(), etc_secrets.is_some(), &covers)
            .map_err(failed)?;
        let shown_covers: Vec<(PathBuf, Option<PathBuf>)> = covers
            .iter()
            .map(|c| match &c.source {
                mounts::CoverSource::Dir(path) => (c.target.clone(), Some(path.clone())),
                mounts::CoverSource::Tmpfs(_) => (c.target.clone(), None),
            })
            .collect();
        let mut mounts = match self.read_only.is_empty() && self.hidden.is_empty() {
            true => mounts::Mounts::default(),
            // The write root's path, as its rule names it (read from its descriptor).
            false => mounts::Mounts::prepare(&rules[0].path, &self.read_only, &self.hidden)
                .map_err(failed)?,
        };
        if self.read_only_outside {
            let is_cover = |r: &PathRule| covers.iter().any(|c| c.identity == r.identity);
            let writable: Vec<(PathBuf, (u64, u64))> = rules
                .iter()
                .filter(|r| r.write && !r.path.starts_with("/dev") && !is_cover(r))
                .map(|r| (r.path.clone(), r.identity))
                .collect();
            let readable: Vec<PathBuf> = rules
                .iter()
                .filter(|r| !r.write && !r.path.starts_with("/proc") && !r.path.starts_with("/dev"))
                .map(|r| r.path.clone())
                .collect();
            mounts
                .isolate(&writable, &readable, covers)
                .map_err(failed)?;
            if rules.iter().any(|r| r.view_only) {
                mounts
                    .cover_secrets(etc_secrets.unwrap_or_default())
                    .map_err(failed)?;
            }
        }
        let own_proc = (AccessFs::ReadFile | AccessFs::ReadDir).bits();
        let metadata = match (self.metadata_filter, self.read_only_outside) {
            (false, _) => seccomp::Metadata::Allowed,
            (true, false) => seccomp::Metadata::Refused,
            (true, true) => seccomp::Metadata::SetId {
                uid: rustix::process::geteuid().as_raw(),
            },
        };
        let fallback = match self.metadata_filter {
            false => seccomp::Metadata::Allowed,
            true => seccomp::Metadata::Refused,
        };
        ruleset::check(&attr, &rules, own_proc).map_err(|e| match e {
            ruleset::CheckError::Create(e) => unavailable(Some(e)),
            ruleset::CheckError::Rule(e) => failed(e),
        })?;
        let limit = |resource: Resource, value: Option<u64>| value.map(|v| (resource, v));
        Ok(SandboxRules(Arc::new(Prepared {
            attr,
            rules,
            mounts,
            own_proc,
            abi,
            limits: [
                limit(Resource::As, self.address_space),
                limit(Resource::Nofile, self.open_files),
                limit(Resource::Data, self.data),
            ],
            drop_capabilities: self.drop_capabilities,
            socket_filter: self.socket_filter,
            metadata_filter: self.metadata_filter,
            read_only_outside: self.read_only_outside,
            covers: shown_covers,
            _private: self.private.clone(),
            // Always: the namespace rule is not optional.
            program: Some(seccomp::Program::new(sockets, metadata)),
            fallback: seccomp::Program::new(sockets, fallback),
            network: self.network.clone(),
        })))
    }

    /// The covers as this build shows them: the embedder's directories, then the private
    /// `/tmp` and `/dev/shm` (the server's tmpfs where it could be made, else its
    /// directories), each with its source's identity.
    fn resolve_covers(&self) -> io::Result<Vec<mounts::Cover>> {
        let dir = |source: &Path, target: &Path| -> io::Result<mounts::Cover> {
            let stat = rustix::fs::stat(source)?;
            Ok(mounts::Cover {
                source: mounts::CoverSource::Dir(source.to_owned()),
                identity: (stat.st_dev, stat.st_ino),
                target: target.to_owned(),
            })
        };
        let mut covers = Vec::new();
        for (source, target) in &self.covers {
            covers.push(dir(source, target)?);
        }
        // Shown only by the view's mount namespace.
        if let Some(private) = self.private.as_ref().filter(|_| self.read_only_outside) {
            for (name, source, target) in [
                (tmpfs::TMP, private.tmp(), "/tmp"),
                (tmpfs::SHM, private.shm(), "/dev/shm"),
            ] {
                covers.push(match private.tmpfs() {
                    Some(fs) => {
                        let fd = fs.open(name)?;
                        let stat = rustix::fs::fstat(&fd)?;
                        mounts::Cover {
                            source: mounts::CoverSource::Tmpfs(fd),
                            identity: (stat.st_dev, stat.st_ino),
                            target: PathBuf::from(target),
                        }
                    }
                    None => dir(&source, Path::new(target))?,
                });
            }
        }
        Ok(covers)
    }

    /// Every rule of the policy, paths opened. Default paths that do not exist are skipped;
    /// the embedder's must exist.
    /// With `etc_whole`, all of `/etc` too, as a rule that holds only with the read-only view.
    fn rules(
        &self,
        abi: ABI,
        root: std::os::fd::BorrowedFd<'_>,
        etc_whole: bool,
        covers: &[mounts::Cover],
    ) -> io::Result<Vec<PathRule>> {
        let tree = tree_rights(abi).bits();
        let file = (tree_rights(abi) & AccessFs::from_file(abi)).bits();
        let read_tree = AccessFs::from_read(abi).bits();
        let read_file = (AccessFs::from_read(abi) & AccessFs::from_file(abi)).bits();
        let data_tree = (AccessFs::ReadFile | AccessFs::ReadDir).bits();
        let data_file = BitFlags::from(AccessFs::ReadFile).bits();
        let dev_null = (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate).bits();

        let mut rules = Vec::new();
        // The write root, by descriptor: whatever its path names now.
        let fd = rustix::io::fcntl_dupfd_cloexec(root, 10)?;
        let stat = rustix::fs::fstat(&fd)?;
        if !rustix::fs::FileType::from_raw_mode(stat.st_mode).is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let path =
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default();
        rules.push(PathRule {
            fd,
            identity: (stat.st_dev, stat.st_ino),
            access: tree,
            path,
            write: true,
            view_only: false,
        });

        // (path, required, (rights of a directory, rights of a file), writable)
        let mut wanted: Vec<(&Path, bool, (u64, u64), bool)> = Vec::new();
        let optional = |p: &'static str, rights| (Path::new(p), false, rights, false);
        wanted.extend(
            paths::SYSTEM_TREES
                .iter()
                .map(|p| optional(p, (read_tree, read_file))),
        );
        wanted.extend(
            paths::ETC
                .iter()
                .map(|p| optional(p, (data_tree, data_file))),
        );
        wanted.extend(
            paths::DEVICES
                .iter()
                .map(|p| optional(p, (data_file, data_file))),
        );
        wanted.push((
            Path::new(paths::DEV_NULL),
            false,
            (dev_null, dev_null),
            true,
        ));
        wanted.push((Path::new(paths::DEV_TTY), false, (dev_null, dev_null), true));
        wanted.extend(
            paths::PROC_FILES
                .iter()
                .map(|p| optional(p, (data_file, data_file))),
        );
        wanted.extend(
            self.readable
                .iter()
                .map(|p| (p.as_path(), true, (read_tree, read_file), false)),
        );
        wanted.extend(
            self.writable
                .iter()
                .map(|p| (p.as_path(), true, (tree, file), true)),
        );
        for cover in covers {
            match &cover.source {
                mounts::CoverSource::Dir(source) => {
                    wanted.push((source.as_path(), true, (tree, file), true));
                }
                // Named by the target it is shown at.
                mounts::CoverSource::Tmpfs(fd) => rules.push(PathRule {
                    fd: rustix::io::fcntl_dupfd_cloexec(fd, 10)?,
                    identity: cover.identity,
                    access: tree,
                    path: cover.target.clone(),
                    write: true,
                    view_only: false,
                }),
            }
        }

        for (path, required, (dir_rights, file_rights), write) in wanted {
            let (fd, dir, identity) = match PathRule::open(path) {
                Ok(opened) => opened,
                Err(e) if !required && e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let access = if dir { dir_rights } else { file_rights };
            // Named twice with the same rights (Node.js's installation is `/usr`): one rule.
            if rules.iter().any(|r| r.path == path && r.access == access) {
                continue;
            }
            rules.push(PathRule {
                fd,
                identity,
                access,
                path: path.to_owned(),
                write,
                view_only: false,
            });
        }
        if etc_whole && let Ok((fd, true, identity)) = PathRule::open(Path::new(paths::ETC_TREE)) {
            rules.push(PathRule {
                fd,
                identity,
                access: data_tree,
                path: PathBuf::from(paths::ETC_TREE),
                write: false,
                view_only: true,
            });
        }
        Ok(rules)
    }
}

/// What the write root (and the `allow_write` directories) may do: everything the ABI names
/// except creating character and block devices (a device node in the workspace would reach
/// the device itself, whatever the rules of its real path).
fn tree_rights(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// What a built sandbox holds: the opened paths, the ruleset's attributes, the limits and the
/// seccomp program.
#[derive(Debug)]
struct Prepared {
    attr: RulesetAttr,
    rules: Vec<PathRule>,
    mounts: mounts::Mounts,
    own_proc: u64,
    abi: u32,
    limits: [Option<(Resource, u64)>; 3],
    drop_capabilities: bool,
    socket_filter: bool,
    metadata_filter: bool,
    read_only_outside: bool,
    /// (target, source): the source `None` for the private tmpfs.
    covers: Vec<(PathBuf, Option<PathBuf>)>,
    /// Held while the rules are (its directories are the covers' sources where no tmpfs
    /// could be made).
    _private: Option<Arc<PrivateDirs>>,
    program: Option<seccomp::Program>,
    /// The program where the read-only view could not be made (the metadata rule
    /// everywhere).
    fallback: seccomp::Program,
    network: Option<crate::Network>,
}

/// A built sandbox (shared by clones), to be applied to any number of [`Command`]s with
/// [`Command::sandbox`]; each program gets a Landlock domain of its own.
#[derive(Clone, Debug)]
pub struct SandboxRules(Arc<Prepared>);

impl SandboxRules {
    /// The Landlock ABI whose rights these rules handle and enforce.
    pub fn abi(&self) -> u32 {
        self.0.abi
    }

    /// Whether TCP bind and connect are refused (always without the network policy: ABI 4
    /// is the minimum; under it the [`Network`](crate::Network)'s mechanism decides).
    pub fn refuses_tcp(&self) -> bool {
        self.0.abi >= 4 && self.0.network.is_none()
    }

    /// The network these rules run the program under ([`Sandbox::network`]).
    pub fn network(&self) -> Option<&crate::Network> {
        self.0.network.as_ref()
    }

    /// Whether signals to processes outside the sandbox, and connections to abstract Unix
    /// sockets made outside it, are refused (ABI 6 and above).
    pub fn scoped(&self) -> bool {
        self.0.abi >= 6
    }

    /// Whether sockets other than Unix-domain ones are refused (the seccomp filter): no UDP,
    /// no other address family.
    pub fn refuses_ip_sockets(&self) -> bool {
        self.0.socket_filter
    }

    /// Whether pathname Unix sockets outside the workspace are unreachable, and by what: the
    /// seccomp filter refuses `socket(AF_UNIX, …)` (at Landlock ABI 7 no Landlock right
    /// covers connecting to one). `None` when they are reachable.
    pub fn pathname_socket_mechanism(&self) -> Option<&'static str> {
        self.0
            .socket_filter
            .then_some("seccomp: socket(2) refused for every family, AF_UNIX included")
    }

    /// Whether changes of mode, owner, times and extended attributes are refused outside the
    /// writable places: by the read-only view where a mount namespace can be made, else by
    /// the seccomp rule, everywhere.
    pub fn refuses_metadata_changes(&self) -> bool {
        self.0.metadata_filter || self.0.read_only_outside
    }

    /// Whether the program gets the read-only view where a mount namespace can be made
    /// ([`Sandbox::read_only_outside`]): metadata changes allowed in the writable places and
    /// refused outside them by the kernel (`EROFS`).
    pub fn read_only_outside(&self) -> bool {
        self.0.read_only_outside
    }

    /// The covers ([`Sandbox::cover`], and the private `/tmp` and `/dev/shm` of
    /// [`Sandbox::private_dirs`]): (target, source directory), the source `None` where it is
    /// the server's bounded tmpfs ([`PrivateDirs::tmp_bound`]).
    pub fn covers(&self) -> Vec<(&Path, Option<&Path>)> {
        let covers = self.0.covers.iter();
        covers.map(|(t, s)| (t.as_path(), s.as_deref())).collect()
    }

    /// The paths the program may read beneath (the write root first), as they were named
    /// when the sandbox was built; the program's own `/proc/<pid>` comes on top.
    pub fn readable(&self) -> Vec<&Path> {
        self.0.rules.iter().map(|r| r.path.as_path()).collect()
    }

    /// The paths the program may write beneath (the write root first, then `/dev/null`).
    pub fn writable(&self) -> Vec<&Path> {
        let rules = self.0.rules.iter().filter(|r| r.write);
        rules.map(|r| r.path.as_path()).collect()
    }

    /// The paths beneath the write root the program finds read-only
    /// ([`Sandbox::read_only`]), outermost first.
    pub fn read_only(&self) -> &[PathBuf] {
        &self.0.mounts.shown
    }

    /// Whether all of `/etc` is readable where the run gets its read-only view (its secrets
    /// covered, [`SandboxRules::etc_secrets`]); without the view, or where `/etc` held more
    /// than the sandbox examines, only the allow-list of files programs need to start.
    pub fn etc_readable(&self) -> bool {
        self.0.rules.iter().any(|r| r.view_only)
    }

    /// The entries of `/etc` the run's mount namespace covers (secrets by name, and what the
    /// system keeps from other users), outermost first.
    pub fn etc_secrets(&self) -> &[PathBuf] {
        &self.0.mounts.shown_secrets
    }

    /// The paths beneath the write root the program finds covered ([`Sandbox::hide`]),
    /// outermost first.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.0.mounts.shown_hidden
    }

    /// The pre-exec step: only raw, async-signal-safe system calls on prepared data.
    fn step(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let prepared = Arc::clone(&self.0);
        move || {
            let p = &*prepared;
            // First, while the capabilities are there and before Landlock forbids mounts.
            let applied = p.mounts.apply()?;
            let viewed = applied.viewed;
            rustix::thread::set_no_new_privs(true)?;
            if p.drop_capabilities {
                crate::privilege::drop_capabilities()?;
            }
            ruleset::restrict_self(&p.attr, &p.rules, p.own_proc, applied)?;
            for (resource, value) in p.limits.into_iter().flatten() {
                limits::lower(resource, value)?;
            }
            if let Some(program) = &p.program {
                // Without the read-only view, the metadata rule must hold everywhere.
                match viewed || !p.read_only_outside {
                    true => program.load()?,
                    false => p.fallback.load()?,
                }
            }
            Ok(())
        }
    }
}

impl Command {
    /// Run the program confined by `rules` (see [`Sandbox`]): no new privileges, no
    /// capabilities, Landlock, the resource limits, then the seccomp filter, after the steps
    /// already added with [`Command::pre_exec`] (add the sandbox last). Descendants inherit
    /// all of it. A step that fails in the child (say, the kernel's limit of 16 nested
    /// Landlock layers) fails the start ([`ErrorKind::StartFailed`]); the program never runs
    /// without it.
    #[expect(unsafe_code, reason = "adds a pre-exec step")]
    pub fn sandbox(&mut self, rules: &SandboxRules) -> &mut Self {
        if let Some(network) = &rules.0.network {
            self.network(network);
        }
        let step = rules.step();
        self.sandboxed = true;
        // SAFETY: `SandboxRules::step` performs only async-signal-safe system calls on data
        // prepared beforehand.
        unsafe { self.pre_exec(step) }
    }
}

/// Whether this kernel offers Landlock, and at which ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LandlockSupport {
    /// Landlock works; `abi` is the kernel's ABI version (7 on Linux 6.15 to 6.18).
    Available {
        /// The kernel's Landlock ABI version.
        abi: u32,
    },
    /// Built into the kernel but not enabled at boot (`lsm=` lacks it): `EOPNOTSUPP`.
    NotEnabled,
    /// Not built into this kernel (or a seccomp filter hides the system call): `ENOSYS`.
    NotImplemented,
}

impl LandlockSupport {
    /// Ask the kernel (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
    #[expect(unsafe_code, reason = "the version query system call")]
    pub fn probe() -> Self {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: the version query takes no attribute pointer and creates no descriptor.
        let v = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if v > 0 {
            return Self::Available { abi: v as u32 };
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::EOPNOTSUPP) => Self::NotEnabled,
            _ => Self::NotImplemented,
        }
    }

    /// The kernel's ABI, when Landlock is available.
    pub fn abi(self) -> Option<u32> {
        match self {
            Self::Available { abi } => Some(abi),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_rights_exclude_device_nodes() {
        let tree = tree_rights(ABI::V7);
        assert!(!tree.contains(AccessFs::MakeChar));
        assert!(!tree.contains(AccessFs::MakeBlock));
        assert!(tree.contains(AccessFs::WriteFile | AccessFs::MakeReg | AccessFs::Truncate));
        assert!(tree.contains(AccessFs::from_read(ABI::V7)));
    }

    #[test]
    fn min_abi_never_drops_below_network_rules() {
        let mut sandbox = Sandbox::new();
        assert_eq!(sandbox.min_abi, DEFAULT_MIN_ABI);
        sandbox.min_abi(1);
        assert_eq!(sandbox.min_abi, 4);
        sandbox.min_abi(6);
        assert_eq!(sandbox.min_abi, 6);
    }

    #[test]
    fn build_requires_the_min_abi() {
        let dir = std::fs::File::open("/").unwrap();
        let mut sandbox = Sandbox::new();
        if let LandlockSupport::Available { abi } = LandlockSupport::probe()
            && abi >= DEFAULT_MIN_ABI
        {
            let rules = sandbox.build(&dir).unwrap();
            assert_eq!(rules.abi(), abi.min(MAX_TESTED_ABI));
            assert!(rules.refuses_tcp());
            sandbox.min_abi(abi + 1);
        }
        let e = sandbox.build(&dir).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SandboxUnavailable);
    }

    #[test]
    fn the_policy_names_what_it_allows() {
        let Some(abi) = LandlockSupport::probe().abi() else {
            panic!("this test needs a kernel with Landlock");
        };
        assert!(abi >= DEFAULT_MIN_ABI, "this test needs Landlock ABI 4");
        let workspace = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let mut sandbox = Sandbox::new();
        sandbox
            .allow_read(extra.path())
            .allow_installation("/usr/bin/node");
        let rules = sandbox
            .build(std::fs::File::open(workspace.path()).unwrap())
            .unwrap();
        let readable = rules.readable();
        let canonical = workspace.path().canonicalize().unwrap();
        assert_eq!(readable[0], canonical);
        for path in [
            "/usr",
            "/etc/passwd",
            "/dev/null",
            "/dev/urandom",
            "/proc/meminfo",
        ] {
            assert!(readable.contains(&Path::new(path)), "{path}: {readable:?}");
        }
        assert!(readable.contains(&extra.path()));
        // All of /etc, with the view: its secrets covered by its mounts.
        assert!(readable.contains(&Path::new("/etc")));
        assert!(rules.etc_readable());
        if Path::new("/etc/shadow").exists() {
            assert!(rules.etc_secrets().contains(&PathBuf::from("/etc/shadow")));
        }
        for path in ["/", "/etc/shadow", "/root", "/tmp", "/home", "/proc"] {
            assert!(!readable.contains(&Path::new(path)), "{path}");
        }
        // The run's own controlling terminal too, where the system has the device.
        let mut writable = vec![canonical.as_path(), Path::new("/dev/null")];
        if Path::new("/dev/tty").exists() {
            writable.push(Path::new("/dev/tty"));
        }
        assert_eq!(rules.writable(), writable);
        assert!(rules.refuses_metadata_changes());
        assert!(rules.pathname_socket_mechanism().is_some());
        // Without the view, nothing could cover the secrets: the allow-list alone.
        let mut no_view = Sandbox::new();
        no_view.read_only_outside(false);
        let rules = no_view
            .build(std::fs::File::open(workspace.path()).unwrap())
            .unwrap();
        assert!(!rules.etc_readable());
        assert!(!rules.readable().contains(&Path::new("/etc")));
        assert!(rules.readable().contains(&Path::new("/etc/passwd")));
        // An embedder's path must exist.
        let mut missing = Sandbox::new();
        missing.allow_read(workspace.path().join("missing"));
        let e = missing
            .build(std::fs::File::open(workspace.path()).unwrap())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::StartFailed);
    }
}
