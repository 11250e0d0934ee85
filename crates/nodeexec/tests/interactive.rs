//! Interactive runs: stdin as a pipe the embedder writes, or a pseudo-terminal of the run's
//! own (`Command::stdin`), in every containment mode this machine offers.

use std::time::Duration;

use confine_nodeexec::{Command, Containment, Input, Outcome, Stdin, Unread, WindowSize};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

mod support;
use support::{MODES, command, marker, offered};

fn soon(ms: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(ms)
}

/// `sh -c script` with `stdin` in `mode`, started; its input and the task that waits for it.
async fn start(
    script: &str,
    stdin: Stdin,
    mode: Containment,
) -> (Input, JoinHandle<Result<Outcome, confine_nodeexec::Error>>) {
    start_with(script, stdin, mode, &Unread::new(1 << 16)).await
}

/// As [`start`], the output also going to `unread`.
async fn start_with(
    script: &str,
    stdin: Stdin,
    mode: Containment,
    unread: &Unread,
) -> (Input, JoinHandle<Result<Outcome, confine_nodeexec::Error>>) {
    let mut cmd: Command = command("/bin/sh");
    cmd.unread(unread);
    cmd.arg("-c")
        .arg(script)
        .current_dir("/")
        .containment(mode)
        .stdin(stdin)
        .timeout(Duration::from_secs(20));
    let started = cmd.start(&CancellationToken::new()).await.expect("starts");
    let input = started.input().expect("an input");
    let task = tokio::spawn(async move { started.wait(&CancellationToken::new()).await });
    (input, task)
}

async fn finish(task: JoinHandle<Result<Outcome, confine_nodeexec::Error>>) -> Outcome {
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("ends")
        .expect("joins")
        .expect("runs")
}

/// Read `unread` until what was read holds `needle` (at most 10 s); answers all of it.
async fn until(unread: &Unread, seen: &mut String, needle: &str) {
    let deadline = soon(10_000);
    let mut news = unread.subscribe();
    loop {
        seen.push_str(&unread.take(false).stdout);
        if seen.contains(needle) {
            return;
        }
        assert!(
            tokio::time::timeout_at(deadline, news.changed())
                .await
                .is_ok(),
            "{needle:?} never came: {seen:?}"
        );
    }
}

const TERMINAL: Stdin = Stdin::Terminal(WindowSize::new(80, 24));

#[tokio::test]
async fn a_pipe_answers_a_prompt_and_is_no_terminal() {
    for mode in offered(MODES, "a_pipe_answers_a_prompt_and_is_no_terminal").await {
        let (input, task) = start(
            "read x; echo got $x; test -t 0 && echo tty || echo notty",
            Stdin::Pipe,
            mode,
        )
        .await;
        assert!(!input.is_terminal());
        assert_eq!(input.write(b"hello\n", soon(5000)).await.unwrap(), 6);
        let out = finish(task).await;
        assert_eq!(out.stdout.text, "got hello\nnotty\n", "{mode:?}");
        // The run is over: the input is shut.
        let err = input.write(b"x", soon(100)).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
    }
}

#[tokio::test]
async fn closing_a_pipe_ends_cat_with_its_output() {
    let (input, task) = start("cat; echo done", Stdin::Pipe, Containment::Cgroup).await;
    input.write(b"one\ntwo", soon(5000)).await.unwrap();
    input.close(soon(1000)).await.unwrap();
    assert!(input.is_closed());
    let err = input.write(b"x", soon(100)).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
    let out = finish(task).await;
    assert_eq!(out.stdout.text, "one\ntwodone\n");
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test]
async fn a_terminal_is_stdin_stdout_stderr_and_the_controlling_terminal() {
    for mode in offered(MODES, "a_terminal_is_the_controlling_terminal").await {
        // `/dev/tty` opens only where the session has a controlling terminal; `ps -o tty=`
        // would need procps. The shell reads one line so the output is read before it ends.
        let script = "test -t 0 && test -t 1 && test -t 2 && echo all-tty; \
                      stty size; (exec 3<>/dev/tty && echo ctty-ok) 2>/dev/null; \
                      echo err >&2; read line; echo got:$line";
        let (input, task) = start(script, TERMINAL, mode).await;
        assert!(input.is_terminal());
        input.write(b"abc\n", soon(5000)).await.unwrap();
        let out = finish(task).await;
        let text = out.stdout.text;
        assert!(text.contains("all-tty\r\n"), "{mode:?}: {text:?}");
        assert!(text.contains("24 80\r\n"), "{mode:?}: {text:?}");
        assert!(text.contains("ctty-ok\r\n"), "{mode:?}: {text:?}");
        // stderr is the same stream; the typed line is echoed.
        assert!(text.contains("err\r\n"), "{mode:?}: {text:?}");
        assert!(text.contains("abc\r\n"), "{mode:?}: {text:?}");
        assert!(text.contains("got:abc"), "{mode:?}: {text:?}");
        assert_eq!(out.stderr.text, "");
    }
}

