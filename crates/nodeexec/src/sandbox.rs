//! The opt-in kernel sandbox: Landlock rules built in the parent, enforced after `fork`.
//!
//! [`Sandbox`] is the policy (which Landlock ABI is required, the resource limits, whether
//! capabilities are dropped). [`Sandbox::build`] turns it, with the write root, into a
//! [`SandboxRules`]: the Landlock ruleset is created and populated **in the parent** (opening
//! paths, allocating, talking to the `landlock` crate are not async-signal-safe), and
//! [`Command::sandbox`] adds a pre-exec step that does only raw system calls in the process
//! that becomes the program, in this order:
//!
//! 1. `prctl(PR_SET_NO_NEW_PRIVS)`: no set-user-id, set-group-id or file-capability gain by
//!    any later `exec` (and what `landlock_restrict_self` requires of an unprivileged caller);
//! 2. `setrlimit` of the address space, open files and (optionally) data segment, soft and
//!    hard limit alike, so the program cannot raise them again;
//! 3. the capabilities dropped: the bounding set (where we may), then effective, permitted and
//!    inheritable to nothing. With no-new-privs an `exec` cannot give them back, so even a
//!    root embedder's child runs without `CAP_SYS_ADMIN`, `CAP_NET_RAW`, `CAP_MKNOD`,
//!    `CAP_SYS_MODULE`, … (Landlock alone does not stop a root process from loading a kernel
//!    module from a file it can read, or sending raw packets);
//! 4. `landlock_restrict_self` with the ruleset's descriptor (close-on-exec, so the program
//!    does not keep it);
//! 5. a seccomp filter (unless [`Sandbox::socket_filter`] turned it off): `socket(2)` of any
//!    family but `AF_UNIX` fails with `EACCES`, which closes what Landlock's TCP rules leave
//!    open (UDP, so DNS exfiltration, and every other family); `io_uring_setup` fails with
//!    `ENOSYS` (io_uring could create sockets past the filter; libuv falls back to its thread
//!    pool); a system call of another ABI (32-bit `int 0x80`, x32) fails with `EPERM`.
//!
//! The rules: every file system access right of the ABI in use is *handled* (denied unless a
//! rule allows it); `/` gets the read rights (read files, list directories, execute); the write
//! root gets every right but creating character and block devices; `/dev/null` gets read,
//! write and truncate; the embedder's [`Sandbox::allow_write`] paths get what the write root
//! gets. TCP bind and connect are handled with no rule, so both are always refused (ABI 4;
//! with the seccomp filter an IP socket cannot even be made). From ABI 6, signals to processes
//! outside the sandbox and connections to abstract Unix sockets created outside it are refused
//! as well (Landlock scopes).
//!
//! # Which ABI
//!
//! The kernel must offer at least [`Sandbox::min_abi`] ([`DEFAULT_MIN_ABI`], 4: file system
//! writes and TCP); otherwise [`Sandbox::build`] fails with [`ErrorKind::SandboxUnavailable`]
//! and nothing is started. Above that, the rules use the rights of the newest ABI both the
//! kernel and this crate have been tested with ([`MAX_TESTED_ABI`], 7), all of them required
//! (the `landlock` crate's `CompatLevel::HardRequirement`): a ruleset is never silently
//! weaker than [`SandboxRules::abi`] says.

// The pre-exec step is a sequence of raw system calls between fork and exec; see SAFETY notes.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
};

use crate::command::Command;
use crate::error::{Error, ErrorKind};

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

