// Drives `confine mcp` with the official MCP TypeScript SDK client, so that a client nobody
// here wrote is the judge. Usage: node client.mjs <path to the confine binary>
//
// Checks: initialize, tools/list (three tools, closed schemas), each tool (read_media's image
// item too), refusals as tool
// errors (isError with structuredContent), an unknown tool as a protocol error, `--read-only`,
// and a cancellation (AbortSignal on callTool -> notifications/cancelled) of a running
// node_process, checking through /proc that the process is gone and that the server still
// answers. Prints a JSON summary on stdout; exits 1 if any check failed, 2 on bad usage.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';

const binary = process.argv[2];
if (!binary) {
  console.error('usage: node client.mjs <confine binary>');
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
async function waitUntil(limitMs, predicate) {
  const start = Date.now();
  while (Date.now() - start < limitMs) {
    if (predicate()) return Date.now() - start;
    await sleep(10);
  }
  return null;
}

/** Processes whose working directory is `root` (node_process children run there). */
function processesIn(root) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readlinkSync(`/proc/${name}/cwd`) === root) {
        const comm = fs.readFileSync(`/proc/${name}/comm`, 'utf8').trim();
        found.push({ pid: Number(name), comm });
      }
    } catch {
      // gone, or not ours to inspect
    }
  }
  return found;
}

const leftovers = (root) => fs.readdirSync(root).filter((n) => n.startsWith('.pify-'));

function makeRoot() {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'confine-interop-')));
  fs.writeFileSync(path.join(root, 'a.txt'), 'alpha\n');
  return root;
}