#[tokio::test]
async fn an_ordinary_run_has_no_controlling_terminal() {
    // The twin of the test above: the same check with stdin on the null device fails.
    let mut cmd = command("/bin/sh");
    cmd.arg("-c")
        .arg("(exec 3<>/dev/tty && echo ctty-ok) 2>/dev/null || echo no-ctty")
        .current_dir("/");
    let out = support::run(cmd).await.unwrap();
    assert_eq!(out.stdout.text, "no-ctty\n");
}

#[tokio::test]
async fn resize_and_ctrl_c_reach_the_foreground_program() {
    // A shell reading commands: `size` prints the terminal's size, `spin` runs a busy loop.
    let script = "while read line; do \
                    case $line in \
                      size) stty size;; \
                      spin) sh -c 'while :; do :; done'; echo spin-ended;; \
                      *) echo line:$line;; \
                    esac; \
                  done";
    let unread = Unread::new(1 << 16);
    let (input, task) = start_with(script, TERMINAL, Containment::Cgroup, &unread).await;
    let mut seen = String::new();
    input.write(b"size\n", soon(5000)).await.unwrap();
    until(&unread, &mut seen, "24 80\r\n").await;
    input.resize(WindowSize::new(100, 30)).unwrap();
    input.write(b"size\n", soon(5000)).await.unwrap();
    until(&unread, &mut seen, "30 100\r\n").await;
    input.write(b"spin\n", soon(5000)).await.unwrap();
    until(&unread, &mut seen, "spin\r\n").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Ctrl-C: the line discipline sends SIGINT to the terminal's foreground process group,
    // the shell's (it is the session leader) with the spinning child in it: both die of it.
    input.write(b"\x03", soon(5000)).await.unwrap();
    let out = finish(task).await;
    seen.push_str(&unread.take(true).stdout);
    assert!(seen.contains("^C"), "{seen:?}");
    assert!(!seen.contains("spin-ended"), "{seen:?}");
    assert_eq!(out.signal, Some(libc::SIGINT), "{seen:?}");
}

#[tokio::test]
async fn closing_a_terminal_types_end_of_file() {
    let (input, task) = start("cat; echo cat-ended", TERMINAL, Containment::Cgroup).await;
    // An unfinished line: the first Ctrl-D hands it over, the second ends cat.
    input.write(b"partial", soon(5000)).await.unwrap();
    input.close(soon(1000)).await.unwrap();
    let out = finish(task).await;
    assert!(
        out.stdout.text.contains("cat-ended"),
        "{:?}",
        out.stdout.text
    );
    assert_eq!(out.exit_code, Some(0));
}

#[tokio::test]
async fn a_write_the_program_never_reads_is_bounded() {
    for stdin in [Stdin::Pipe, TERMINAL] {
        let m = marker();
        let (input, task) = start(&format!("sleep 30 # {m}"), stdin, Containment::Cgroup).await;
        let big = vec![b'x'; 4 << 20];
        let began = std::time::Instant::now();
        let written = input.write(&big, soon(300)).await.unwrap();
        assert!(written < big.len(), "{stdin:?}: {written}");
        // Generous: the bound is 300 ms.
        assert!(began.elapsed() < Duration::from_secs(10), "{stdin:?}");
        task.abort();
        let _ = task.await;
        testkit::census::check(&m, Duration::from_secs(5)).unwrap();
    }
}