/// The policy of the opt-in kernel sandbox (Linux Landlock plus resource limits); see the
/// crate docs, section *Sandbox*. Build it, then [`build`](Sandbox::build) it with the write
/// root and give the result to [`Command::sandbox`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    min_abi: u32,
    writable: Vec<PathBuf>,
    address_space: Option<u64>,
    open_files: Option<u64>,
    data: Option<u64>,
    drop_capabilities: bool,
    socket_filter: bool,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    /// The default policy: Landlock ABI 4 or newer required, 4 GiB of address space, 1024
    /// open files, no data-segment limit, capabilities dropped, sockets other than Unix ones
    /// refused, nothing writable but the write root and `/dev/null`.
    pub fn new() -> Self {
        Self {
            min_abi: DEFAULT_MIN_ABI,
            writable: Vec::new(),
            address_space: Some(DEFAULT_ADDRESS_SPACE),
            open_files: Some(DEFAULT_OPEN_FILES),
            data: None,
            drop_capabilities: true,
            socket_filter: true,
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

    /// Also allow writing beneath `path` (a directory) or to `path` (a file), with the rights
    /// the write root has. It must exist when the sandbox is built.
    pub fn allow_write(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.writable.push(path.as_ref().to_owned());
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

    /// Whether to install the seccomp filter that refuses every socket but Unix-domain ones
    /// (default `true`; see the module docs). Without it the network rules are Landlock's
    /// alone: TCP bind and connect refused, UDP and the rest allowed.
    pub fn socket_filter(&mut self, filter: bool) -> &mut Self {
        self.socket_filter = filter;
        self
    }

    /// Build the Landlock ruleset now, in the calling process, with `write_root` (a directory
    /// descriptor) as the one tree the program may write. Fails with
    /// [`ErrorKind::SandboxUnavailable`] when the kernel cannot enforce it in full, and with
    /// [`ErrorKind::StartFailed`] when the rules cannot be made (an `allow_write` path
    /// missing, a descriptor that is not a directory).
    pub fn build(&self, write_root: impl AsFd) -> Result<SandboxRules, Error> {
        let kernel = match LandlockSupport::probe() {
            LandlockSupport::Available { abi } if abi >= self.min_abi => abi,
            _ => return Err(Error::new(ErrorKind::SandboxUnavailable, None)),
        };
        if self.socket_filter && SOCKET_FILTER.is_empty() {
            // No filter for this architecture: the policy cannot be enforced in full.
            return Err(Error::new(ErrorKind::SandboxUnavailable, None));
        }
        let abi = kernel.min(MAX_TESTED_ABI).max(self.min_abi);
        let ruleset = self
            .ruleset(abi, write_root.as_fd())
            .map_err(|e| Error::new(e.0, Some(e.1)))?;
        let limit = |resource: Resource, value: Option<u64>| value.map(|v| (resource, v));
        Ok(SandboxRules {
            ruleset: Arc::new(ruleset),
            abi,
            limits: [
                limit(libc::RLIMIT_AS, self.address_space),
                limit(libc::RLIMIT_NOFILE, self.open_files),
                limit(libc::RLIMIT_DATA, self.data),
            ],
            drop_capabilities: self.drop_capabilities,
            socket_filter: self.socket_filter,
        })
    }

    /// The ruleset of ABI `abi` (which the kernel has), every right required.
    fn ruleset(&self, abi: u32, root: std::os::fd::BorrowedFd<'_>) -> Result<OwnedFd, Failure> {
        let target = ABI::from(abi as i32);
        let unavailable =
            |e: landlock::RulesetError| Failure(ErrorKind::SandboxUnavailable, io::Error::other(e));
        let failed =
            |e: landlock::RulesetError| Failure(ErrorKind::StartFailed, io::Error::other(e));
        let handled = AccessFs::from_all(target);
        let tree = tree_rights(target);
        let file = tree & AccessFs::from_file(target);
        let dev_null = (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate) & handled;

        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(handled)
            .and_then(|r| r.handle_access(AccessNet::from_all(target)))
            .map_err(unavailable)?;
        let scopes = Scope::from_all(target);
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes).map_err(unavailable)?;
        }
        let mut created = ruleset.create().map_err(unavailable)?;

        let open = |path: &Path| {
            PathFd::new(path).map_err(|e| Failure(ErrorKind::StartFailed, io::Error::other(e)))
        };
        let (slash, null) = (open(Path::new("/"))?, open(Path::new("/dev/null"))?);
        created = created
            .add_rule(PathBeneath::new(slash, AccessFs::from_read(target)))
            .and_then(|r| r.add_rule(PathBeneath::new(root, tree)))
            .and_then(|r| r.add_rule(PathBeneath::new(null, dev_null)))
            .map_err(failed)?;
        for path in &self.writable {
            let is_dir = std::fs::metadata(path)
                .map_err(|e| Failure(ErrorKind::StartFailed, e))?
                .is_dir();
            let rights = if is_dir { tree } else { file };
            created = created
                .add_rule(PathBeneath::new(open(path)?, rights))
                .map_err(failed)?;
        }
        let fd: Option<OwnedFd> = created.into();
        // HardRequirement makes a ruleset the kernel cannot create an error above; no
        // descriptor here would mean "not enforced", which is never acceptable.
        fd.ok_or_else(|| {
            Failure(
                ErrorKind::SandboxUnavailable,
                io::Error::from(io::ErrorKind::Unsupported),
            )
        })
    }
}

