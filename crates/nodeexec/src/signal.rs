//! Signal names, as Node.js and POSIX spell them.

/// The name of a Linux signal number (`9` is `"SIGKILL"`); real-time signals are
/// `"SIGRTMIN+n"`; `None` for numbers that are no signal.
pub fn signal_name(signal: i32) -> Option<String> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match signal {
        1..=31 => Some(NAMES[(signal - 1) as usize].to_owned()),
        _ => {
            let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
            (min..=max)
                .contains(&signal)
                .then(|| format!("SIGRTMIN+{}", signal - min))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_name_matches_libc() {
        assert_eq!(signal_name(libc::SIGKILL).as_deref(), Some("SIGKILL"));
        assert_eq!(signal_name(libc::SIGTERM).as_deref(), Some("SIGTERM"));
        assert_eq!(signal_name(libc::SIGSEGV).as_deref(), Some("SIGSEGV"));
        assert_eq!(signal_name(libc::SIGSYS).as_deref(), Some("SIGSYS"));
        assert_eq!(signal_name(libc::SIGRTMIN()).as_deref(), Some("SIGRTMIN+0"));
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(-3), None);
    }
}
