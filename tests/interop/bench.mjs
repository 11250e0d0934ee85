// Measures `confine mcp` beside the MCP reference filesystem server
// (@modelcontextprotocol/server-filesystem), both driven by the same official TypeScript SDK
// client over stdio doing the equivalent call: confine's `read_file` and the reference
// server's `read_text_file` of one 1 KiB file.
//
// Usage: node bench.mjs <confine binary> [calls=2000] [rounds=3]
// (build the binary with `cargo build --release` first; see docs/PERFORMANCE.md)
//
// For each server: a warm-up, then `calls` calls one at a time (calls/s as an agent makes
// them), then `calls` calls with 32 in flight (throughput), then the server's peak resident
// memory (VmHWM from /proc/<pid>/status) over the whole run, and the server's own CPU time
// per call (utime + stime from /proc/<pid>/stat, which no client overhead inflates). The two
// servers are measured in alternation, `rounds` times each, each round a fresh server; the
// median round is reported, with the load average, since a busy machine skews calls/s.
// Prints JSON.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const binary = process.argv[2];
const calls = Number(process.argv[3] ?? 2000);
const rounds = Number(process.argv[4] ?? 3);
if (!binary || !Number.isInteger(calls) || calls < 1 || !Number.isInteger(rounds) || rounds < 1) {
  console.error('usage: node bench.mjs <confine binary> [calls=2000] [rounds=3]');
  process.exit(2);
}

const require = createRequire(import.meta.url);
const referenceEntry = path.join(
  path.dirname(require.resolve('@modelcontextprotocol/server-filesystem/package.json')),
  'dist/index.js',
);
const referenceVersion = require('@modelcontextprotocol/server-filesystem/package.json').version;

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confine-bench-')));
const content = 'x'.repeat(1023) + '\n';
fs.writeFileSync(path.join(root, 'bench.txt'), content);

/** User + system CPU time of a process, in milliseconds (from /proc/<pid>/stat). */
function cpuMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticksPerSecond = 100; // USER_HZ on Linux
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

function status(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key) => Number(text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'))?.[1] ?? NaN);
  return { vmHWMKiB: kib('VmHWM'), vmRSSKiB: kib('VmRSS') };
}

async function measure(name, command, args, toolName, toolArgs, check) {
  const transport = new StdioClientTransport({ command, args, stderr: 'ignore' });
  const client = new Client({ name: 'confine-bench', version: '0.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  const call = async () => {
    const result = await client.callTool({ name: toolName, arguments: toolArgs });
    if (result.isError || !check(result)) throw new Error(`${name}: unexpected result ${JSON.stringify(result)}`);
  };
  for (let i = 0; i < 100; i++) await call();
  const afterWarmup = status(pid);
  const cpuBefore = cpuMs(pid);

  let t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await call();
  const sequentialSeconds = Number(process.hrtime.bigint() - t0) / 1e9;

  const inFlight = 32;
  let next = 0;
  t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < calls) {
        next++;
        await call();
      }
    }),
  );
  const concurrentSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const end = status(pid);
  const serverCpuMs = cpuMs(pid) - cpuBefore;
  await client.close();
  return {
    server: name,
    calls,
    sequentialCallsPerSec: Math.round(calls / sequentialSeconds),
    concurrentCallsPerSec: Math.round(calls / concurrentSeconds),
    inFlight,
    serverCpuMicrosPerCall: Math.round((serverCpuMs * 1000) / (2 * calls)),
    peakRssKiB: end.vmHWMKiB,
    peakRssMiB: Number((end.vmHWMKiB / 1024).toFixed(2)),
    rssAfterWarmupKiB: afterWarmup.vmRSSKiB,
    rssAtEndKiB: end.vmRSSKiB,
  };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
function summarize(runs) {
  const out = { ...runs[0] };
  for (const key of Object.keys(out)) {
    if (typeof out[key] === 'number' && key !== 'calls' && key !== 'inFlight') out[key] = median(runs.map((r) => r[key]));
  }
  out.rounds = runs.length;
  return out;
}

try {
  const confineRuns = [];
  const referenceRuns = [];
  const loadBefore = os.loadavg()[0];
  for (let round = 0; round < rounds; round++) {
    confineRuns.push(
      await measure(
        'confine mcp',
        binary,
        ['mcp', '--root', root],
        'read_file',
        { path: 'bench.txt' },
        (r) => r.structuredContent?.content === content,
      ),
    );
    referenceRuns.push(
      await measure(
        `@modelcontextprotocol/server-filesystem ${referenceVersion}`,
        process.execPath,
        [referenceEntry, root],
        'read_text_file',
        { path: path.join(root, 'bench.txt') },
        (r) => r.content?.[0]?.text === content,
      ),
    );
  }
  const confine = summarize(confineRuns);
  const reference = summarize(referenceRuns);
  const ratio = (a, b) => Number((a / b).toFixed(2));
  console.log(
    JSON.stringify(
      {
        node: process.version,
        cpus: os.cpus().length,
        loadAverage1m: [Number(loadBefore.toFixed(2)), Number(os.loadavg()[0].toFixed(2))],
        confine,
        reference,
        ratios: {
          sequentialCallsPerSec: ratio(confine.sequentialCallsPerSec, reference.sequentialCallsPerSec),
          concurrentCallsPerSec: ratio(confine.concurrentCallsPerSec, reference.concurrentCallsPerSec),
          serverCpuPerCall: ratio(confine.serverCpuMicrosPerCall, reference.serverCpuMicrosPerCall),
          peakRss: ratio(confine.peakRssKiB, reference.peakRssKiB),
        },
        runs: { confine: confineRuns, reference: referenceRuns },
      },
      null,
      2,
    ),
  );
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
