// Measures `confine mcp` over Streamable HTTP beside the same server over stdio, both driven
// by the official TypeScript SDK client doing the same call: `read_file` of one 1 KiB file.
//
// Usage: node bench_http.mjs <confine binary> [calls=2000] [rounds=3]
// (an optimized binary: `cargo build --profile bench --bin confine`; see docs/PERFORMANCE.md)
//
// For each transport: a warm-up, then `calls` calls one at a time (calls/s as an agent makes
// them), and the server's own CPU time per call (utime + stime from /proc/<pid>/stat, which
// no client overhead inflates). The two are measured in alternation, `rounds` times each, a
// fresh server each round; the median round is reported (its CPU split into user and kernel
// time too). Prints JSON, with the ratios.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const binary = process.argv[2];
const calls = Number(process.argv[3] ?? 2000);
const rounds = Number(process.argv[4] ?? 3);
if (!binary || !Number.isInteger(calls) || calls < 1 || !Number.isInteger(rounds) || rounds < 1) {
  console.error('usage: node bench_http.mjs <confine binary> [calls=2000] [rounds=3]');
  process.exit(2);
}

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confine-bench-http-')));
fs.writeFileSync(path.join(root, 'a.txt'), 'x'.repeat(1023) + '\n');
const token = 'bench-token-0123456789abcdef0123456789abcdef';
const ticks = 100; // USER_HZ

// [user, system] CPU seconds of the process (all its threads).
function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [Number(fields[11]) / ticks, Number(fields[12]) / ticks];
}

// `periodMillis`: start the calls at that mean interval, in milliseconds (0: each as soon as
// the last is answered).
async function measure(client, pid, periodMillis = 0) {
  for (let i = 0; i < 100; i++) await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
  const cpu0 = cpuSeconds(pid);
  const t0 = process.hrtime.bigint();
  const start = Date.now();
  for (let i = 0; i < calls; i++) {
    const r = await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    if (r.isError) throw new Error(JSON.stringify(r));
    // Call i + 1 is due at start + (i + 1) periods: a timer that fires late is made up by the
    // next wait, so the mean pace is the one asked for (rounded down: never slower).
    const rest = start + (i + 1) * periodMillis - Date.now();
    if (rest >= 1) await new Promise((resolve) => setTimeout(resolve, Math.floor(rest)));
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const [user, system] = cpuSeconds(pid).map((x, i) => x - cpu0[i]);
  const micros = (s) => (s / calls) * 1e6;
  return {
    callsPerSecond: calls / seconds,
    cpuMicrosPerCall: micros(user + system),
    userMicrosPerCall: micros(user),
    systemMicrosPerCall: micros(system),
  };
}

async function overStdio(periodMillis = 0) {
  const transport = new StdioClientTransport({ command: binary, args: ['mcp', '--root', root], stderr: 'ignore' });
  const client = new Client({ name: 'bench-http', version: '0' });
  await client.connect(transport);
  const result = await measure(client, transport.pid, periodMillis);
  await client.close();
  return result;
}

async function overHttp() {
  const child = spawn(binary, ['mcp', '--root', root, '--http', '127.0.0.1:0'], {
    env: { ...process.env, CONFINE_HTTP_TOKEN: token },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  // Whatever fails below, the server is ended: a failed run leaves no server behind.
  try {
    const url = await new Promise((resolve, reject) => {
      let seen = '';
      const timer = setTimeout(() => reject(new Error(`no listening line: ${seen}`)), 20000);
      child.stderr.on('data', (chunk) => {
        seen += chunk;
        // The whole line: a chunk may end inside the port.
        const m = /listening on (http:\/\/\S+\/mcp)\n/.exec(seen);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const client = new Client({ name: 'bench-http', version: '0' });
    await client.connect(transport);
    const result = await measure(client, child.pid);
    await client.close();
    return result;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const medianRound = (list) =>
  [...list].sort((a, b) => a.cpuMicrosPerCall - b.cpuMicrosPerCall)[Math.floor(list.length / 2)];
// `stdioPaced`: stdio again, its calls started at HTTP's pace (the mean call time of the
// round just measured over HTTP), so that both servers idle alike between calls.
const runs = { stdio: [], http: [], stdioPaced: [] };
for (let i = 0; i < rounds; i++) {
  runs.stdio.push(await overStdio());
  const http = await overHttp();
  runs.http.push(http);
  runs.stdioPaced.push(await overStdio(1000 / http.callsPerSecond));
}
const summary = {};
for (const [name, list] of Object.entries(runs)) {
  summary[name] = {
    callsPerSecond: Math.round(median(list.map((r) => r.callsPerSecond))),
    cpuMicrosPerCall: Math.round(median(list.map((r) => r.cpuMicrosPerCall))),
    // The split of the median round by CPU time (user, kernel).
    ...(({ userMicrosPerCall, systemMicrosPerCall }) => ({
      userMicrosPerCall: Math.round(userMicrosPerCall),
      systemMicrosPerCall: Math.round(systemMicrosPerCall),
    }))(medianRound(list)),
  };
}
summary.httpCpuPerCallOverStdio = +(summary.http.cpuMicrosPerCall / summary.stdio.cpuMicrosPerCall).toFixed(2);
summary.httpCpuPerCallOverPacedStdio = +(summary.http.cpuMicrosPerCall / summary.stdioPaced.cpuMicrosPerCall).toFixed(2);
summary.httpCallsPerSecondOverStdio = +(summary.http.callsPerSecond / summary.stdio.callsPerSecond).toFixed(2);
summary.calls = calls;
summary.rounds = rounds;
summary.loadAverage = os.loadavg().map((x) => +x.toFixed(2));
fs.rmSync(root, { recursive: true, force: true });
console.log(JSON.stringify(summary, null, 2));
