//! The network policy's mechanism: a child whose only way out is a proxy of the embedder's.
//!
//! [`Network::new`] makes, once per embedder (a server), the network its children get while
//! the policy is on, best first:
//!
//! 1. [`NetworkMechanism::Namespace`]: a network namespace of the embedder's own
//!    (`unshare(CLONE_NEWNET)`, which needs `CAP_SYS_ADMIN`: root on a host);
//! 2. [`NetworkMechanism::UserNamespace`]: the same, owned by a user namespace made for it
//!    (`unshare(CLONE_NEWUSER | CLONE_NEWNET)`, our ids mapped to themselves: an ordinary
//!    user, or a root without `CAP_SYS_ADMIN` where user namespaces are allowed);
//! 3. [`NetworkMechanism::Landlock`]: no namespace can be made (a container whose seccomp
//!    profile refuses them): Landlock TCP rules (ABI 4 and later) that let a child connect to
//!    the proxy's port alone and bind none, with the seccomp rule below.
//!
//! Where none works, [`Network::new`] fails with [`ErrorKind::NetworkPolicyUnavailable`]
//! and the embedder runs nothing under the policy.
//!
//! # The namespace
//!
//! A short-lived process forked for it (a user namespace cannot be made by a multi-threaded
//! process) makes the namespace, brings its loopback interface up, opens a TCP listener on
//! `127.0.0.1` **inside** it, and hands that listener and descriptors of its namespaces to
//! the embedder over a Unix socket pair (`SCM_RIGHTS`), then exits. The descriptors keep the
//! namespace alive for as long as the [`Network`] lives. The embedder's proxy accepts on the
//! listener it was given: a socket belongs to the namespace it was made in, whichever
//! process uses it, so the proxy is reached from inside and connects out from the host's
//! network. There is no forwarder: the only address of the namespace that leads anywhere
//! is the proxy's listener.
//!
//! Every run given the network ([`Command::network`]) joins it in its waiter (C, before any
//! process of the run exists): `setns` into the user namespace first where there is one (a
//! process may join a user namespace its own user owns), then into the network namespace,
//! then the run's own PID namespace is made as always (inside a user namespace of the run's
//! own, nested in the network's, where the network has one). So every run and job of one
//! embedder shares one loopback (a dev server started in one is reached by the next), which
//! nothing outside the embedder reaches, and none has an interface of the host's network:
//! no TCP or UDP to any host address, no DNS of its own (a resolver's address is not
//! routable from inside; names are resolved by the proxy).
//!
//! # The seccomp rule (every mechanism)
//!
//! A child under the policy may make `AF_INET` and `AF_INET6` sockets of type `SOCK_STREAM`
//! with protocol 0 or TCP, and in a namespace also `SOCK_DGRAM` with 0 or UDP (its own
//! loopback's); every other `socket(2)` is refused with `EACCES`: no raw, packet or netlink
//! socket, no SCTP or MPTCP (which Landlock's TCP rules would not see), and no Unix socket
//! (a pathname socket of a host resolver or agent would be a way out). `socketpair(2)` is
//! allowed as under the sandbox (a connected Unix stream or sequenced-packet pair). In the
//! Landlock mode `sendto`/`sendmsg` with `MSG_FASTOPEN` are refused too (a TCP Fast Open
//! connect). The filter needs no-new-privileges, which the step sets.
//!
//! # What the Landlock mode cannot block
//!
//! Landlock rules name ports, not addresses: a child may connect to the proxy's port on any
//! host it can route to. It cannot listen on any port (so a dev server and its client cannot
//! meet in one command), and its loopback is the host's. This is documented as the weaker
//! mode and named by `confine doctor`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::command::Command;
use crate::error::{Error, ErrorKind};
use crate::sandbox::{LandlockSupport, seccomp};

/// How a child's network is confined while the policy is on (strongest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum NetworkMechanism {
    /// A network namespace of the embedder's own (root with `CAP_SYS_ADMIN`).
    Namespace,
    /// A network namespace owned by a user namespace made for it (an ordinary user).
    UserNamespace,
    /// Landlock TCP rules: connect to the proxy's port only, bind none (the weaker mode: see
    /// the module docs).
    Landlock,
}

impl NetworkMechanism {
    /// A short name for reports: `network namespace`, `network namespace (in a user
    /// namespace)`, `landlock tcp rules`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Namespace => "network namespace",
            Self::UserNamespace => "network namespace (in a user namespace)",
            Self::Landlock => "landlock tcp rules (weaker: the proxy's port on any host)",
        }
    }
}