/// What the write root (and the `allow_write` directories) may do: everything the ABI names
/// except creating character and block devices (a device node in the workspace would reach
/// the device itself, whatever the rules of its real path).
fn tree_rights(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

struct Failure(ErrorKind, io::Error);

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

/// A built sandbox: the Landlock ruleset (a descriptor, shared by clones) and the limits, to
/// be applied to any number of [`Command`]s with [`Command::sandbox`].
#[derive(Clone, Debug)]
pub struct SandboxRules {
    ruleset: Arc<OwnedFd>,
    abi: u32,
    limits: [Option<(Resource, u64)>; 3],
    drop_capabilities: bool,
    socket_filter: bool,
}

impl SandboxRules {
    /// The Landlock ABI whose rights these rules handle and enforce.
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// Whether TCP bind and connect are refused (always: ABI 4 is the minimum).
    pub fn refuses_tcp(&self) -> bool {
        self.abi >= 4
    }

    /// Whether signals to processes outside the sandbox, and connections to abstract Unix
    /// sockets made outside it, are refused (ABI 6 and above).
    pub fn scoped(&self) -> bool {
        self.abi >= 6
    }

    /// Whether sockets other than Unix-domain ones are refused (the seccomp filter): no UDP,
    /// no other address family.
    pub fn refuses_ip_sockets(&self) -> bool {
        self.socket_filter
    }

    /// The pre-exec step: only raw, async-signal-safe system calls on captured plain data.
    fn step(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let ruleset = Arc::clone(&self.ruleset);
        let limits = self.limits;
        let drop_capabilities = self.drop_capabilities;
        let socket_filter = self.socket_filter;
        move || {
            let fd: RawFd = ruleset.as_raw_fd();
            // SAFETY (whole block): raw system calls on this process, its limits and its own
            // descriptor, with arguments on the stack; no allocation, no lock.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                for (resource, value) in limits.into_iter().flatten() {
                    lower_limit(resource, value)?;
                }
                if drop_capabilities {
                    drop_all_capabilities()?;
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if socket_filter {
                    let program = libc::sock_fprog {
                        len: SOCKET_FILTER.len() as u16,
                        filter: SOCKET_FILTER.as_ptr().cast_mut(),
                    };
                    let program: *const libc::sock_fprog = &program;
                    if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, program) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
            Ok(())
        }
    }
}

impl Command {
    /// Run the program confined by `rules` (see [`Sandbox`]): no new privileges, the resource
    /// limits, no capabilities, then Landlock, after the steps already added with
    /// [`Command::pre_exec`] (add the sandbox last). Descendants inherit all of it. A step
    /// that fails in the child (say, the kernel's limit of 16 nested Landlock layers) fails
    /// the start ([`ErrorKind::StartFailed`]); the program never runs without it.
    pub fn sandbox(&mut self, rules: &SandboxRules) -> &mut Self {
        let step = rules.step();
        // SAFETY: `SandboxRules::step` performs only async-signal-safe system calls on data
        // captured beforehand (a descriptor number, limits as integers).
        unsafe { self.pre_exec(step) }
    }
}

/// `AUDIT_ARCH_*` of the native system-call ABI, checked first by the filter.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7;
/// x86_64's x32 system calls carry this bit in their number.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;
/// aarch64 has no x32: a bit no system call number reaches.
#[cfg(target_arch = "aarch64")]
const X32_BIT: u32 = 0x8000_0000;

const fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(op: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | op | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    }
}

const LOAD: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const RETURN: u32 = libc::BPF_RET | libc::BPF_K;
/// `struct seccomp_data`: `nr` at 0, `arch` at 4, `args[0]` at 16 (its low half on these
/// little-endian targets).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;

/// The seccomp program (classic BPF; jump offsets count from the next instruction).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
static SOCKET_FILTER: [libc::sock_filter; 13] = [
    stmt(LOAD, ARCH),
    jump(libc::BPF_JEQ, NATIVE_ARCH, 1, 0),
    stmt(RETURN, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
    stmt(LOAD, NR),
    jump(libc::BPF_JGE, X32_BIT, 0, 1),
    stmt(RETURN, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
    jump(libc::BPF_JEQ, libc::SYS_io_uring_setup as u32, 0, 1),
    stmt(RETURN, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    jump(libc::BPF_JEQ, libc::SYS_socket as u32, 0, 3),
    stmt(LOAD, ARG0),
    jump(libc::BPF_JEQ, libc::AF_UNIX as u32, 1, 0),
    stmt(RETURN, libc::SECCOMP_RET_ERRNO | libc::EACCES as u32),
    stmt(RETURN, libc::SECCOMP_RET_ALLOW),
];

/// No filter written for this architecture: a sandbox that asks for one is unavailable.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
static SOCKET_FILTER: [libc::sock_filter; 0] = [];

/// Set both the soft and the hard limit of `resource` to `value`, or to the current hard
/// limit if that is lower (raising a hard limit would need `CAP_SYS_RESOURCE`).
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
unsafe fn lower_limit(resource: Resource, value: u64) -> io::Result<()> {
    // SAFETY: getrlimit/setrlimit on this process with a stack value.
    unsafe {
        let mut current: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &new) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The highest capability number tried when emptying the bounding set (the kernel refuses
/// numbers above its last with `EINVAL`, which ends the loop).
const LAST_CAPABILITY: libc::c_ulong = 63;

/// Empty the bounding set where permitted (`CAP_SETPCAP`), then set the effective, permitted
/// and inheritable sets to nothing (always permitted); the ambient set follows.
///
/// # Safety
///
/// Async-signal-safe; for the child between fork and exec.
unsafe fn drop_all_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset on this process with stack values of the kernel's layout.
    unsafe {
        for cap in 0..=LAST_CAPABILITY {
            // EPERM (no CAP_SETPCAP: then we hold nothing to drop from it either) and EINVAL
            // (past the kernel's last capability) are both fine.
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL)
            {
                break;
            }
        }
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
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
        match LandlockSupport::probe() {
            LandlockSupport::Available { abi } if abi >= DEFAULT_MIN_ABI => {
                let rules = sandbox.build(&dir).unwrap();
                assert_eq!(rules.abi(), abi.min(MAX_TESTED_ABI));
                assert!(rules.refuses_tcp());
                sandbox.min_abi(abi + 1);
            }
            _ => {}
        }
        let e = sandbox.build(&dir).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SandboxUnavailable);
    }
}