async function connect(root, extra = []) {
  const transport = new StdioClientTransport({
    command: binary,
    args: ['mcp', '--root', root, ...extra],
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  const client = new Client({ name: 'confine-interop', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

/** The record of a result, checked to be both the single text item and structuredContent. */
function recordOf(result) {
  const text = result.content?.length === 1 && result.content[0].type === 'text' ? result.content[0].text : null;
  const fromText = text === null ? undefined : JSON.parse(text);
  const same = JSON.stringify(fromText) === JSON.stringify(result.structuredContent);
  return { record: result.structuredContent, same };
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

async function expectProtocolError(client, name, args) {
  try {
    const result = await client.callTool({ name, arguments: args });
    return { ok: false, detail: `answered ${JSON.stringify(result)}` };
  } catch (error) {
    return { ok: error instanceof McpError && error.code === -32602, detail: String(error) };
  }
}

const roots = [];
const closers = [];

async function main() {
  // ---- the full tool set
  const root = makeRoot();
  roots.push(root);
  const full = await connect(root, ['--timeout-ms', '20000']);
  closers.push(full);
  const { client } = full;

  await step('initialize', async () => {
    const info = client.getServerVersion();
    const instructions = client.getInstructions() ?? '';
    check('initialize', info?.name === 'confine' && instructions.includes('workspace'), { info, instructions });
  });

  await step('list', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    // The Rust side passes the set it builds (tools::WORKSPACE_TOOLS and READ_ONLY_TOOLS).
    const expected = (process.env.CONFINE_EXPECT_TOOLS ?? 'read_file,write_file,node_process').split(',');
    check('list: the workspace tool set', same(names, expected), names);
    // The tools annotated read-only: the read-only set and the checkpoint tools that only read.
    const readOnly = (process.env.CONFINE_EXPECT_READ_HINTED ?? process.env.CONFINE_EXPECT_READ_ONLY ?? 'read_file').split(',');
    const hinted = tools.every(
      (t) => t.annotations && t.annotations.readOnlyHint === readOnly.includes(t.name) && t.annotations.title,
    );
    check('list: annotations say which tools only read', hinted, tools.map((t) => [t.name, t.annotations]));
    const closed = tools.every(
      (t) => t.inputSchema.type === 'object' && t.inputSchema.additionalProperties === false && t.description,
    );
    check('list: closed schemas with descriptions', closed, tools);
  });

  await step('read_file', async () => {
    const result = await client.callTool({ name: 'read_file', arguments: { path: './a.txt' } });
    const { record, same: consistent } = recordOf(result);
    check(
      'read_file',
      result.isError === false && consistent && same(record, { path: 'a.txt', content: 'alpha\n', bytes: 6 }),
      result,
    );
  });

  await step('read_media', async () => {
    // A 1x1 PNG: the SDK must accept the image content item and its structuredContent.
    const png = Buffer.from(
      'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
      'base64',
    );
    fs.writeFileSync(path.join(root, 'dot.txt'), png);
    const result = await client.callTool({ name: 'read_media', arguments: { path: 'dot.txt' } });
    const [image, text] = result.content ?? [];
    const expected = {
      path: 'dot.txt',
      mimeType: 'image/png',
      bytes: png.length,
      width: png.readUInt32BE(16),
      height: png.readUInt32BE(20),
    };
    check(
      'read_media: an image item, then the record as text and structuredContent',
      result.isError === false &&
        image?.type === 'image' &&
        image.mimeType === 'image/png' &&
        Buffer.from(image.data, 'base64').equals(png) &&
        text?.type === 'text' &&
        same(JSON.parse(text.text), expected) &&
        same(result.structuredContent, expected),
      result,
    );
  });

  await step('write_file', async () => {
    const result = await client.callTool({ name: 'write_file', arguments: { path: 'out/b.txt', content: 'beta' } });
    const { record, same: consistent } = recordOf(result);
    const onDisk = fs.existsSync(path.join(root, 'out/b.txt')) ? fs.readFileSync(path.join(root, 'out/b.txt'), 'utf8') : null;
    check(
      'write_file',
      result.isError === false && consistent && same(record, { path: 'out/b.txt', bytes: 4 }) && onDisk === 'beta',
      { result, onDisk },
    );
  });

  await step('node_process', async () => {
    const result = await client.callTool({
      name: 'node_process',
      arguments: { source: "console.log(require('fs').readFileSync('a.txt', 'utf8').trim(), process.argv.length)", arguments: ['x'] },
    });
    const { record, same: consistent } = recordOf(result);
    check(
      'node_process',
      result.isError === false && consistent && record?.stdout === 'alpha 2\n' && record?.exitCode === 0 && record?.timedOut === false,
      result,
    );
  });

  await step('refusals are tool errors', async () => {
    const cases = [
      ['read_file', { path: '../etc/passwd' }, 'TOOL_ARGUMENTS_INVALID', 'INVALID_RELATIVE_PATH'],
      ['read_file', { path: 'missing.txt' }, 'TOOL_EXECUTION_FAILED', 'FILE_NOT_FOUND'],
      ['read_file', { path: 'a.txt', mode: 'rw' }, 'TOOL_ARGUMENTS_INVALID', 'INVALID_READ_INPUT'],
      ['write_file', { path: '/tmp/x', content: '' }, 'TOOL_ARGUMENTS_INVALID', 'INVALID_RELATIVE_PATH'],
      ['node_process', { source: 'x', arguments: 'not a list' }, 'TOOL_ARGUMENTS_INVALID', 'INVALID_NODE_PROCESS_INPUT'],
    ];
    for (const [name, args, code, message] of cases) {
      const result = await client.callTool({ name, arguments: args });
      const { record, same: consistent } = recordOf(result);
      check(
        `refusal: ${name} ${JSON.stringify(args)} -> ${message}`,
        result.isError === true && consistent && same(record, { error: { code, message } }),
        result,
      );
    }
  });

  await step('unknown tool', async () => {
    const { ok, detail } = await expectProtocolError(client, 'rm_rf', {});
    check('unknown tool is a protocol error (-32602)', ok, detail);
  });

  await step('cancellation', async () => {
    const controller = new AbortController();
    const spinning = client.callTool({ name: 'node_process', arguments: { source: 'while (true) {}' } }, undefined, {
      signal: controller.signal,
    });
    const settled = spinning.then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    const startedIn = await waitUntil(10000, () => processesIn(root).length > 0);
    check('cancellation: the node process starts', startedIn !== null, processesIn(root));
    if (startedIn === null) {
      controller.abort('give up');
      await settled;
      return;
    }
    const t0 = Date.now();
    controller.abort('the test cancels it');
    const outcome = await settled;
    check('cancellation: callTool rejects', 'error' in outcome, outcome);
    const goneIn = await waitUntil(2000, () => processesIn(root).length === 0 && leftovers(root).length === 0);
    check('cancellation: process and script gone', goneIn !== null, {
      processes: processesIn(root),
      leftovers: leftovers(root),
    });
    if (goneIn !== null) check('cancellation: gone within a fraction of a second', Date.now() - t0 < 1000, Date.now() - t0);
    const after = await client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    check('cancellation: the server still answers', after.isError === false, after);
  });

  // ---- read-only
  await step('read-only', async () => {
    const roRoot = makeRoot();
    roots.push(roRoot);
    const ro = await connect(roRoot, ['--read-only']);
    closers.push(ro);
    const { tools } = await ro.client.listTools();
    const readOnly = (process.env.CONFINE_EXPECT_READ_ONLY ?? 'read_file').split(',');
    check('read-only: the read-only tools alone', same(tools.map((t) => t.name), readOnly), tools);
    const read = await ro.client.callTool({ name: 'read_file', arguments: { path: 'a.txt' } });
    check('read-only: read_file works', read.isError === false && read.structuredContent?.content === 'alpha\n', read);
    const { ok, detail } = await expectProtocolError(ro.client, 'write_file', { path: 'b.txt', content: 'x' });
    check('read-only: write_file is not served', ok && !fs.existsSync(path.join(roRoot, 'b.txt')), detail);
  });

  // ---- shutdown: closing stdin ends the server promptly and cleanly
  await step('shutdown', async () => {
    for (const { client: c, transport, stderr } of closers.splice(0)) {
      const pid = transport.pid;
      const t0 = Date.now();
      await c.close();
      const exitedIn = await waitUntil(3000, () => !fs.existsSync(`/proc/${pid}`));
      check('shutdown: the server exits at end of input', exitedIn !== null && Date.now() - t0 < 1900, Date.now() - t0);
      const banner = stderr().split('\n').filter((l) => l.startsWith('confine '));
      check('shutdown: one banner line on stderr', banner.length === 1, stderr());
    }
  });
}

try {
  await main();
} catch (error) {
  check('harness', false, String(error?.stack ?? error));
} finally {
  for (const { client } of closers) await client.close().catch(() => {});
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
}

const failed = checks.filter((c) => !c.ok);
console.log(JSON.stringify({ ok: failed.length === 0, passed: checks.length - failed.length, failed: failed.length, checks }, null, 2));
process.exit(failed.length === 0 ? 0 : 1);
