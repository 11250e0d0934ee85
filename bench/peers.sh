#!/usr/bin/env bash
# The everyday battery (tests/data/everyday.sh) and a secrets probe under confine and two
# other agents' sandboxes, each with the same realistic fake home as HOME:
#
#   confine             confine call --allow-commands (its kernel sandbox is the default)
#   confine-no-sandbox  the same with --no-sandbox
#   codex               codex sandbox -P :workspace, the workspace as the working directory
#   srt                 Anthropic's sandbox runtime with the settings its README starts from
#                       (no network, writes in the working directory, reads everywhere)
#   srt-home-denied     the same with the whole home denied and the workspace allowed again
#
# The fake home is the one tests/commands/everyday.rs builds: a git identity with a credential helper
# and an insteadOf rule, ten secrets, a rustup-style toolchain (from the first rustc on
# PATH) and a crate in the cargo cache. Each system gets its own home and its own workspace
# holding a local repository `origin` to clone. The launching environment also holds
# AWS_SECRET_ACCESS_KEY=SECRET, probed with `env | grep`.
#
# Prints a summary table (items done, secrets kept) and a table per item, in markdown. A
# system that cannot run here is reported as "could not run: <reason>", never as passing.
# The battery is offline; the only network traffic is that of the package clients that
# `--install` runs.
#
# Usage: bench/peers.sh [--install] [--user NAME]
#   --install    npm-install the peers into $PEERS_DIR (default target/peers) and, through
#                apt-get, bubblewrap, socat and ripgrep where missing (best effort)
#   --user NAME  (as root) build the homes and workspaces as root, as tests/commands/everyday.rs does
#                for an ordinary user (the toolchain stays root's, the rest is NAME's), and
#                run every system as NAME through runuser; CONFINE and PEERS_DIR must be
#                readable by NAME
# Environment: CONFINE (default target/release/confine or target/debug/confine),
#   PEERS_DIR, PEERS_WORK (an empty directory for the homes and workspaces, outside any
#   repository and outside /tmp, kept afterwards; default a new one under /var/tmp, removed
#   at the end unless PEERS_KEEP=1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BATTERY_FILE=$ROOT/tests/data/everyday.sh
PEERS_DIR=${PEERS_DIR:-$ROOT/target/peers}
NAME="Ada Everyday"
EMAIL="ada@example.invalid"
SECRETS=(.ssh/id_rsa .aws/credentials .netrc .git-credentials .npmrc .config/gh/hosts.yml
  .bash_history .cargo/credentials.toml .kube/config .docker/config.json)
SYSTEMS=(confine confine-no-sandbox codex srt srt-home-denied)

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

install=0
user=""
while [ $# -gt 0 ]; do
  case $1 in
    --install) install=1 ;;
    --user) user=${2:?--user needs a name}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
AS=()
RUN_USER=$(id -un)
if [ -n "$user" ]; then
  [ "$(id -u)" = 0 ] || { echo "--user needs root" >&2; exit 2; }
  AS=(runuser -u "$user" --)
  RUN_USER=$user
fi

install_peers() {
  local missing=()
  mkdir -p "$PEERS_DIR"
  if ! npm install --prefix "$PEERS_DIR" --no-audit --no-fund \
    @openai/codex @anthropic-ai/sandbox-runtime >&2; then
    missing+=("@openai/codex @anthropic-ai/sandbox-runtime (npm install failed)")
  fi
  local pkg cmd
  for pair in bubblewrap:bwrap socat:socat ripgrep:rg; do
    pkg=${pair%%:*} cmd=${pair#*:}
    command -v "$cmd" >/dev/null && continue
    if [ "$(id -u)" = 0 ]; then
      apt-get install -y "$pkg" >&2 ||
        { apt-get update >&2 && apt-get install -y "$pkg" >&2; } ||
        missing+=("$pkg (apt-get failed)")
    else
      missing+=("$pkg (not root: apt-get not tried)")
    fi
  done
  for m in "${missing[@]}"; do echo "could not install: $m" >&2; done
}
[ $install = 1 ] && install_peers

if [ -z "${CONFINE:-}" ]; then
  for c in "$ROOT/target/release/confine" "$ROOT/target/debug/confine"; do
    [ -x "$c" ] && CONFINE=$c && break
  done
fi
CONFINE=${CONFINE:-}
CODEX=$PEERS_DIR/node_modules/.bin/codex
SRT=$PEERS_DIR/node_modules/.bin/srt
PY=$(command -v python3 || true)
[ -n "$PY" ] || { echo "python3 is needed to build the calls" >&2; exit 1; }

# Homes and workspaces: outside this repository (rustup and cargo would find its
# rust-toolchain.toml and manifest above them) and outside /tmp (codex refuses to lay out its
# helpers under a temporary directory).
if [ -n "${PEERS_WORK:-}" ]; then
  WORK=$PEERS_WORK
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d /var/tmp/confine-peers.XXXXXX)
  cleanup() { [ "${PEERS_KEEP:-0}" = 1 ] || rm -rf "$WORK"; }
  trap cleanup EXIT
