"""Drives `confine mcp` with the official MCP Python SDK (`mcp`, pinned in requirements.txt),
over Streamable HTTP (`streamablehttp_client`, with the bearer token) or over stdio
(`stdio_client`), so that a second client nobody here wrote is the judge.

Usage:
    client.py http URL TOKEN MARKER
    client.py stdio CONFINE_BINARY ROOT MARKER   (the server is started with --allow-commands)

Checks: initialize, tools/list, a read_file call, run_command's progress (the progress
callback is called before the result), and a cancellation of a running run_command whose
command line holds MARKER (the caller, tests/serving/http_interop.rs, checks with the process census
that nothing of it is left) while the session still answers; over HTTP also that a
connection without the token is refused. Prints a JSON summary on stdout; exits 1 if any
check failed, 2 on bad usage.
"""

import json
import os
import sys

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamablehttp_client

checks = []


def check(name, ok, detail=None):
    entry = {"name": name, "ok": bool(ok)}
    if not ok:
        entry["detail"] = repr(detail)[:2000]
    checks.append(entry)


def marked(marker: str):
    """Processes whose command line holds the marker."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if f"{marker}-run".encode() in f.read():
                    found.append(int(name))
        except OSError:
            pass
    return found


async def until_none_marked(marker: str, limit_s: float) -> bool:
    with anyio.move_on_after(limit_s):
        while marked(marker):
            await anyio.sleep(0.02)
        return True
    return False


async def exercise(session: ClientSession, marker: str):
    await session.initialize()
    listed = await session.list_tools()
    names = [t.name for t in listed.tools]
    check("tools/list names read_file and run_command",
          "read_file" in names and "run_command" in names, names)

    read = await session.call_tool("read_file", {"path": "a.txt"})
    check("read_file answers the content",
          (read.structuredContent or {}).get("content") == "alpha\n", read)
    check("read_file is not an error", read.isError is False, read)

    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    run = await session.call_tool(
        "run_command", {"command": "echo first; sleep 2.5; echo second"},
        progress_callback=on_progress)
    check("run_command exits 0", (run.structuredContent or {}).get("exitCode") == 0, run)
    check("the progress callback was called", len(progress) >= 1, progress)

    # Cancel: the SDK gives no request handle, so the call runs in a task that is cancelled,
    # and the cancellation is announced as the protocol says, with the request's id (the
    # SDK numbers requests from 0 in order: this is the fifth).
    request_id = 4
    async with anyio.create_task_group() as group:
        async def long_call():
            await session.call_tool("run_command", {"command": f"sleep 60; : {marker}-run"})

        group.start_soon(long_call)
        await anyio.sleep(1.5)
        check("the command runs before the cancellation", len(marked(marker)) >= 1, "not started")
        await session.send_notification(types.ClientNotification(types.CancelledNotification(
            method="notifications/cancelled",
            params=types.CancelledNotificationParams(requestId=request_id, reason="stop"))))
        group.cancel_scope.cancel()
    check("nothing of the cancelled command is left, the session still open",
          await until_none_marked(marker, 5), marked(marker))
    after = await session.call_tool("read_file", {"path": "a.txt"})
    check("the session answers after a cancellation", after.isError is False, after)


async def over_http(url: str, token: str, marker: str):
    refused = None
    try:
        with anyio.fail_after(20):
            async with streamablehttp_client(url) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
    except BaseException as error:  # the SDK raises an exception group
        refused = repr(error)
    check("without the token the connection is refused", refused is not None, "connected")
    check("the refusal is 401", refused is not None and "401" in refused, refused)

    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await exercise(session, marker)


async def over_stdio(binary: str, root: str, marker: str):
    params = StdioServerParameters(
        command=binary, args=["mcp", "--root", root, "--allow-commands"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, marker)


def main():
    args = sys.argv[1:]
    if len(args) == 4 and args[0] == "http":
        runner = lambda: over_http(args[1], args[2], args[3])
    elif len(args) == 4 and args[0] == "stdio":
        runner = lambda: over_stdio(args[1], args[2], args[3])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    async def bounded():
        with anyio.fail_after(120):
            await runner()

    try:
        anyio.run(bounded)
    except BaseException as error:
        check("the client ran to its end", False, error)
    failed = [c for c in checks if not c["ok"]]
    print(json.dumps({"ok": not failed, "passed": len(checks) - len(failed), "failed": failed},
                     indent=2))
    sys.exit(0 if not failed else 1)


if __name__ == "__main__":
    main()
