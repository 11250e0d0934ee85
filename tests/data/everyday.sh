# The everyday battery: what an agent runs all day. One line `name=status` per item, in order;
# each item runs in a subshell of its own in the current directory (the workspace). Needs
# EXPECTED_ID (`name/email` of the git identity) and ORIGIN (a local repository to clone).
# Sourced by tests/everyday.rs (through `confine call`) and by the peers' bench
# (bench/peers.sh), so every system runs the same items.
item() { name=$1; shift; ( "$@" ) >/dev/null 2>e.err; r=$?; echo "$name=$r"; [ $r = 0 ] || tail -5 e.err | sed "s/^/#$name /" >&2; }
git_work() {
  git init -q repo && cd repo && echo one > a && git add a && git commit -qm one &&
  git branch topic && echo two >> a && git diff --quiet; [ $? = 1 ] && git stash -q &&
  git stash pop -q && git commit -qam two &&
  [ "$(git log -1 --format=%an/%ae)" = "$EXPECTED_ID" ]
}
git_clone() { git clone -q "$ORIGIN" copy && [ -f copy/README ]; }
chmod_run() { printf '#!/bin/sh\necho ran\n' > s.sh && chmod +x s.sh && [ "$(./s.sh)" = ran ]; }
touch_make() {
  mkdir mk && cd mk && echo x > in.txt && touch -d '2001-02-03 04:05' in.txt &&
  printf 'out.txt: in.txt\n\tcp in.txt out.txt\n' > Makefile && make -s &&
  [ "$(stat -c %Y in.txt)" = "$(date -d '2001-02-03 04:05' +%s)" ] && [ -f out.txt ]
}
tar_cp() {
  mkdir src && echo x > src/f && chmod 750 src/f && touch -d '2001-02-03' src/f &&
  tar cf t.tar src && mkdir out && tar xf t.tar -C out && cp -a src copied &&
  [ "$(stat -c %a/%Y out/src/f)" = "$(stat -c %a/%Y src/f)" ] &&
  [ "$(stat -c %a/%Y copied/f)" = "$(stat -c %a/%Y src/f)" ]
}
links() { echo x > target && ln target hard && ln -s target soft && [ "$(cat soft)" = x ]; }
venv() { python3 -m venv --without-pip v && v/bin/python -c 'import sys; print(sys.prefix)'; }
shm() { python3 -c 'import multiprocessing as m; assert m.Pool(2).map(abs, [-1, -2]) == [1, 2]'; }
sqlite() { python3 -c 'import sqlite3; c = sqlite3.connect("d.db"); c.execute("create table t(x)"); c.commit()'; }
tmp() { f=$(mktemp /tmp/everyday.XXXXXX) && echo x > "$f" && [ "$(cat "$f")" = x ] && rm "$f"; }
c_build() { printf 'int main(void){return 0;}\n' > m.c && cc -o m m.c && ./m; }
npm_work() {
  mkdir pkg && cd pkg && npm init -y >/dev/null &&
  node -e 'const p=require("./package.json"); p.scripts={test:"node -e 0"}; require("fs").writeFileSync("package.json", JSON.stringify(p))' &&
  npm test
}
http_server() {
  echo served > page.txt
  python3 -u -m http.server 0 --bind 127.0.0.1 > srv.log 2>&1 & pid=$!
  i=0; while [ $i -lt 200 ] && ! grep -q ' port ' srv.log; do sleep 0.05; i=$((i+1)); done
  port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' srv.log | head -n 1)
  python3 -c 'import sys, urllib.request as u; r = u.build_opener(u.ProxyHandler({})).open("http://127.0.0.1:" + sys.argv[1] + "/page.txt"); assert r.read() == b"served\n"' "$port"
  r=$?; kill $pid; wait $pid; return $r
}
item git git_work
item clone git_clone
item chmod chmod_run
item make touch_make
item tar tar_cp
item ln links
item venv venv
item shm shm
item sqlite sqlite
item tmp tmp
item cc c_build
cargo_work() {
  # A workspace of its own, so that cargo never looks above the test's directory.
  mkdir cw && cd cw && printf '[workspace]\nresolver = "3"\n' > Cargo.toml &&
  cargo new -q --offline --vcs none cr && cd cr && cargo build -q --offline &&
  cargo test -q --offline && [ -x ../target/debug/cr ]
}
pip_wheel() {
  python3 - <<'PY' &&
import base64, hashlib, zipfile
files = {"tinypkg/__init__.py": b"VALUE = 42\n",
         "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
         "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
record = [p + ",sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
          + "," + str(len(d)) for p, d in files.items()]
with zipfile.ZipFile("tinypkg-1.0-py3-none-any.whl", "w") as z:
    for p, d in files.items():
        z.writestr(p, d)
    z.writestr("tinypkg-1.0.dist-info/RECORD", "\n".join(record + ["tinypkg-1.0.dist-info/RECORD,,"]) + "\n")
PY
  python3 -m venv pv && pv/bin/pip install -q --no-index tinypkg-1.0-py3-none-any.whl &&
  [ "$(pv/bin/python -c 'import tinypkg; print(tinypkg.VALUE)')" = 42 ]
}
npm_tarball() {
  mkdir lib app && cd lib && npm init -y >/dev/null && echo 'module.exports = 7' > index.js &&
  npm pack -q >/dev/null && cd ../app && npm init -y >/dev/null &&
  npm install --offline --no-audit --no-fund ../lib/lib-1.0.0.tgz >/dev/null &&
  [ "$(node -e 'console.log(require("lib"))')" = 7 ]
}
item npm npm_work
item pip pip_wheel
item npmtgz npm_tarball
item http http_server
item cargo cargo_work