fi
chmod 755 "$WORK"
OUT=$WORK/out
mkdir -p "$OUT"

# A realistic home in $1, as tests/commands/everyday.rs builds it.
make_home() {
  local h=$1 p
  mkdir -p "$h" && chmod 700 "$h"
  printf '[user]\n\tname = %s\n\temail = %s\n[credential]\n\thelper = store\n[url "https://example.invalid/"]\n\tinsteadOf = gh:\n' \
    "$NAME" "$EMAIL" >"$h/.gitconfig"
  local texts=(
    "-----BEGIN OPENSSH PRIVATE KEY-----"
    $'[default]\naws_secret_access_key = SECRET'
    "machine example.invalid login a password SECRET"
    "https://a:SECRET@example.invalid"
    "//registry.example.invalid/:_authToken=SECRET"
    $'example.invalid:\n  oauth_token: SECRET'
    "export TOKEN=SECRET"
    $'[registry]\ntoken = "SECRET"'
    $'users:\n- user:\n    token: SECRET'
    '{"auths": {"x": {"auth": "SECRET"}}}'
  )
  for i in "${!SECRETS[@]}"; do
    p=$h/${SECRETS[$i]}
    mkdir -p "$(dirname "$p")"
    printf '%s' "${texts[$i]}" >"$p"
  done
  mkdir -p "$h/.cargo/registry/src/idx/dep-1.0"
  echo "// dep" >"$h/.cargo/registry/src/idx/dep-1.0/lib.rs"
  [ -z "$user" ] || chown -R "$user:" "$h"
  # A rustup-style toolchain, the test's recipe: hard links (or copies) of the running
  # toolchain, rustup (or a proxy script of its shape) as ~/.cargo/bin/{cargo,rustc}.
  if command -v rustc >/dev/null; then
    sh -ec '
      sysroot=$(rustc --print sysroot)
      host=$(rustc -vV | sed -n "s/^host: //p")
      t="$1/.rustup/toolchains/t"
      mkdir -p "$t/lib/rustlib" "$1/.cargo/bin"
      copy() { cp -al "$@" 2>/dev/null || cp -a "$@"; }
      copy "$sysroot/bin" "$t/"
      for f in "$sysroot"/lib/*.so*; do copy "$f" "$t/lib/"; done
      copy "$sysroot/lib/rustlib/$host" "$t/lib/rustlib/"
      printf "version = \"12\"\ndefault_toolchain = \"t\"\nprofile = \"minimal\"\nauto_self_update = \"disable\"\n" \
        > "$1/.rustup/settings.toml"
      rustup=$(command -v rustup || true)
      for tool in cargo rustc; do
        if [ -n "$rustup" ]; then
          copy "$(readlink -f "$rustup")" "$1/.cargo/bin/$tool"
        else
          printf "#!/bin/sh\nexec \"\${RUSTUP_HOME:-\$HOME/.rustup}/toolchains/t/bin/%s\" \"\$@\"\n" \
            "$tool" > "$1/.cargo/bin/$tool"
          chmod +x "$1/.cargo/bin/$tool"
        fi
      done
    ' sh "$h"
  fi
  # Its files stay the running toolchain's; the user owns the directories that hold them.
  [ -z "$user" ] || chown "$user:" "$h/.cargo" "$h/.rustup" 2>/dev/null || true
}

# A workspace in $1 holding a local repository `origin` to clone.
make_workspace() {
  mkdir -p "$1/origin"
  echo origin >"$1/origin/README"
  (cd "$1/origin" && export GIT_CONFIG_GLOBAL=/dev/null &&
    git init -q && git add README &&
    git -c user.name=o -c user.email=o@example.invalid commit -qm origin)
  [ -z "$user" ] || chown -R "$user:" "$1"
}

probe_script() {
  local s=""
  for p in "${SECRETS[@]}"; do s+="cat \"\$HOME/$p\" >/dev/null 2>&1; echo $p=\$?"$'\n'; done
  s+=$'grep -q . /etc/shadow 2>/dev/null; echo /etc/shadow=$?\n'
  s+=$'ls /root >/dev/null 2>&1; echo /root=$?\n'
  s+=$'env | grep -q SECRET; echo env:AWS_SECRET_ACCESS_KEY=$?\n'
  printf '%s' "$s"
}
BATTERY=$(cat "$BATTERY_FILE")
PROBE=$(probe_script)

# run SYSTEM KIND SCRIPT: run SCRIPT under SYSTEM in its home and workspace; the
# `name=status` lines to $OUT/SYSTEM.KIND, stderr to $OUT/SYSTEM.KIND.err.
run() {
  local sys=$1 kind=$2 script=$3 home=$WORK/$1/home ws=$WORK/$1/ws
  local path=$home/.cargo/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
  local envs=(env -i "HOME=$home" "PATH=$path" "LANG=C.UTF-8" "USER=$RUN_USER"
    "AWS_SECRET_ACCESS_KEY=SECRET")
  local id="EXPECTED_ID=$NAME/$EMAIL" origin="ORIGIN=$ws/origin"
  local out=$OUT/$sys.$kind err=$OUT/$sys.$kind.err
  case $sys in
    confine | confine-no-sandbox)
      local flags=()
      [ "$sys" = confine-no-sandbox ] && flags+=(--no-sandbox)
      "$PY" -c 'import json, sys; print(json.dumps({"id": 1, "name": "run_command",
        "arguments": {"command": sys.argv[1], "timeoutMs": 120000}}))' "$script" |
        (cd "$ws" && timeout 600 "${AS[@]}" "${envs[@]}" "$CONFINE" call --root "$ws" --allow-commands \
          --command-max-timeout-ms 120000 --env "$id" --env "$origin" "${flags[@]}") \
          >"$out.json" 2>"$err" || true
      "$PY" -c 'import json, sys
try:
    c = json.load(open(sys.argv[1]))["content"]
except Exception as e:
    sys.exit("no record: %s" % e)
if not isinstance(c, dict) or "stdout" not in c:
    sys.exit("no output: %s" % json.dumps(c)[:300])
sys.stdout.write(c["stdout"]); sys.stderr.write(c.get("stderr", ""))' "$out.json" \
        >"$out" 2>>"$err" || true
      ;;
    codex)
      (cd "$ws" && timeout 600 "${AS[@]}" "${envs[@]}" "$id" "$origin" \
        "$CODEX" sandbox -P :workspace -C "$ws" -- sh -c "$script") >"$out" 2>"$err" || true
      ;;
    srt | srt-home-denied)
      (cd "$ws" && timeout 600 "${AS[@]}" "${envs[@]}" "$id" "$origin" \
        "$SRT" --settings "$WORK/$sys/settings.json" -c "$script") >"$out" 2>"$err" || true
      ;;
  esac
  # Keep the result lines alone (a system may print notices of its own).
  grep -E '^[A-Za-z0-9_./:-]+=[0-9]+$' "$out" >"$out.lines" || true
}

# Why SYSTEM cannot run here (empty if it can).
unavailable() {
  case $1 in
    confine | confine-no-sandbox)
      if [ -z "$CONFINE" ] || [ ! -x "$CONFINE" ]; then echo "no confine binary (set CONFINE)"; fi ;;
    codex) [ -x "$CODEX" ] || { echo "codex not installed (run with --install)"; return; } ;;
    srt | srt-home-denied)
      [ -x "$SRT" ] || { echo "srt not installed (run with --install)"; return; }
      for c in bwrap socat rg; do
        command -v $c >/dev/null || { echo "$c missing (srt needs it; run with --install)"; return; }
      done ;;
  esac
}

declare -A REASON
for sys in "${SYSTEMS[@]}"; do
  REASON[$sys]=$(unavailable "$sys")
  [ -z "${REASON[$sys]}" ] || continue
  make_home "$WORK/$sys/home"
  make_workspace "$WORK/$sys/ws"
  case $sys in
    # The starting settings of srt's README: no network, writes in the working directory.
    srt) printf '%s\n' '{"network": {"allowedDomains": [], "deniedDomains": []},' \
      ' "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}' \
      >"$WORK/$sys/settings.json" ;;
    # The README's workspace-only example, with the home as the denied region.
    srt-home-denied) printf '%s\n' '{"network": {"allowedDomains": [], "deniedDomains": []},' \
      ' "filesystem": {"denyRead": ["~"], "allowRead": ["."], "allowWrite": ["."], "denyWrite": []}}' \
      >"$WORK/$sys/settings.json" ;;
  esac
  echo "running $sys ..." >&2
  run "$sys" battery "$BATTERY"
  run "$sys" probe "$PROBE"
  if [ ! -s "$OUT/$sys.battery.lines" ] && [ ! -s "$OUT/$sys.probe.lines" ]; then
    REASON[$sys]=$(grep -v '^\s*$' "$OUT/$sys.battery.err" | tail -n 1 | cut -c1-160)
    REASON[$sys]=${REASON[$sys]:-no output}
  fi
done

ITEMS=$(sed -n 's/^item \([a-z]*\) .*/\1/p' "$BATTERY_FILE")
N=$(echo "$ITEMS" | wc -l)
PROBES=$(printf '%s\n' "$PROBE" | sed -n 's/.*echo \([^=]*\)=\$?$/\1/p')
M=$(echo "$PROBES" | wc -l)
# status SYSTEM NAME KIND: NAME's status in SYSTEM's KIND (battery or probe), or nothing.
status() {
  [ -f "$OUT/$1.$3.lines" ] || return 0
  sed -n "s|^$2=||p" "$OUT/$1.$3.lines" | head -n 1
}

echo "Everyday battery and secrets probe, $(date -u +%Y-%m-%d), as $RUN_USER"
echo
echo "| system | everyday items done (n/$N) | secrets kept (n/$M) |"
echo "|---|---|---|"
for sys in "${SYSTEMS[@]}"; do
  if [ -n "${REASON[$sys]}" ]; then
    echo "| $sys | could not run: ${REASON[$sys]//|/\\|} | could not run |"
    continue
  fi
  done_=0 kept=0
  for i in $ITEMS; do [ "$(status "$sys" "$i" battery)" = 0 ] && done_=$((done_ + 1)); done
  for p in $PROBES; do
    s=$(status "$sys" "$p" probe)
    [ -n "$s" ] && [ "$s" != 0 ] && kept=$((kept + 1))
  done
  echo "| $sys | $done_/$N | $kept/$M |"
done

echo
printf '| item |'; for sys in "${SYSTEMS[@]}"; do printf ' %s |' "$sys"; done; echo
printf '|---|'; for _ in "${SYSTEMS[@]}"; do printf -- '---|'; done; echo
for i in $ITEMS; do
  printf '| %s |' "$i"
  for sys in "${SYSTEMS[@]}"; do
    s=$(status "$sys" "$i" battery)
    if [ -n "${REASON[$sys]}" ]; then printf ' - |'
    elif [ "$s" = 0 ]; then printf ' done |'
    else printf ' FAILED (%s) |' "${s:-no line}"; fi
  done
  echo
done
for p in $PROBES; do
  printf '| %s |' "$p"
  for sys in "${SYSTEMS[@]}"; do
    s=$(status "$sys" "$p" probe)
    if [ -n "${REASON[$sys]}" ]; then printf ' - |'
    elif [ -z "$s" ]; then printf ' no line |'
    elif [ "$s" = 0 ]; then printf ' READ |'
    else printf ' kept |'; fi
  done
  echo
done

# The battery's own notes on what failed (the last lines of each failing item's stderr).
echo
echo "Failures, as each battery reported them:"
echo
echo '```'
for sys in "${SYSTEMS[@]}"; do
  [ -z "${REASON[$sys]}" ] || continue
  grep '^#' "$OUT/$sys.battery.err" 2>/dev/null | sed "s/^/$sys: /" | cut -c1-200 || true
done
echo '```'