#[derive(Debug)]
struct Inner {
    mechanism: NetworkMechanism,
    /// The network namespace (namespace mechanisms).
    net: Option<OwnedFd>,
    /// The user namespace owning it (`UserNamespace`).
    user: Option<OwnedFd>,
    /// The proxy's address as a child reaches it.
    proxy: SocketAddr,
    /// The seccomp program of the step.
    program: seccomp::Program,
}

/// The network of an embedder's children under the policy (shared by clones): see the
/// module docs. Give it to each run with [`Command::network`].
#[derive(Clone, Debug)]
pub struct Network(Arc<Inner>);

/// The same network (clones of one [`Network::new`]).
impl PartialEq for Network {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Network {}

impl Network {
    /// Make the network with the strongest mechanism this system allows, no stronger than
    /// `strongest` (pass [`NetworkMechanism::Namespace`] for the best; a weaker one only for
    /// tests and diagnosis). Returns it with the listener the proxy must serve: inside the
    /// namespace, or on the host's `127.0.0.1` in the Landlock mode. Fails with
    /// [`ErrorKind::NetworkPolicyUnavailable`] where no mechanism works.
    pub fn new(strongest: NetworkMechanism) -> Result<(Network, TcpListener), Error> {
        let unavailable = |e: Option<io::Error>| Error::new(ErrorKind::NetworkPolicyUnavailable, e);
        let mut last = None;
        if strongest <= NetworkMechanism::UserNamespace && seccomp::SUPPORTED {
            match holder::make(strongest == NetworkMechanism::Namespace) {
                Ok(made) => {
                    let proxy = made
                        .listener
                        .local_addr()
                        .map_err(|e| unavailable(Some(e)))?;
                    let mechanism = if made.user.is_some() {
                        NetworkMechanism::UserNamespace
                    } else {
                        NetworkMechanism::Namespace
                    };
                    let inner = Inner {
                        mechanism,
                        net: Some(made.net),
                        user: made.user,
                        proxy,
                        program: seccomp::Program::network(true),
                    };
                    return Ok((Network(Arc::new(inner)), made.listener));
                }
                Err(e) => last = Some(e),
            }
        }
        let landlock =
            matches!(LandlockSupport::probe(), LandlockSupport::Available { abi } if abi >= 4);
        if !landlock || !seccomp::SUPPORTED {
            return Err(unavailable(last));
        }
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| unavailable(Some(e)))?;
        let proxy = listener.local_addr().map_err(|e| unavailable(Some(e)))?;
        let inner = Inner {
            mechanism: NetworkMechanism::Landlock,
            net: None,
            user: None,
            proxy,
            program: seccomp::Program::network(false),
        };
        Ok((Network(Arc::new(inner)), listener))
    }

    /// The mechanism in use.
    pub fn mechanism(&self) -> NetworkMechanism {
        self.0.mechanism
    }

    /// The proxy's address as a child reaches it (`127.0.0.1:PORT`).
    pub fn proxy_addr(&self) -> SocketAddr {
        self.0.proxy
    }

    /// Whether a child has a loopback of its own (the namespace mechanisms), where it may
    /// listen and connect on any port.
    pub fn own_loopback(&self) -> bool {
        self.0.net.is_some()
    }

    /// The namespaces a run's waiter joins: (network, user namespace where there is one).
    pub(crate) fn namespaces(&self) -> Option<(RawFd, Option<RawFd>)> {
        let net = self.0.net.as_ref()?.as_raw_fd();
        Some((net, self.0.user.as_ref().map(AsRawFd::as_raw_fd)))
    }

    /// The pre-exec step of the program: no new privileges, the Landlock TCP layer (Landlock
    /// mode), the seccomp rule. Only raw system calls on prepared data.
    fn step(&self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        let inner = Arc::clone(&self.0);
        move || {
            rustix::thread::set_no_new_privs(true)?;
            if inner.mechanism == NetworkMechanism::Landlock {
                crate::sandbox::restrict_tcp_to(inner.proxy.port())?;
            }
            inner.program.load()
        }
    }
}

impl Command {
    /// Run the program with `network` as its only network (see [`Network`]): its waiter joins
    /// the network's namespaces before anything of the run exists, and the program's last
    /// steps refuse every socket but TCP (and, in a namespace, UDP) and, in the Landlock mode,
    /// every TCP connection but to the proxy. Descendants inherit all of it. The embedder
    /// gives the program the proxy's variables itself. With [`Command::sandbox`] the sandbox
    /// must have been built with [`Sandbox::network`](crate::Sandbox::network), which adds
    /// this for you.
    #[expect(unsafe_code, reason = "adds a pre-exec step")]
    pub fn network(&mut self, network: &Network) -> &mut Self {
        if self
            .network
            .as_ref()
            .is_some_and(|n| Arc::ptr_eq(&n.0, &network.0))
        {
            return self;
        }
        self.network = Some(network.clone());
        let step = network.step();
        // SAFETY: `Network::step` makes only async-signal-safe system calls on data prepared
        // beforehand.
        unsafe { self.pre_exec(step) }
    }
}

