"""Drives the container image's `confine mcp --http` with the official MCP Python SDK (`mcp`,
pinned in requirements.txt), as an agent's host in a cluster would: tests/environments/image.rs runs it in
a network namespace of its own, the server in another.

Usage:
    image_client.py BASE_URL TOKEN      (BASE_URL: http://ADDR:PORT, no path)

Checks: GET /healthz answers 200 `ok` without the token; /mcp and POST /healthz are 401
without it; with it: initialize (the server's name), tools/list (read_file and write_file
offered), write_file then read_file of the same file, at the root and beneath a subdirectory
(two checks), node_process running Node.js, and a path outside the workspace refused. Prints a JSON summary on stdout; exits 1
if any check failed, 2 on bad usage.
"""

import json
import sys
import urllib.error
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

checks = []


def check(name, ok, detail=None):
    entry = {"name": name, "ok": bool(ok)}
    if not ok:
        entry["detail"] = repr(detail)[:2000]
    checks.append(entry)


def plain(method: str, url: str, headers=None):
    """Status and body of one request, errors included."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def record(result):
    """The JSON record of a tool result (its structured content)."""
    return result.structuredContent or json.loads(result.content[0].text)


async def main(base: str, token: str):
    status, body = plain("GET", f"{base}/healthz")
    check("healthz without the token is 200 ok", (status, body) == (200, "ok\n"), (status, body))
    status, _ = plain("POST", f"{base}/healthz")
    check("POST /healthz without the token is 401", status == 401, status)
    status, _ = plain("POST", f"{base}/mcp", {"Content-Type": "application/json"})
    check("/mcp without the token is 401", status == 401, status)

    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(f"{base}/mcp", headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check("initialize names the server", init.serverInfo.name.startswith("confine"),
                  init.serverInfo)
            tools = {t.name for t in (await session.list_tools()).tools}
            check("tools/list offers read_file and write_file",
                  {"read_file", "write_file"} <= tools, sorted(tools))
            wrote = await session.call_tool(
                "write_file", {"path": "hello.txt", "content": "from the image\n"})
            check("write_file succeeds", not wrote.isError, wrote)
            read = await session.call_tool("read_file", {"path": "hello.txt"})
            check("read_file reads it back",
                  not read.isError and record(read).get("content") == "from the image\n", read)
            wrote = await session.call_tool(
                "write_file", {"path": "notes/deep.txt", "content": "beneath\n"})
            check("write_file beneath a new subdirectory succeeds", not wrote.isError, wrote)
            read = await session.call_tool("read_file", {"path": "notes/deep.txt"})
            check("read_file beneath a subdirectory",
                  not read.isError and record(read).get("content") == "beneath\n", read)
            ran = await session.call_tool("node_process", {"source": "console.log(6 * 7)"})
            check("node_process runs Node.js in the image",
                  not ran.isError and record(ran).get("stdout") == "42\n", ran)
            outside = await session.call_tool("read_file", {"path": "../etc/passwd"})
            check("a path outside the workspace is refused", outside.isError, outside)

    failed = [c for c in checks if not c["ok"]]
    print(json.dumps({"checks": checks, "failed": len(failed)}))
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2]))
