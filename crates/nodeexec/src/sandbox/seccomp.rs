//! The seccomp filter: a classic BPF program built in the parent, loaded in the child.
//!
//! What it refuses, in the order it checks:
//!
//! 1. a system call of another ABI (32-bit `int 0x80`, x32), whose numbers the rest does not
//!    check: `EPERM`;
//! 2. `io_uring_setup`: `ENOSYS` (io_uring could make sockets and change metadata past the
//!    filter; libuv falls back to its thread pool);
//! 3. with the socket rule: `socket(2)` of every family, `AF_UNIX` included, with `EACCES`
//!    (no UDP, no raw or netlink socket, and no Unix socket that could `connect` to a
//!    pathname socket outside the workspace: Landlock has no right for that at ABI 7); and
//!    `socketpair(2)` unless `AF_UNIX` with `SOCK_STREAM` (what libuv uses for a child's
//!    stdio and Node.js for its IPC channel) or `SOCK_SEQPACKET` (what Rust's standard
//!    library uses in every `Command::spawn`, so cargo starting rustc); a connected stream or
//!    sequenced-packet pair cannot be pointed elsewhere, a datagram pair could `sendto` a
//!    pathname;
//! 4. the metadata rule, in one of two forms (see the module docs of `sandbox`):
//!    * **set-ID** (where the run has a mount namespace of its own, whose read-only view of
//!      everything outside the writable places already refuses mode, owner and time changes
//!      there with `EROFS`): a mode with the set-user-ID or set-group-ID bit, in `chmod`,
//!      `fchmod`, `fchmodat`, `fchmodat2`, in `mknod`, `mknodat`, `creat`, and in `open` and
//!      `openat` when they create (`O_CREAT`, `O_TMPFILE`), is refused with `EPERM`; so is
//!      `chown`, `fchown`, `lchown` and `fchownat` to an owner other than the program's own
//!      uid (which the kernel refuses anyway to a program without `CAP_CHOWN`); `openat2`,
//!      whose mode lies in memory a filter cannot read, is `ENOSYS` (the C library and the
//!      usual runtimes fall back to `openat`); the `FS_IOC_SETFLAGS` and `FS_IOC_FSSETXATTR`
//!      ioctls are `EPERM`. Everything else of metadata goes through: `chmod +x`, `touch`,
//!      `tar x` and `cp -a` work in the workspace;
//!    * **everywhere** (where no mount namespace can be made: a container that refuses
//!      namespaces): the set-ID refusals above, and every system call that changes a file's
//!      mode, owner, times or extended attributes (`chmod`, `fchmod`, `fchmodat`,
//!      `fchmodat2`, `chown`, `fchown`, `lchown`, `fchownat`, `utime`, `utimes`,
//!      `futimesat`, `utimensat`, `setxattr`, `lsetxattr`, `fsetxattr`, `setxattrat`,
//!      `removexattr`, `lremovexattr`, `fremovexattr`, `removexattrat`, `file_setattr`),
//!      with `EPERM`, the workspace included: the filter sees numbers, not paths, and an
//!      owner needs no capability for these;
//! 5. namespaces (always, under the sandbox): `unshare` and `clone` with any namespace flag
//!    (`CLONE_NEWUSER`, `CLONE_NEWNS`, `CLONE_NEWPID`, `CLONE_NEWNET`, `CLONE_NEWIPC`,
//!    `CLONE_NEWUTS`, `CLONE_NEWCGROUP`, and `CLONE_NEWTIME` for `unshare`), and `setns`,
//!    with `EPERM`; `clone3` with `ENOSYS`, since its flags lie in memory a filter cannot
//!    read: the C library then falls back to `clone`, whose flags it can (as container
//!    runtimes' default profiles do). A sandboxed program holds no capability, so every
//!    namespace but a user namespace is refused to it anyway; a user namespace would give it
//!    every capability inside one, and with them mounts of its own (a cgroup file system,
//!    over which its process bound could be lifted) and the kernel's less-trodden paths that
//!    want `CAP_SYS_ADMIN`. Threads and forks are untouched (no namespace flag). What breaks:
//!    programs that make namespaces themselves (`unshare`, `bwrap`, rootless containers,
//!    Chromium's own sandbox, which wants `--no-sandbox` here).
//!
//! [`Program::cgroup_namespace_refused`] is the filter of a root server's *unsandboxed*
//! runs (`contain/cgroupfs.rs`): only `CLONE_NEWCGROUP` (in `unshare` and `clone`), `setns`
//! and `clone3` (as above) are refused, for the program's native ABI and for the 32-bit one
//! the kernel also accepts (whose system call numbers differ); nothing else.
//!
//! Hand-written (a few dozen instructions) rather than through a seccomp crate: the program
//! is small, fixed, and each instruction is checked by the tests through its effect.

