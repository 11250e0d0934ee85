// The `--eval` program of `node_process`: run the source on the script's descriptor as the
// CommonJS main module named after the script, in the workspace root. The tool fills in the
// descriptor's number and the script's name, and drops these comment lines (see `loader.rs`).
(() => {
  const fs = require('fs'), path = require('path'), Module = require('module');
  let source;
  try { source = fs.readFileSync(SCRIPT_FD, 'utf8'); } finally { fs.closeSync(SCRIPT_FD); }
  if (source.charCodeAt(0) === 0xFEFF) source = source.slice(1);
  for (const g of ['require', 'module', 'exports', '__filename', '__dirname']) delete globalThis[g];
  process.execArgv.length = 0;
  const filename = path.join(process.cwd(), 'SCRIPT_NAME');
  const m = new Module(filename, null);
  m.filename = filename; m.id = '.';
  m.paths = Module._nodeModulePaths(path.dirname(filename));
  process.mainModule = m; Module._cache[filename] = m;
  m._compile(source, filename);
  m.loaded = true;
})()
