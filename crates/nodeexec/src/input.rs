//! A run's input: the null device (the default), a pipe the embedder writes, or a
//! pseudo-terminal of the run's own ([`Stdin`], [`Command::stdin`](crate::Command::stdin)).
//!
//! * **A pipe** ([`Stdin::Pipe`]): the program's stdin is the read end of a pipe made for the
//!   run; the embedder holds the write end ([`Input`]). Closing it ([`Input::close`]) is the
//!   program's end of input.
//! * **A terminal** ([`Stdin::Terminal`]): the embedder opens a pseudo-terminal pair
//!   (`/dev/ptmx`, close-on-exec, never the embedder's controlling terminal), sets its window
//!   size, and keeps the master; the program gets the slave as stdin, stdout and stderr, and
//!   (it is the leader of a session of its own) as that session's controlling terminal
//!   (`TIOCSCTTY`, right after `setsid`, just before `exec`). Its output is one stream, read
//!   from the master and returned as stdout, the terminal's bytes as they are (echo, carriage
//!   returns, escape sequences). Bytes written to the master are typed keys: the line
//!   discipline echoes them, edits lines, and turns `^C` into SIGINT for the terminal's
//!   foreground process group (the program, or what a shell in it runs in the foreground),
//!   never for the run's waiter or the embedder, which are in other sessions. Nothing else of
//!   the host's terminals is reachable: the program holds no descriptor of another terminal
//!   and is in no session that has one.
//!
//! The waiter and the namespace's init close their copies of stdin, stdout and stderr once
//! the program is started (`contain/`), so only the program and what it starts hold the pipe's
//! read end or the terminal's slave: the master reads end of file (`EIO`, taken as the end)
//! once every process of the run has closed the slave, and a write to the pipe fails once none
//! reads it.
//!
//! A write never blocks the embedder past a deadline the caller gives ([`Input::write`]): the
//! descriptors are non-blocking, and what the program has not taken by then stays unwritten
//! (the count says how much was). Writes are serialized, so two writers never interleave.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};

/// What a run's stdin is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stdin {
    /// The null device: the program reads end of input at once.
    #[default]
    Null,
    /// A pipe the embedder writes through [`Started::input`](crate::Started::input).
    Pipe,
    /// A pseudo-terminal of the run's own, of this size: the program's stdin, stdout, stderr
    /// and controlling terminal.
    Terminal(WindowSize),
}

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl WindowSize {
    /// A size of `cols` columns and `rows` rows.
    pub const fn new(cols: u16, rows: u16) -> Self {
        Self { cols, rows }
    }
}

/// The embedder's end of a run's input ([`Started::input`](crate::Started::input)): cheap to
/// clone (one shared state), usable while another task waits for the run.
#[derive(Clone, Debug)]
pub struct Input(Arc<InputState>);

#[derive(Debug)]
struct InputState {
    /// `None` once closed (or the run is over).
    writer: tokio::sync::Mutex<Option<Writer>>,
    /// The terminal's master, for resizing; `None` for a pipe, or once the run is over.
    master: Mutex<Option<Arc<AsyncFd<OwnedFd>>>>,
    terminal: bool,
}

#[derive(Debug)]
enum Writer {
    Pipe(tokio::net::unix::pipe::Sender),
    Terminal {
        master: Arc<AsyncFd<OwnedFd>>,
        /// Whether the last byte written ended a line (or nothing was written): how many
        /// end-of-file keys [`Input::close`] types.
        at_line_start: bool,
    },
}

/// What the parent keeps of a run's input until the program is started: the descriptors it
/// hands the child (given to std's `Command` as stdio) and its own end.
pub(crate) struct Prepared {
    /// The child's stdin, stdout and stderr (the last two for a terminal only).
    pub child: [Option<OwnedFd>; 3],
    pub input: Input,
    /// The master, read for the run's output (a terminal only).
    pub output: Option<MasterReader>,
}