use std::io;

/// `AUDIT_ARCH_*` of the native system-call ABI.
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

/// Whether this architecture has a filter.
pub(crate) const SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// System calls newer than the `libc` crate's tables (the same number on every architecture
/// since Linux 5.1's unified numbering).
const SYS_FCHMODAT2: u32 = 452;
const SYS_SETXATTRAT: u32 = 463;
const SYS_REMOVEXATTRAT: u32 = 466;
const SYS_FILE_SETATTR: u32 = 469;

/// The metadata system calls (see the module docs).
fn metadata_calls() -> Vec<u32> {
    // Extended below on x86-64 only.
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    let mut calls: Vec<u32> = calls.into_iter().map(|n| n as u32).collect();
    calls.extend([
        SYS_FCHMODAT2,
        SYS_SETXATTRAT,
        SYS_REMOVEXATTRAT,
        SYS_FILE_SETATTR,
    ]);
    calls
}

/// Which form of the metadata rule a program holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metadata {
    /// No metadata rule.
    Allowed,
    /// Set-ID modes and other owners refused; the rest left to the read-only mounts.
    SetId {
        /// The program's own uid (a `chown` to it, or to -1, is allowed).
        uid: u32,
    },
    /// Every metadata change refused, and the set-ID rule too.
    Refused,
}

/// The set-user-ID and set-group-ID bits of a mode.
const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;
/// The `open` flags under which the mode argument counts: `O_CREAT` and `O_TMPFILE` (less
/// the `O_DIRECTORY` bit it carries, which alone creates nothing).
const CREATES: u32 = (libc::O_CREAT | libc::O_TMPFILE) as u32 & !(libc::O_DIRECTORY as u32);
/// `openat2` (Linux 5.6), the same number on every architecture.
const SYS_OPENAT2: u32 = 437;

/// System calls with a mode argument: (number, index of the mode).
fn mode_calls() -> Vec<(u32, u32)> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![
        (libc::SYS_fchmod as u32, 1),
        (libc::SYS_fchmodat as u32, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_mknodat as u32, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod as u32, 1),
        (libc::SYS_creat as u32, 1),
        (libc::SYS_mknod as u32, 1),
    ]);
    calls
}

/// System calls that create with a mode when their flags say so: (number, index of the
/// flags, index of the mode).
fn open_calls() -> Vec<(u32, u32, u32)> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![(libc::SYS_openat as u32, 2, 3)];
    #[cfg(target_arch = "x86_64")]
    calls.push((libc::SYS_open as u32, 1, 2));
    calls
}

/// System calls with an owner argument: (number, index of the uid).
fn owner_calls() -> Vec<(u32, u32)> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut calls = vec![(libc::SYS_fchown as u32, 1), (libc::SYS_fchownat as u32, 2)];
    #[cfg(target_arch = "x86_64")]
    calls.extend([(libc::SYS_chown as u32, 1), (libc::SYS_lchown as u32, 1)]);
    calls
}

/// The set-ID rule (see the module docs), with the system call number in the accumulator:
/// blocks that load arguments and end in a return, so they come after every block that
/// tests the number alone.
fn set_id_rule(b: &mut Builder, owner: Option<u32>) {
    let eperm = error(libc::EPERM);
    for (nr, mode) in mode_calls() {
        b.jump(JEQ, nr, 0, 4)
            .stmt(LOAD, arg(mode))
            .jump(JSET, SET_ID, 0, 1)
            .stmt(RETURN, eperm)
            .stmt(RETURN, ALLOW);
    }
    for (nr, flags, mode) in open_calls() {
        b.jump(JEQ, nr, 0, 6)
            .stmt(LOAD, arg(flags))
            .jump(JSET, CREATES, 0, 3)
            .stmt(LOAD, arg(mode))
            .jump(JSET, SET_ID, 0, 1)
            .stmt(RETURN, eperm)
            .stmt(RETURN, ALLOW);
    }
    if let Some(uid) = owner {
        for (nr, owner) in owner_calls() {
            b.jump(JEQ, nr, 0, 5)
                .stmt(LOAD, arg(owner))
                .jump(JEQ, u32::MAX, 2, 0)
                .jump(JEQ, uid, 1, 0)
                .stmt(RETURN, eperm)
                .stmt(RETURN, ALLOW);
        }
    }
}

/// Every namespace flag of `unshare(2)`.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32
    | CLONE_NEWTIME;
/// `CLONE_NEWTIME` (Linux 5.6): `unshare` only; in `clone`'s flags this bit belongs to the
/// exit signal (the low byte).
const CLONE_NEWTIME: u32 = 0x80;
/// `clone3` (Linux 5.3), the same number on every architecture.
const SYS_CLONE3: u32 = 435;

