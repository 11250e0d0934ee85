// Drives `confine mcp --http` with the official MCP TypeScript SDK client over Streamable
// HTTP (StreamableHTTPClientTransport), with the bearer token, so that a client nobody here
// wrote is the judge. Usage: node http.mjs <url> <token> <census marker>
//
// Checks: without the token the connection is refused (401); with it, initialize,
// tools/list, a read_file call, run_command's progress (onprogress receives
// notifications/progress before the result), and a cancellation (AbortSignal on callTool ->
// notifications/cancelled) of a running run_command whose command line holds the marker
// (tests/serving/http_interop.rs checks with the process census that nothing of it is left) while
// the session still answers. Prints a JSON summary on stdout; exits 1 if any check failed.

import fs from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, marker] = process.argv.slice(2);
if (!url || !token || !marker) {
  console.error('usage: node http.mjs <url> <token> <census marker>');
  process.exit(2);
}

const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: Boolean(ok), ...(ok ? {} : { detail }) });
}
async function step(name, body) {
  try {
    await body();
  } catch (error) {
    check(name, false, `threw: ${error?.stack ?? error}`);
  }
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Processes whose command line holds the marker. */
function marked() {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8');
      if (cmdline.includes(`${marker}-run`)) found.push({ pid: Number(name), cmdline });
    } catch {
      // gone, or not ours to inspect
    }
  }
  return found;
}
async function untilNoneMarked(limitMs) {
  const start = Date.now();
  while (Date.now() - start < limitMs) {
    if (marked().length === 0) return true;
    await sleep(20);
  }
  return false;
}

function transport(withToken) {
  const headers = withToken ? { Authorization: `Bearer ${token}` } : {};
  return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
}

await step('without the token the connection is refused', async () => {
  const client = new Client({ name: 'confine-http-interop', version: '0.0.0' });
  let refused = null;
  try {
    await client.connect(transport(false));
  } catch (error) {
    refused = String(error?.message ?? error);
  }
  check('without the token the connection is refused', refused !== null, 'connected');
  check('the refusal is 401', /401|nauthorized/.test(refused ?? ''), refused);
  await client.close().catch(() => {});
});

const client = new Client({ name: 'confine-http-interop', version: '0.0.0' });
await step('connect with the token', async () => {
  await client.connect(transport(true));
  check('connect with the token', true);
});

await step('tools/list', async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  check('tools/list names read_file and run_command', names.includes('read_file') && names.includes('run_command'), names);
});

await step('read_file', async () => {
  const result = await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
  check('read_file answers the content', result.structuredContent?.content === 'alpha\n', result);
  check('read_file is not an error', result.isError === false, result);
});

await step('run_command progress', async () => {
  const progress = [];
  const result = await client.callTool(
    { name: 'run_command', arguments: { command: 'echo first; sleep 2.5; echo second' } },
    undefined,
    { onprogress: (p) => progress.push(p), timeout: 60000 },
  );
  check('run_command exits 0', result.structuredContent?.exitCode === 0, result);
  check('onprogress received notifications', progress.length >= 1, progress);
  check('progress counts elapsed milliseconds', progress.every((p) => typeof p.progress === 'number'), progress);
});

await step('cancel a running run_command', async () => {
  const controller = new AbortController();
  const call = client.callTool(
    { name: 'run_command', arguments: { command: `sleep 60; : ${marker}-run` } },
    undefined,
    { signal: controller.signal, timeout: 120000 },
  );
  await sleep(1500);
  check('the command runs before the abort', marked().length >= 1, 'not started');
  controller.abort('stop');
  let aborted = false;
  try {
    await call;
  } catch {
    aborted = true;
  }
  check('the aborted call rejects', aborted, 'resolved');
  check('nothing of the cancelled command is left, the session still open', await untilNoneMarked(5000), marked());
  // The session still answers after the cancellation.
  const result = await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
  check('the session answers after a cancellation', result.isError === false, result);
});

await client.close().catch(() => {});
const failed = checks.filter((c) => !c.ok);
console.log(JSON.stringify({ ok: failed.length === 0, passed: checks.length - failed.length, failed }, null, 2));
process.exit(failed.length === 0 ? 0 : 1);
