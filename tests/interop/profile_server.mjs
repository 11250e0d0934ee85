// Drives one `confine mcp` (stdio or Streamable HTTP) with the official TypeScript SDK client
// doing the bench's call (`read_file` of a 1 KiB file) and runs a profiler attached to the
// server's pid for the measured calls only (after 200 warm-up calls), so that the profile holds
// the server alone, neither its start nor the client.
//
// Usage: node profile_server.mjs <confine binary> <http|stdio> <calls> <output|-> "<profiler>"
// where the profiler is a command taking `-o OUTPUT -p PID` after its own arguments, ended by
// SIGINT: `perf record -e cpu-clock -F 1000 --call-graph dwarf,16384`, or `strace -c -f`.
// See docs/PERFORMANCE.md.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
const [binary, mode, callsS, perfOut, perfArgs] = process.argv.slice(2);
const calls = Number(callsS);
const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confine-prof-')));
fs.writeFileSync(path.join(root, 'a.txt'), 'x'.repeat(1023) + '\n');
const token = 'bench-token-0123456789abcdef0123456789abcdef';
let client, pid, child;
if (mode === 'http') {
  child = spawn(binary, ['mcp', '--root', root, '--http', '127.0.0.1:0'], { env: { ...process.env, CONFINE_HTTP_TOKEN: token }, stdio: ['ignore', 'ignore', 'pipe'] });
  const url = await new Promise((resolve) => { let seen = ''; child.stderr.on('data', (c) => { seen += c; const m = /listening on (http:\/\/\S+\/mcp)\n/.exec(seen); if (m) resolve(m[1]); }); });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  client = new Client({ name: 'p', version: '0' }); await client.connect(transport); pid = child.pid;
} else {
  const transport = new StdioClientTransport({ command: binary, args: ['mcp', '--root', root], stderr: 'ignore' });
  client = new Client({ name: 'p', version: '0' }); await client.connect(transport); pid = transport.pid;
}
for (let i = 0; i < 200; i++) await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
let perf;
if (perfOut && perfOut !== '-') {
  perf = spawn(perfArgs.split(' ')[0], [...perfArgs.split(' ').slice(1), '-o', perfOut, '-p', String(pid)], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 500));
}
const t0 = Date.now();
for (let i = 0; i < calls; i++) await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
console.error(`${mode}: ${calls} calls in ${Date.now() - t0} ms`);
if (perf) { perf.kill('SIGINT'); await new Promise((r) => perf.on('exit', r)); }
await client.close();
if (child) { child.kill('SIGTERM'); await new Promise((r) => child.on('exit', r)); }
fs.rmSync(root, { recursive: true, force: true });