/// The system calls of the namespace rule in one ABI: `unshare`, `clone`, `setns`, `clone3`.
#[derive(Clone, Copy)]
struct NamespaceCalls {
    unshare: u32,
    clone: u32,
    setns: u32,
    clone3: u32,
}

const NATIVE_NAMESPACE_CALLS: NamespaceCalls = NamespaceCalls {
    unshare: libc::SYS_unshare as u32,
    clone: libc::SYS_clone as u32,
    setns: libc::SYS_setns as u32,
    clone3: SYS_CLONE3,
};

/// The 32-bit ABI the kernel also accepts on this architecture: its `AUDIT_ARCH_*` and its
/// numbers of the namespace calls (i386 on x86-64, 32-bit Arm on aarch64).
#[cfg(target_arch = "x86_64")]
const COMPAT: (u32, NamespaceCalls) = (
    0x4000_0003,
    NamespaceCalls {
        unshare: 310,
        clone: 120,
        setns: 346,
        clone3: SYS_CLONE3,
    },
);
#[cfg(target_arch = "aarch64")]
const COMPAT: (u32, NamespaceCalls) = (
    0x4000_0028,
    NamespaceCalls {
        unshare: 337,
        clone: 120,
        setns: 375,
        clone3: SYS_CLONE3,
    },
);

/// The namespace rule, with the system call number in the accumulator: `clone3` `ENOSYS`,
/// `setns` `EPERM`, `unshare` with a flag of `mask` `EPERM`, `clone` with a flag of `mask`
/// (less the exit signal's byte) `EPERM`. Ends by returning for `unshare` and `clone`;
/// another number falls through with the accumulator unchanged. Fourteen instructions.
fn namespace_rule(b: &mut Builder, calls: NamespaceCalls, mask: u32) {
    let eperm = error(libc::EPERM);
    b.equal_returns(calls.clone3, error(libc::ENOSYS))
        .equal_returns(calls.setns, eperm);
    for (nr, mask) in [(calls.unshare, mask), (calls.clone, mask & !0xFF)] {
        b.jump(JEQ, nr, 0, 4)
            .stmt(LOAD, arg(0))
            .jump(JSET, mask, 0, 1)
            .stmt(RETURN, eperm)
            .stmt(RETURN, ALLOW);
    }
}

/// The ioctls that change inode flags or extended file attributes.
const FS_IOC_SETFLAGS: u32 = 0x4008_6602;
const FS_IOC32_SETFLAGS: u32 = 0x4004_6602;
const FS_IOC_FSSETXATTR: u32 = 0x401C_5820;

const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const RETURN: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
/// `struct seccomp_data`: `nr` at 0, `arch` at 4, `args[i]` at 16 + 8i (the low half on
/// these little-endian targets; every argument checked is a C `int`).
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg(i: u32) -> u32 {
    16 + 8 * i
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const fn error(errno: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | errno as u32
}

/// A seccomp program, ready to load.
#[derive(Clone, Debug)]
pub(crate) struct Program(Vec<libc::sock_filter>);

/// Builds a program of blocks whose jumps stay local.
struct Builder(Vec<libc::sock_filter>);

impl Builder {
    fn stmt(&mut self, code: u16, k: u32) -> &mut Self {
        self.0.push(libc::sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        });
        self
    }

    fn jump(&mut self, code: u16, k: u32, jt: u8, jf: u8) -> &mut Self {
        self.0.push(libc::sock_filter { code, jt, jf, k });
        self
    }

    /// If the accumulator equals `k`, return `action`.
    fn equal_returns(&mut self, k: u32, action: u32) -> &mut Self {
        self.jump(JEQ, k, 0, 1).stmt(RETURN, action)
    }
}

/// What the filter lets `socket(2)` make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sockets {
    /// Any socket (no socket rule).
    Any,
    /// None: `socket(2)` refused for every family (the sandbox without the network policy).
    Refused,
    /// Under the network policy: `AF_INET`/`AF_INET6` TCP streams, and where `datagram`
    /// (a network namespace of the run's own) UDP datagrams; nothing else. Without
    /// `datagram` (the Landlock mode) TCP Fast Open sends are refused too.
    Inet {
        /// UDP allowed too.
        datagram: bool,
    },
}

