// The official MCP TypeScript SDK client watching run_command's progress: `onprogress` on
// callTool sends a progressToken, and the server answers with notifications/progress about
// once a second while the command runs, none after the result; a call without the callback
// gets none; a real npm project's tests; a long, noisy command cancelled mid-run through the
// SDK's AbortController, every process it started gone. Usage: node progress.mjs <confine
// binary> <workspace>. Prints a JSON summary; exits 1 if any check failed.

import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [binary, root] = process.argv.slice(2);
if (!binary || !root) {
  console.error('usage: node progress.mjs <confine binary> <workspace>');
  process.exit(2);
}
const checks = [];
const check = (name, ok, detail) => checks.push({ name, ok: Boolean(ok), ...(ok ? {} : { detail }) });

const transport = new StdioClientTransport({
  command: binary,
  args: ['mcp', '--root', root, '--allow-commands'],
  stderr: 'ignore',
});
const client = new Client({ name: 'confine-progress', version: '0.0.0' });
// The SDK drops a call's progress handler when the call ends (answered or cancelled) and
// reports any progress notification that comes later as an error naming an unknown token:
// that is how a notification sent after the end is seen here.
const late = [];
client.onerror = (error) => {
  const text = String(error?.message ?? error);
  if (/progress notification for an unknown token/.test(text)) late.push(text);
};
await client.connect(transport);

const reports = [];
let answered = false;
let afterResult = 0;
const command = 'for i in 1 2 3 4; do echo "step $i"; sleep 1; done; echo done';
const result = await client.callTool(
  { name: 'run_command', arguments: { command } },
  undefined,
  {
    timeout: 60_000,
    onprogress: (p) => {
      if (answered) afterResult += 1;
      reports.push(p);
    },
  },
);
answered = true;
await new Promise((r) => setTimeout(r, 1500));
check('result', result.structuredContent?.exitCode === 0 && result.structuredContent?.stdout.endsWith('done\n'), result);
check('about one a second', reports.length >= 2 && reports.length <= 6, reports);
check('progress is elapsed ms, increasing', reports.every((p, i) => i === 0 || p.progress > reports[i - 1].progress) && reports.every((p) => p.progress >= 900), reports);
check('message names bytes and the last line', reports.every((p) => /^\d+ bytes of output/.test(p.message)) && reports.some((p) => /last line: step \d/.test(p.message)), reports);
check('none after the result', afterResult === 0 && late.length === 0, { afterResult, late });

// Without a callback the client sends no token: the call still answers.
const plain = await client.callTool({ name: 'run_command', arguments: { command: 'sleep 1.5; echo plain' } });
check('no token, still answered', plain.structuredContent?.stdout === 'plain\n', plain);

// A real project's test run: an npm project whose `npm test` is `node --test` over three
// test files (two pass, one fails, each a second or more), watched through onprogress.
const project = join(root, 'project');
mkdirSync(join(project, 'test'), { recursive: true });
writeFileSync(join(project, 'package.json'), JSON.stringify({
  name: 'tiny', version: '1.0.0', private: true, scripts: { test: 'node --test test/' },
}));
writeFileSync(join(project, 'add.js'), 'module.exports = (a, b) => a + b;\n');
const testFile = (name, expected) => writeFileSync(join(project, 'test', `${name}.test.js`), [
  "const test = require('node:test');",
  "const assert = require('node:assert');",
  "const add = require('../add.js');",
  `test('${name}', async () => {`,
  '  await new Promise((r) => setTimeout(r, 1200));',
  `  assert.strictEqual(add(2, 2), ${expected});`,
  '});',
  '',
].join('\n'));
testFile('adds', 4);
testFile('adds-again', 4);
testFile('wrong', 5);
const npmReports = [];
const npm = await client.callTool(
  { name: 'run_command', arguments: { command: 'cd project && npm test 2>&1', timeoutMs: 60_000 } },
  undefined,
  { timeout: 90_000, onprogress: (p) => npmReports.push(p) },
);
const npmOut = npm.structuredContent?.stdout ?? '';
check('npm test ran the suite: 2 pass, 1 fail, exit 1',
  npm.structuredContent?.exitCode === 1 && /# pass 2\b/.test(npmOut) && /# fail 1\b/.test(npmOut) && npmOut.includes('wrong'),
  npm.structuredContent ?? npm);
check('npm test reported progress', npmReports.length >= 1 && npmReports.every((p) => /^\d+ bytes of output/.test(p.message)), npmReports);

// Cancellation mid-run: a long, noisy command whose descendants include one in a session of
// its own (setsid), cancelled through the SDK's AbortController once progress has come. Every
// process of the run must be gone, no progress may follow, and the server goes on answering.
const mark = `confine-cancel-${process.pid}-${Date.now()}`;
const holders = () => readdirSync('/proc').filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(mark);
  } catch {
    return false;
  }
});
const waitFor = async (ms, cond) => {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 25));
  }
  return cond();
};
const keep = `"${process.execPath}" -e "setInterval(() => {}, 1000)" ${mark}`;
const noisy = `${keep} & setsid ${keep} & while true; do echo "noisy line $(date +%s%N)"; sleep 0.01; done`;
const controller = new AbortController();
const cancelReports = [];
let aborted = false;
let afterAbort = 0;
const cancelled = client.callTool(
  { name: 'run_command', arguments: { command: noisy, timeoutMs: 60_000 } },
  undefined,
  {
    timeout: 90_000,
    signal: controller.signal,
    onprogress: (p) => {
      if (aborted) afterAbort += 1;
      cancelReports.push(p);
    },
  },
).then((result) => ({ result }), (error) => ({ error }));
await waitFor(10_000, () => cancelReports.length >= 1 && holders().length >= 2);
check('cancel: progress came and the descendants run before the cancel',
  cancelReports.length >= 1 && holders().length >= 2, { reports: cancelReports, holders: holders() });
aborted = true;
const lateBefore = late.length;
controller.abort('the judge cancels it');
const outcome = await cancelled;
check('cancel: callTool rejects', 'error' in outcome, outcome);
check('cancel: every process of the run is gone', await waitFor(2_000, () => holders().length === 0), holders());
await new Promise((r) => setTimeout(r, 1_500));
check('cancel: no progress after the cancel', afterAbort === 0 && late.length === lateBefore, { afterAbort, late });
const afterCancel = await client.callTool({ name: 'run_command', arguments: { command: 'echo still here' } });
check('cancel: the server answers afterwards', afterCancel.structuredContent?.stdout === 'still here\n', afterCancel);

await client.close();
const ok = checks.every((c) => c.ok);
console.log(JSON.stringify({ ok, passed: checks.filter((c) => c.ok).length, checks }));
process.exit(ok ? 0 : 1);