/// The process that makes the namespace (see the module docs).
mod holder {
    use super::*;
    use crate::fdpass::{receive, send};

    /// What the holder handed over.
    pub(super) struct Made {
        pub listener: TcpListener,
        pub net: OwnedFd,
        pub user: Option<OwnedFd>,
    }

    /// Fork the holder, try a bare network namespace (where `bare`), else one in a user
    /// namespace, and take what it sends.
    #[expect(
        unsafe_code,
        reason = "forks a process that makes only raw system calls"
    )]
    pub(super) fn make(bare: bool) -> io::Result<Made> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
        let parent = rustix::process::getpid();
        // SAFETY: the child makes only raw system calls on stack data and ends in `_exit`
        // (it is a copy of a multi-threaded process: no allocation, no lock).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let code = match child(bare, uid.as_raw(), gid.as_raw(), parent) {
                Ok(fds) => send(theirs.as_fd(), 1, fds.iter().flatten().map(AsFd::as_fd))
                    .map_or(122, |()| 0),
                Err(e) => {
                    send(theirs.as_fd(), 0, []).ok();
                    // The error number is the exit status, for the report (121: another).
                    e.raw_os_error()
                        .filter(|n| (1..=120).contains(n))
                        .unwrap_or(121)
                }
            };
            // SAFETY: ends the forked child without running anything of the parent's.
            unsafe { libc::_exit(code) };
        }
        drop(theirs);
        let received = receive(ours.as_fd());
        let mut status = 0;
        // SAFETY: reaps the child just forked, which nothing else waits for.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let code = libc::WEXITSTATUS(status);
        match received {
            Ok((1, mut fds)) if fds.len() >= 2 => {
                let user = (fds.len() == 3).then(|| fds.pop()).flatten();
                let net = fds.pop().expect("two descriptors");
                let listener = TcpListener::from(fds.pop().expect("the listener"));
                Ok(Made {
                    listener,
                    net,
                    user,
                })
            }
            _ if (1..=120).contains(&code) => Err(io::Error::from_raw_os_error(code)),
            Ok(_) => Err(io::Error::other("the namespace's holder sent nothing")),
            Err(e) => Err(e),
        }
    }

    /// In the forked child: the namespaces, the loopback up, the listener, the descriptors.
    #[expect(unsafe_code, reason = "unshare in a forked child")]
    fn child(
        bare: bool,
        uid: u32,
        gid: u32,
        parent: rustix::process::Pid,
    ) -> io::Result<[Option<OwnedFd>; 3]> {
        use rustix::fs::{Mode, OFlags};
        use rustix::thread::UnshareFlags;
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        let bare_done = bare
            // SAFETY: no `CLONE_FILES`; this process is single-threaded.
            && unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }.is_ok();
        let mut user = false;
        if !bare_done {
            // Dumpable, to write our own id maps (an embedder may have hidden itself).
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
                .ok();
            let flags = UnshareFlags::NEWUSER | UnshareFlags::NEWNET;
            // SAFETY: as above.
            unsafe { rustix::thread::unshare_unsafe(flags) }?;
            crate::contain::map_own_ids(uid, gid)?;
            user = true;
        }
        loopback_up()?;
        let listener = rustix::net::socket_with(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        rustix::net::bind(&listener, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
        rustix::net::listen(&listener, 1024)?;
        let open = |path: &std::ffi::CStr| {
            rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        };
        let net = open(c"/proc/self/ns/net")?;
        let user = if user {
            Some(open(c"/proc/self/ns/user")?)
        } else {
            None
        };
        Ok([Some(listener), Some(net), user])
    }

    /// `lo` up (in the new namespace it is down).
    #[expect(unsafe_code, reason = "the interface-flags ioctls")]
    fn loopback_up() -> io::Result<()> {
        let socket = rustix::net::socket_with(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::DGRAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        // SAFETY: a plain C structure, all zeros valid.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in ifr.ifr_name.iter_mut().zip(b"lo") {
            *dst = *src as libc::c_char;
        }
        // SAFETY: the ioctl reads and writes the `ifreq` it is given, live across the call.
        if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags };
        ifr.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
        // SAFETY: as for the first.
        if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_order_strongest_first() {
        assert!(NetworkMechanism::Namespace < NetworkMechanism::UserNamespace);
        assert!(NetworkMechanism::UserNamespace < NetworkMechanism::Landlock);
    }
}