impl Stdin {
    /// Make the pipe or the terminal (in P, before the fork; inside a tokio runtime).
    #[expect(
        unsafe_code,
        reason = "registers the terminal's master with tokio's reactor"
    )]
    pub(crate) fn prepare(self) -> io::Result<Option<Prepared>> {
        match self {
            Self::Null => Ok(None),
            Self::Pipe => {
                let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
                let sender = tokio::net::unix::pipe::Sender::from_owned_fd(write)?;
                Ok(Some(Prepared {
                    child: [Some(read), None, None],
                    input: Input::new(Writer::Pipe(sender), None),
                    output: None,
                }))
            }
            Self::Terminal(size) => {
                let (master, slave) = open_terminal(size)?;
                // SAFETY: an `OwnedFd` always answers the descriptor it owns, which stays open
                // until it drops with the `AsyncFd`.
                let master = unsafe { AsyncFd::register(master) }.map_err(io::Error::from)?;
                let master = Arc::new(master);
                let child = [
                    Some(slave.try_clone()?),
                    Some(slave.try_clone()?),
                    Some(slave),
                ];
                let writer = Writer::Terminal {
                    master: master.clone(),
                    at_line_start: true,
                };
                Ok(Some(Prepared {
                    child,
                    input: Input::new(writer, Some(master.clone())),
                    output: Some(MasterReader(master)),
                }))
            }
        }
    }
}

/// A new pseudo-terminal pair of `size`: the master non-blocking, both close-on-exec, neither
/// becoming the embedder's controlling terminal.
fn open_terminal(size: WindowSize) -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pty::OpenptFlags;
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    // The slave through the master itself (Linux 4.13): no lookup of a path in `/dev/pts`,
    // which a container may mount differently; by name where that ioctl is missing.
    let slave = match rustix::pty::ioctl_tiocgptpeer(&master, flags) {
        Ok(slave) => slave,
        Err(_) => {
            let name = rustix::pty::ptsname(&master, Vec::new())?;
            let oflags =
                rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC;
            rustix::fs::open(name.as_c_str(), oflags, rustix::fs::Mode::empty())?
        }
    };
    set_size(&master, size)?;
    let flags = rustix::fs::fcntl_getfl(&master)?;
    rustix::fs::fcntl_setfl(&master, flags | rustix::fs::OFlags::NONBLOCK)?;
    Ok((master, slave))
}

fn set_size(fd: impl AsFd, size: WindowSize) -> io::Result<()> {
    let winsize = rustix::termios::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(fd, winsize)?;
    Ok(())
}

impl Input {
    fn new(writer: Writer, master: Option<Arc<AsyncFd<OwnedFd>>>) -> Self {
        Self(Arc::new(InputState {
            terminal: master.is_some(),
            writer: tokio::sync::Mutex::new(Some(writer)),
            master: Mutex::new(master),
        }))
    }

    /// Whether the input is a terminal (else a pipe).
    pub fn is_terminal(&self) -> bool {
        self.0.terminal
    }

    /// How many bytes a terminal would echo on its own for `bytes` typed now, before the
    /// program reads them: where the line discipline edits lines (`ICANON`) and echoes
    /// (`ECHO`), about one byte each, two for a line end (`\r\n`) and for a control byte
    /// shown as `^X`; 0 for a pipe, or a terminal in raw mode (the program echoes, if at all).
    /// An estimate, for a reader that waits for more than its own echo.
    pub fn echo_len(&self, bytes: &[u8]) -> usize {
        use rustix::termios::LocalModes;
        let master = self.0.master.lock().unwrap_or_else(|e| e.into_inner());
        let Some(master) = master.as_ref() else {
            return 0;
        };
        let Ok(termios) = rustix::termios::tcgetattr(master.get_ref()) else {
            return 0;
        };
        if !termios
            .local_modes
            .contains(LocalModes::ICANON | LocalModes::ECHO)
        {
            return 0;
        }
        bytes
            .iter()
            .map(|&b| match b {
                b'\n' | b'\r' => 2,
                b'\t' => 1,
                0..=0x1f | 0x7f => 2,
                _ => 1,
            })
            .sum()
    }

    /// Whether the input was closed ([`Input::close`], [`Input::shut`]).
    pub fn is_closed(&self) -> bool {
        match self.0.writer.try_lock() {
            Ok(writer) => writer.is_none(),
            // A write is under way: not closed.
            Err(_) => false,
        }
    }

