#!/bin/sh
# One `npm install` of a small real package through `run_command` of `confine call`, from a
# fresh cache and a fresh node_modules, HOME and cache inside the workspace; the network
# policy's cost is this beside the same install without the policy (docs/PERFORMANCE.md,
# "Network policy").
#
#   npm_install.sh CONFINE WORKSPACE MODE [PACKAGE]
#
# MODE: `plain` (no policy), `policy` (`--allow-net @npm`), `sandbox` (`--sandbox --allow-net
# @npm`). PACKAGE defaults to yargs@17.7.2 (16 packages installed). Exits non-zero, saying
# why, unless the install succeeded and left the package in node_modules.
#
#   npm_install.sh pairs N CONFINE WORKSPACE MODE [PACKAGE]
#
# runs N pairs, MODE then `plain` in one pair and `plain` first in the next, and prints each
# run's wall time and the install's own `durationMs` (the record's: the run inside the tool,
# without the server's start, which under `@npm` asks npm for its registry), and each pair's
# ratios MODE/plain (the median of those is the figure).
#
# A single install prints its record's `durationMs` on standard output.
#
# Where the host's Node.js needs `NODE_EXTRA_CA_CERTS` (a TLS-intercepting network), the file
# is copied into the workspace and named in the command, the same for every mode (the tool
# passes no such variable from the server's environment).
set -eu

if [ "${1:-}" = pairs ]; then
    n=$2 confine=$3 ws=$4 mode=$5 package=${6:-yargs@17.7.2}
    now() { date +%s%N; }
    # `one MODE`: "WALL_MS DURATION_MS" of one install.
    one() {
        t0=$(now)
        d=$("$0" "$confine" "$ws" "$1" "$package")
        echo "$(( ($(now) - t0) / 1000000 )) $d"
    }
    i=0
    while [ "$i" -lt "$n" ]; do
        if [ $((i % 2)) -eq 0 ]; then a=$(one "$mode"); b=$(one plain); else b=$(one plain); a=$(one "$mode"); fi
        echo "$a $b" | awk -v i="$i" -v m="$mode" '{printf "pair %d: %s wall %d ms (run %d ms), plain wall %d ms (run %d ms), ratio wall %.3f, run %.3f\n", i, m, $1, $2, $3, $4, $1/$3, $2/$4}'
        i=$((i + 1))
    done
    exit 0
fi

confine=$1 ws=$2 mode=$3 package=${4:-yargs@17.7.2}
case $mode in
    plain) flags= ;;
    policy) flags="--allow-net @npm" ;;
    sandbox) flags="--sandbox --allow-net @npm" ;;
    *) echo "unknown mode: $mode" >&2; exit 2 ;;
esac
mkdir -p "$ws"
rm -rf "$ws/node_modules" "$ws/package.json" "$ws/package-lock.json" "$ws/.home" "$ws/.npm-cache"
ca=
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    cp "$NODE_EXTRA_CA_CERTS" "$ws/.ca.pem"
    ca='NODE_EXTRA_CA_CERTS=$PWD/.ca.pem '
fi
command="${ca}HOME=\$PWD/.home npm_config_cache=\$PWD/.npm-cache npm install --no-audit --no-fund --no-update-notifier $package"
line=$(printf '{"id":1,"name":"run_command","arguments":{"command":"%s","timeoutMs":120000}}' "$command")
# shellcheck disable=SC2086 # $flags is two or three words on purpose.
out=$(printf '%s\n' "$line" | "$confine" call --root "$ws" --allow-commands \
    --command-max-timeout-ms 120000 $flags)
case $out in
    *'"exitCode":0'*) ;;
    *) echo "the install failed ($mode): $out" >&2; exit 1 ;;
esac
# Under the policy the record names the proxy's decisions: the install went through it.
case $mode:$out in
    plain:*'"network":'*) echo "a network record without the policy: $out" >&2; exit 1 ;;
    plain:*) ;;
    *:*'"network":[{'*'"allowed":true'*) ;;
    *) echo "no allowed connection in the record ($mode): $out" >&2; exit 1 ;;
esac
name=${package%@*}
[ -f "$ws/node_modules/$name/package.json" ] || { echo "no $name in node_modules ($mode)" >&2; exit 1; }
duration=${out##*'"durationMs":'}
echo "${duration%%[!0-9]*}"