/// `socket(2)` under the network policy: `AF_INET`/`AF_INET6` with `SOCK_STREAM` and protocol
/// 0 or TCP, and (where `datagram`) `SOCK_DGRAM` with 0 or UDP; every other socket `EACCES`.
/// Sixteen instructions; the offsets are counted in the comments (target minus next).
fn inet_sockets(b: &mut Builder, datagram: bool) {
    let deny = error(libc::EACCES);
    // Without datagrams the type check after the stream one denies outright.
    let dgram_jt = if datagram { 0 } else { 3 };
    b.jump(JEQ, libc::SYS_socket as u32, 0, 15) //  0: not socket -> 16
        .stmt(LOAD, arg(0)) //                        1
        .jump(JEQ, libc::AF_INET as u32, 1, 0) //     2: -> 4
        .jump(JEQ, libc::AF_INET6 as u32, 0, 10) //   3: else -> 14
        .stmt(LOAD, arg(1)) //                        4
        .stmt(AND, 0xF) //                            5
        .jump(JEQ, libc::SOCK_STREAM as u32, 0, 3) // 6: else -> 10
        .stmt(LOAD, arg(2)) //                        7
        .jump(JEQ, 0, 6, 0) //                        8: -> 15
        .jump(JEQ, libc::IPPROTO_TCP as u32, 5, 4) // 9: -> 15, else -> 14
        .jump(JEQ, libc::SOCK_DGRAM as u32, dgram_jt, 3) // 10: else -> 14
        .stmt(LOAD, arg(2)) //                        11
        .jump(JEQ, 0, 2, 0) //                        12: -> 15
        .jump(JEQ, libc::IPPROTO_UDP as u32, 1, 0) // 13: -> 15, else 14
        .stmt(RETURN, deny) //                        14
        .stmt(RETURN, ALLOW); //                      15
}

impl Program {
    /// The sandbox's program: the socket rule and the metadata rule as asked; the ABI, the
    /// io_uring and the namespace rules are always there.
    pub(crate) fn new(sockets: Sockets, metadata: Metadata) -> Self {
        Self::build(sockets, metadata, true)
    }

    /// The program of a root server's unsandboxed run (`contain/cgroupfs.rs`): no new cgroup
    /// namespace (`unshare` or `clone` with `CLONE_NEWCGROUP`: `EPERM`), no `setns`
    /// (`EPERM`), no `clone3` (`ENOSYS`), in the native ABI and the 32-bit one (x32 numbers
    /// are the native ones with a high bit, masked off here); everything else allowed.
    pub(crate) fn cgroup_namespace_refused() -> Self {
        let mut b = Builder(Vec::new());
        let (compat_arch, compat_calls) = COMPAT;
        let mut compat = Builder(Vec::new());
        compat.stmt(LOAD, NR);
        namespace_rule(&mut compat, compat_calls, libc::CLONE_NEWCGROUP as u32);
        compat.stmt(RETURN, ALLOW);
        let skip = u8::try_from(compat.0.len()).expect("a short block");
        b.stmt(LOAD, ARCH).jump(JEQ, compat_arch, 0, skip);
        b.0.extend(compat.0);
        // Another ABI than these two: nothing to refuse (none exists on these targets).
        b.jump(JEQ, NATIVE_ARCH, 1, 0)
            .stmt(RETURN, ALLOW)
            .stmt(LOAD, NR)
            .stmt(AND, !X32_BIT);
        namespace_rule(&mut b, NATIVE_NAMESPACE_CALLS, libc::CLONE_NEWCGROUP as u32);
        b.stmt(RETURN, ALLOW);
        Self(b.0)
    }

    /// The program with the socket rule and the metadata rule as asked, and the namespace
    /// rule where `namespaces` (the ABI and io_uring rules are always there).
    fn build(sockets: Sockets, metadata: Metadata, namespaces: bool) -> Self {
        let mut b = Builder(Vec::new());
        b.stmt(LOAD, ARCH)
            .jump(JEQ, NATIVE_ARCH, 1, 0)
            .stmt(RETURN, error(libc::EPERM))
            .stmt(LOAD, NR)
            .jump(JGE, X32_BIT, 0, 1)
            .stmt(RETURN, error(libc::EPERM))
            .equal_returns(libc::SYS_io_uring_setup as u32, error(libc::ENOSYS));
        if namespaces {
            namespace_rule(&mut b, NATIVE_NAMESPACE_CALLS, NAMESPACE_FLAGS);
        }
        if sockets == Sockets::Refused {
            b.equal_returns(libc::SYS_socket as u32, error(libc::EACCES));
        }
        if metadata == Metadata::Refused {
            for nr in metadata_calls() {
                b.equal_returns(nr, error(libc::EPERM));
            }
        }
        if metadata != Metadata::Allowed {
            b.equal_returns(SYS_OPENAT2, error(libc::ENOSYS));
        }
        // The blocks below load arguments and end in a return: they come last.
        if let Sockets::Inet { datagram } = sockets {
            inet_sockets(&mut b, datagram);
            if !datagram {
                // TCP Fast Open connects in a send, which Landlock's connect rule may not see.
                for (nr, flags) in [
                    (libc::SYS_sendto, 3),
                    (libc::SYS_sendmsg, 2),
                    (libc::SYS_sendmmsg, 3),
                ] {
                    b.jump(JEQ, nr as u32, 0, 4)
                        .stmt(LOAD, arg(flags))
                        .jump(JSET, libc::MSG_FASTOPEN as u32, 0, 1)
                        .stmt(RETURN, error(libc::EPERM))
                        .stmt(RETURN, ALLOW);
                }
            }
        }
        if sockets != Sockets::Any {
            // socketpair: AF_UNIX with SOCK_STREAM or SOCK_SEQPACKET (flags masked off) only.
            b.jump(JEQ, libc::SYS_socketpair as u32, 0, 8)
                .stmt(LOAD, arg(0))
                .jump(JEQ, libc::AF_UNIX as u32, 0, 4)
                .stmt(LOAD, arg(1))
                .stmt(AND, 0xF)
                .jump(JEQ, libc::SOCK_STREAM as u32, 2, 0)
                .jump(JEQ, libc::SOCK_SEQPACKET as u32, 1, 0)
                .stmt(RETURN, error(libc::EACCES))
                .stmt(RETURN, ALLOW);
        }
        match metadata {
            Metadata::Allowed => {}
            // Every chown and chmod already refused above: only the creating calls' modes.
            Metadata::Refused => set_id_rule(&mut b, None),
            Metadata::SetId { uid } => set_id_rule(&mut b, Some(uid)),
        }
        if metadata != Metadata::Allowed {
            b.jump(JEQ, libc::SYS_ioctl as u32, 0, 5)
                .stmt(LOAD, arg(1))
                .jump(JEQ, FS_IOC_SETFLAGS, 2, 0)
                .jump(JEQ, FS_IOC32_SETFLAGS, 1, 0)
                .jump(JEQ, FS_IOC_FSSETXATTR, 0, 1)
                .stmt(RETURN, error(libc::EPERM));
        }
        b.stmt(RETURN, ALLOW);
        Self(b.0)
    }