    /// Write `bytes`, waiting for the program to take them until `deadline` at the latest;
    /// answers how many it took (all of them, unless the deadline came first). Dropping the
    /// future stops the write (what was written stays written). Errors: `BrokenPipe` when no
    /// process of the run holds the input any more (the run ended), `NotConnected` when the
    /// input was closed.
    pub async fn write(&self, bytes: &[u8], deadline: tokio::time::Instant) -> io::Result<usize> {
        let mut writer = self.0.writer.lock().await;
        let Some(writer) = writer.as_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let mut written = 0;
        while written < bytes.len() {
            let rest = &bytes[written..];
            let step = async {
                match writer {
                    Writer::Pipe(pipe) => {
                        pipe.writable().await?;
                        match pipe.try_write(rest) {
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                            other => other,
                        }
                    }
                    Writer::Terminal { master, .. } => {
                        let mut guard = master.writable().await?;
                        match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), rest)?)) {
                            Ok(result) => result,
                            Err(_would_block) => Ok(0),
                        }
                    }
                }
            };
            match tokio::time::timeout_at(deadline, step).await {
                Err(_) => break,
                Ok(Ok(n)) => {
                    written += n;
                    if let Writer::Terminal { at_line_start, .. } = writer
                        && n > 0
                    {
                        *at_line_start = matches!(rest[n - 1], b'\n' | b'\r');
                    }
                }
                Ok(Err(e)) => return Err(gone(e)),
            }
        }
        Ok(written)
    }

    /// End the input. A pipe is closed: the program reads end of input once it has read what
    /// was written. A terminal stays open (closing the master would hang the session up and
    /// lose its output): its end-of-file key (`VEOF`, Ctrl-D unless the program changed it) is
    /// typed, twice when the last line written is unfinished (the first only hands that line
    /// over), which a program reading lines takes as the end of input; where the terminal has
    /// no room for them before `deadline` they are not typed. Later writes fail with
    /// `NotConnected`, whatever this answers. Closing a closed input does nothing.
    pub async fn close(&self, deadline: tokio::time::Instant) -> io::Result<()> {
        let mut writer = self.0.writer.lock().await;
        if let Some(Writer::Terminal {
            master,
            at_line_start,
        }) = writer.as_ref()
        {
            let eof = rustix::termios::tcgetattr(master.get_ref())
                .map(|t| t.special_codes[rustix::termios::SpecialCodeIndex::VEOF])
                .unwrap_or(4);
            let keys = [eof, eof];
            let keys = if *at_line_start {
                &keys[..1]
            } else {
                &keys[..]
            };
            let typed = async {
                let mut guard = master.writable().await?;
                match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), keys)?)) {
                    Ok(result) => result.map(drop),
                    Err(_would_block) => Ok(()),
                }
            };
            let result = tokio::time::timeout_at(deadline, typed).await;
            *writer = None;
            return result.unwrap_or(Ok(())).map_err(gone);
        }
        *writer = None;
        Ok(())
    }

    /// Set the terminal's window size (`TIOCSWINSZ` on the master: the kernel sends SIGWINCH
    /// to the terminal's foreground process group). `Unsupported` for a pipe, `NotConnected`
    /// once the run is over.
    pub fn resize(&self, size: WindowSize) -> io::Result<()> {
        if !self.0.terminal {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let master = self.0.master.lock().unwrap_or_else(|e| e.into_inner());
        match master.as_ref() {
            Some(master) => set_size(master.get_ref(), size),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// The run is over: drop the embedder's end (a later write is `NotConnected`).
    pub fn shut(&self) {
        self.0
            .master
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Ok(mut writer) = self.0.writer.try_lock() {
            writer.take();
        } else {
            // A write is under way; it ends with the run (the descriptor reports the end).
            let state = self.0.clone();
            tokio::spawn(async move {
                state.writer.lock().await.take();
            });
        }
    }
}

/// A write error that means no process of the run holds the input any more (a pipe without
/// reader, a terminal without slave): `BrokenPipe`.
fn gone(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EPIPE) | Some(libc::EIO) => io::ErrorKind::BrokenPipe.into(),
        _ => e,
    }
}

/// The run's output from a terminal's master: `EIO` (every slave closed: the run is over) is
/// the end.
pub(crate) struct MasterReader(Arc<AsyncFd<OwnedFd>>);

impl AsyncRead for MasterReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *unfilled)?)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Poll::Ready(Ok(())),
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => {}
            }
        }
    }
}
