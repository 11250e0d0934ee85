// The official MCP TypeScript SDK client watching run_command's progress: `onprogress` on
// callTool sends a progressToken, and the server answers with notifications/progress about
// once a second while the command runs, none after the result; a call without the callback
// gets none. Usage: node progress.mjs <confine binary> <workspace>. Prints a JSON summary;
// exits 1 if any check failed.

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
check('none after the result', afterResult === 0, afterResult);

// Without a callback the client sends no token: the call still answers.
const plain = await client.callTool({ name: 'run_command', arguments: { command: 'sleep 1.5; echo plain' } });
check('no token, still answered', plain.structuredContent?.stdout === 'plain\n', plain);

await client.close();
const ok = checks.every((c) => c.ok);
console.log(JSON.stringify({ ok, passed: checks.filter((c) => c.ok).length, checks }));
process.exit(ok ? 0 : 1);