    /// The network policy's program alone (no metadata rule): see [`Sockets::Inet`].
    pub(crate) fn network(datagram: bool) -> Self {
        Self::build(Sockets::Inet { datagram }, Metadata::Allowed, false)
    }

    /// The number of instructions.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Load the program on this process (it needs no-new-privileges or `CAP_SYS_ADMIN`).
    /// Async-signal-safe; meant for the process about to exec (the filter is permanent).
    #[expect(unsafe_code, reason = "the prctl that loads a seccomp program")]
    pub(crate) fn load(&self) -> io::Result<()> {
        let program = libc::sock_fprog {
            len: self.0.len() as u16,
            filter: self.0.as_ptr().cast_mut(),
        };
        // SAFETY: the kernel copies the program from memory that outlives the call; it does
        // not write through the pointer.
        let r = unsafe {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                std::ptr::from_ref(&program),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the program on a `seccomp_data` the way the kernel would (enough of classic BPF
    /// for the instructions used here).
    fn verdict(program: &Program, nr: u32, args: [u32; 2]) -> u32 {
        verdict4(program, nr, [args[0], args[1], 0, 0])
    }

    fn verdict4(program: &Program, nr: u32, args: [u32; 4]) -> u32 {
        verdict_arch(program, NATIVE_ARCH, nr, args)
    }

    fn verdict_arch(program: &Program, arch: u32, nr: u32, args: [u32; 4]) -> u32 {
        let data = |offset: u32| match offset {
            NR => nr,
            ARCH => arch,
            16 => args[0],
            24 => args[1],
            32 => args[2],
            40 => args[3],
            _ => panic!("load of {offset}"),
        };
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = program.0[pc];
            pc += 1;
            match i.code {
                LOAD => acc = data(i.k),
                AND => acc &= i.k,
                JSET => pc += usize::from(if acc & i.k != 0 { i.jt } else { i.jf }),
                RETURN => return i.k,
                JEQ | JGE => {
                    let taken = if i.code == JEQ {
                        acc == i.k
                    } else {
                        acc >= i.k
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                other => panic!("instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn verdicts() {
        let full = Program::new(Sockets::Refused, Metadata::Refused);
        let eacces = error(libc::EACCES);
        let eperm = error(libc::EPERM);
        let socket = libc::SYS_socket as u32;
        let pair = libc::SYS_socketpair as u32;
        let unix = libc::AF_UNIX as u32;
        let stream = libc::SOCK_STREAM as u32 | libc::SOCK_CLOEXEC as u32;
        assert_eq!(verdict(&full, socket, [unix, stream]), eacces);
        assert_eq!(verdict(&full, socket, [libc::AF_INET as u32, 2]), eacces);
        assert_eq!(verdict(&full, pair, [unix, stream]), ALLOW);
        let seqpacket = libc::SOCK_SEQPACKET as u32 | libc::SOCK_CLOEXEC as u32;
        assert_eq!(verdict(&full, pair, [unix, seqpacket]), ALLOW);
        assert_eq!(
            verdict(&full, pair, [libc::AF_INET as u32, seqpacket]),
            eacces
        );
        assert_eq!(
            verdict(&full, pair, [unix, libc::SOCK_DGRAM as u32]),
            eacces
        );
        assert_eq!(verdict(&full, pair, [libc::AF_INET as u32, stream]), eacces);
        for nr in metadata_calls() {
            assert_eq!(verdict(&full, nr, [0, 0]), eperm, "{nr}");
        }
        let ioctl = libc::SYS_ioctl as u32;
        for cmd in [FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR] {
            assert_eq!(verdict(&full, ioctl, [3, cmd]), eperm);
        }
        assert_eq!(verdict(&full, ioctl, [3, libc::TIOCGWINSZ as u32]), ALLOW);
        assert_eq!(
            verdict(&full, libc::SYS_io_uring_setup as u32, [0, 0]),
            error(libc::ENOSYS)
        );
        assert_eq!(verdict(&full, libc::SYS_read as u32, [0, 0]), ALLOW);
        assert_eq!(verdict(&full, X32_BIT | 1, [0, 0]), eperm);

        let none = Program::new(Sockets::Any, Metadata::Allowed);
        assert_eq!(verdict(&none, socket, [libc::AF_INET as u32, 2]), ALLOW);
        assert_eq!(verdict(&none, libc::SYS_fchmod as u32, [0, 0]), ALLOW);
        assert_eq!(verdict(&none, pair, [unix, libc::SOCK_DGRAM as u32]), ALLOW);
        assert!(full.len() < 150);
    }

    #[test]
    fn set_id_verdicts() {
        let eperm = error(libc::EPERM);
        let uid = 1000;
        let narrow = Program::new(Sockets::Refused, Metadata::SetId { uid });
        let full = Program::new(Sockets::Refused, Metadata::Refused);
        let (fchmod, fchmodat) = (libc::SYS_fchmod as u32, libc::SYS_fchmodat as u32);
        let openat = libc::SYS_openat as u32;
        let creat = (libc::O_CREAT | libc::O_WRONLY) as u32;
        let tmpfile = (libc::O_TMPFILE | libc::O_RDWR) as u32;
        for p in [&narrow, &full] {
            // A set-ID bit: refused in every call that sets a mode.
            for bit in [libc::S_ISUID, libc::S_ISGID] {
                let mode = 0o755 | bit;
                assert_eq!(verdict(p, fchmod, [3, mode]), eperm);
                assert_eq!(verdict4(p, fchmodat, [3, 0, mode, 0]), eperm);
                assert_eq!(verdict4(p, SYS_FCHMODAT2, [3, 0, mode, 0]), eperm);
                assert_eq!(
                    verdict4(p, libc::SYS_mknodat as u32, [3, 0, mode, 0]),
                    eperm
                );
                assert_eq!(verdict4(p, openat, [3, 0, creat, mode]), eperm);
                assert_eq!(verdict4(p, openat, [3, 0, tmpfile, mode]), eperm);
                // An open that creates nothing: its mode argument means nothing.
                assert_eq!(verdict4(p, openat, [3, 0, 0, mode]), ALLOW);
                #[cfg(target_arch = "x86_64")]
                {
                    assert_eq!(verdict(p, libc::SYS_chmod as u32, [0, mode]), eperm);
                    assert_eq!(verdict(p, libc::SYS_creat as u32, [0, mode]), eperm);
                    assert_eq!(
                        verdict4(p, libc::SYS_open as u32, [0, creat, mode, 0]),
                        eperm
                    );
                    assert_eq!(verdict4(p, libc::SYS_open as u32, [0, 0, mode, 0]), ALLOW);
                }
            }
            assert_eq!(verdict4(p, openat, [3, 0, creat, 0o755]), ALLOW);
            assert_eq!(verdict4(p, SYS_OPENAT2, [3, 0, 0, 0]), error(libc::ENOSYS));
        }
        // The narrow rule: ordinary modes, times and xattrs go through (the read-only mounts
        // refuse them outside); an owner other than the program's own does not.
        assert_eq!(verdict(&narrow, fchmod, [3, 0o755]), ALLOW);
        assert_eq!(verdict4(&narrow, fchmodat, [3, 0, 0o1777, 0]), ALLOW);
        assert_eq!(verdict(&narrow, libc::SYS_utimensat as u32, [3, 0]), ALLOW);
        assert_eq!(verdict(&narrow, libc::SYS_fsetxattr as u32, [3, 0]), ALLOW);
        let fchown = libc::SYS_fchown as u32;
        let fchownat = libc::SYS_fchownat as u32;
        assert_eq!(verdict(&narrow, fchown, [3, uid]), ALLOW);
        assert_eq!(verdict(&narrow, fchown, [3, u32::MAX]), ALLOW);
        assert_eq!(verdict(&narrow, fchown, [3, 0]), eperm);
        assert_eq!(verdict(&narrow, fchown, [3, uid + 1]), eperm);
        assert_eq!(verdict4(&narrow, fchownat, [3, 0, uid, 0]), ALLOW);
        assert_eq!(verdict4(&narrow, fchownat, [3, 0, 0, 0]), eperm);
        // The full rule: every mode, time and owner change refused.
        assert_eq!(verdict(&full, fchmod, [3, 0o755]), eperm);
        assert_eq!(verdict(&full, fchown, [3, u32::MAX]), eperm);
        assert_eq!(verdict(&full, libc::SYS_utimensat as u32, [3, 0]), eperm);
        // No rule: nothing.
        let none = Program::new(Sockets::Refused, Metadata::Allowed);
        assert_eq!(verdict(&none, fchmod, [3, 0o4755]), ALLOW);
        assert_eq!(verdict4(&none, SYS_OPENAT2, [3, 0, 0, 0]), ALLOW);
        assert!(full.len() < 150 && narrow.len() < 150);
    }

    #[test]
    fn namespace_verdicts() {
        let eperm = error(libc::EPERM);
        let enosys = error(libc::ENOSYS);
        let (unshare, clone, setns) = (
            libc::SYS_unshare as u32,
            libc::SYS_clone as u32,
            libc::SYS_setns as u32,
        );
        // What glibc and musl pass to `clone` for a thread and for `fork`.
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u32;
        let fork = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u32;
        let user = libc::CLONE_NEWUSER as u32;
        let cgroup = libc::CLONE_NEWCGROUP as u32;
        // The sandbox: every namespace refused, in every program it builds.
        for p in [
            Program::new(Sockets::Refused, Metadata::Refused),
            Program::new(Sockets::Any, Metadata::Allowed),
            Program::new(Sockets::Inet { datagram: true }, Metadata::Refused),
        ] {
            assert_eq!(verdict(&p, SYS_CLONE3, [0, 0]), enosys);
            assert_eq!(verdict(&p, setns, [3, 0]), eperm);
            for flag in [
                user,
                cgroup,
                libc::CLONE_NEWNS as u32,
                libc::CLONE_NEWPID as u32,
                libc::CLONE_NEWNET as u32,
                libc::CLONE_NEWIPC as u32,
                libc::CLONE_NEWUTS as u32,
            ] {
                assert_eq!(verdict(&p, unshare, [flag, 0]), eperm, "{flag:#x}");
                assert_eq!(verdict(&p, clone, [flag | fork, 0]), eperm, "{flag:#x}");
            }
            assert_eq!(verdict(&p, unshare, [CLONE_NEWTIME, 0]), eperm);
            // Threads, forks, and unsharing what is no namespace.
            assert_eq!(verdict(&p, clone, [thread, 0]), ALLOW);
            assert_eq!(verdict(&p, clone, [fork, 0]), ALLOW);
            // The exit signal's byte may hold any signal: 0x80 there is no CLONE_NEWTIME.
            assert_eq!(verdict(&p, clone, [fork | 0x80, 0]), ALLOW);
            assert_eq!(verdict(&p, unshare, [libc::CLONE_FILES as u32, 0]), ALLOW);
            assert_eq!(verdict(&p, unshare, [libc::CLONE_FS as u32, 0]), ALLOW);
        }
        // The network policy's program alone has no namespace rule.
        let net = Program::network(true);
        assert_eq!(verdict(&net, unshare, [user, 0]), ALLOW);
        assert_eq!(verdict(&net, SYS_CLONE3, [0, 0]), ALLOW);

        // A root server's unsandboxed runs: only cgroup namespaces, setns and clone3.
        let root = Program::cgroup_namespace_refused();
        let (compat, calls) = COMPAT;
        for (arch, nrs, x32) in [
            (NATIVE_ARCH, NATIVE_NAMESPACE_CALLS, 0),
            (NATIVE_ARCH, NATIVE_NAMESPACE_CALLS, X32_BIT),
            (compat, calls, 0),
        ] {
            let v = |nr: u32, a: u32| verdict_arch(&root, arch, nr | x32, [a, 0, 0, 0]);
            assert_eq!(v(nrs.clone3, 0), enosys);
            assert_eq!(v(nrs.setns, 3), eperm);
            assert_eq!(v(nrs.unshare, cgroup), eperm);
            assert_eq!(
                v(nrs.unshare, cgroup | user | libc::CLONE_NEWNS as u32),
                eperm
            );
            assert_eq!(v(nrs.clone, cgroup | fork), eperm);
            assert_eq!(v(nrs.unshare, user), ALLOW);
            assert_eq!(v(nrs.unshare, user | libc::CLONE_NEWNS as u32), ALLOW);
            assert_eq!(v(nrs.clone, user | fork), ALLOW);
            assert_eq!(v(nrs.clone, thread), ALLOW);
            assert_eq!(v(libc::SYS_read as u32, 0), ALLOW);
        }
        // Numbers of one ABI mean nothing in the other: i386's unshare is not refused as
        // the native call of that number would be, and the reverse.
        assert_eq!(
            verdict_arch(&root, NATIVE_ARCH, calls.unshare, [cgroup, 0, 0, 0]),
            ALLOW
        );
        assert_eq!(
            verdict_arch(
                &root,
                compat,
                NATIVE_NAMESPACE_CALLS.unshare,
                [cgroup, 0, 0, 0]
            ),
            ALLOW
        );
        assert!(root.len() < 40);
    }

    #[test]
    fn network_verdicts() {
        let eacces = error(libc::EACCES);
        let socket = libc::SYS_socket as u32;
        let (inet, inet6) = (libc::AF_INET as u32, libc::AF_INET6 as u32);
        let stream =
            libc::SOCK_STREAM as u32 | libc::SOCK_CLOEXEC as u32 | libc::SOCK_NONBLOCK as u32;
        let dgram = libc::SOCK_DGRAM as u32 | libc::SOCK_CLOEXEC as u32;
        let raw = libc::SOCK_RAW as u32;
        let (tcp, udp) = (libc::IPPROTO_TCP as u32, libc::IPPROTO_UDP as u32);
        for datagram in [true, false] {
            let p = Program::network(datagram);
            for family in [inet, inet6] {
                assert_eq!(verdict4(&p, socket, [family, stream, 0, 0]), ALLOW);
                assert_eq!(verdict4(&p, socket, [family, stream, tcp, 0]), ALLOW);
                // SCTP and MPTCP streams: not TCP.
                assert_eq!(verdict4(&p, socket, [family, stream, 132, 0]), eacces);
                assert_eq!(verdict4(&p, socket, [family, stream, 262, 0]), eacces);
                assert_eq!(verdict4(&p, socket, [family, raw, 0, 0]), eacces);
                let want = if datagram { ALLOW } else { eacces };
                assert_eq!(
                    verdict4(&p, socket, [family, dgram, 0, 0]),
                    want,
                    "{datagram}"
                );
                assert_eq!(verdict4(&p, socket, [family, dgram, udp, 0]), want);
                // ICMP "ping" datagrams: never.
                assert_eq!(verdict4(&p, socket, [family, dgram, 1, 0]), eacces);
                assert_eq!(verdict4(&p, socket, [family, dgram, tcp, 0]), eacces);
            }
            for family in [
                libc::AF_UNIX,
                libc::AF_NETLINK,
                libc::AF_PACKET,
                libc::AF_VSOCK,
            ] {
                assert_eq!(verdict4(&p, socket, [family as u32, stream, 0, 0]), eacces);
                assert_eq!(verdict4(&p, socket, [family as u32, dgram, 0, 0]), eacces);
            }
            let pair = libc::SYS_socketpair as u32;
            assert_eq!(verdict(&p, pair, [libc::AF_UNIX as u32, stream]), ALLOW);
            assert_eq!(verdict(&p, pair, [libc::AF_UNIX as u32, dgram]), eacces);
            // No metadata rule here.
            assert_eq!(verdict(&p, libc::SYS_fchmod as u32, [0, 0]), ALLOW);
            let fastopen = libc::MSG_FASTOPEN as u32;
            let want = if datagram { ALLOW } else { error(libc::EPERM) };
            assert_eq!(
                verdict4(&p, libc::SYS_sendto as u32, [3, 0, 0, fastopen]),
                want
            );
            assert_eq!(
                verdict4(&p, libc::SYS_sendmsg as u32, [3, 0, fastopen, 0]),
                want
            );
            assert_eq!(
                verdict4(&p, libc::SYS_sendmmsg as u32, [3, 0, 0, fastopen]),
                want
            );
            assert_eq!(verdict4(&p, libc::SYS_sendto as u32, [3, 0, 0, 0]), ALLOW);
            assert_eq!(verdict4(&p, libc::SYS_sendmsg as u32, [3, 0, 0, 0]), ALLOW);
            assert_eq!(verdict(&p, libc::SYS_read as u32, [0, 0]), ALLOW);
            assert_eq!(verdict(&p, libc::SYS_connect as u32, [0, 0]), ALLOW);
        }
        // The sandbox under the policy: both rules.
        let both = Program::new(Sockets::Inet { datagram: false }, Metadata::Refused);
        assert_eq!(verdict4(&both, socket, [inet, stream, 0, 0]), ALLOW);
        assert_eq!(
            verdict(&both, libc::SYS_fchmod as u32, [0, 0]),
            error(libc::EPERM)
        );
    }
}
