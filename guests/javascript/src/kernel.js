// sandlot's JavaScript kernel: runs cells of code in one Node.js process, so
// variables, functions and required modules persist from one run to the next.
//
// The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
// `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
// `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
// A cell ends when its code, the promise it evaluates to, and the timers, sockets and
// files it started have finished, as `node main.js` would exit. SIGINT interrupts the
// running cell, never the kernel.
'use strict';
(() => {
  const fs = require('fs');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const { Readable } = require('stream');
  const { createRequire } = require('module');
  // Node's own REPL rewrites top-level `await` with this (the kernel starts with
  // --expose-internals for it); without it, `await` stays a syntax error.
  let topLevelAwait = () => null;
  try {
    topLevelAwait = require('internal/repl/await').processTopLevelAwait;
  } catch (_) {}

  const cellFd = Number(process.env.SANDLOT_CELL_FD);
  const doneFd = Number(process.env.SANDLOT_DONE_FD);
  delete process.env.SANDLOT_CELL_FD;
  delete process.env.SANDLOT_DONE_FD;
  const leave = process.reallyExit.bind(process);
  // Made now, not by a cell's first print: they would count as the cell's own.
  void process.stdout, process.stderr;

  // What the running cell does when it ends, is interrupted or throws from a callback.
  let cell = null;
  process.on('SIGINT', () => cell && cell.finish(130, 'Interrupted'));
  class Exit {
    constructor(code) {
      this.code = code;
    }
  }
  // A cell's `process.exit()` ends the cell; the kernel itself leaves through `leave`.
  process.exit = (code) => {
    throw new Exit(code === undefined ? process.exitCode || 0 : Number(code) || 0);
  };
  const failed = (error) => {
    if (error instanceof Exit) {
      return cell && cell.finish(error.code);
    }
    if (!cell) {
      return;
    }
    process.stderr.write(describe(error) + '\n');
    cell.finish(1);
  };
  process.on('uncaughtException', failed);
  process.on('unhandledRejection', failed);

  function describe(error) {
    if (error && error.stack) {
      // The kernel's frames, and Node's below the cell, are noise: the trace ends
      // where the cell began.
      const lines = error.stack.split('\n');
      let last = lines.length - 1;
      const noise = (line) => /node:internal|node:vm/.test(line) || line.includes(__filename);
      while (last > 0 && noise(lines[last])) {
        last--;
      }
      return lines.slice(0, last + 1).join('\n');
    }
    return 'Uncaught ' + util.inspect(error);
  }

  // Cells arrive while earlier cells' timers run: read them without blocking.
  let buffered = Buffer.alloc(0);
  let wake = null;
  const input = fs.createReadStream(null, { fd: cellFd, highWaterMark: 1 << 16 });
  input.on('data', (chunk) => {
    buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  });
  input.on('end', () => leave(0));
  input.on('error', () => leave(0));
  async function take(n) {
    while (buffered.length < n) {
      await new Promise((resolve) => (wake = resolve));
    }
    const out = buffered.subarray(0, n);
    buffered = buffered.subarray(n);
    return out;
  }
  async function header() {
    for (;;) {
      const end = buffered.indexOf(10);
      if (end >= 0) {
        return (await take(end + 1)).toString().trim().split(' ');
      }
      await new Promise((resolve) => (wake = resolve));
    }
  }

  // Resources in use, by kind: a cell is over once it holds none beyond these.
  function resources() {
    const counts = new Map();
    for (const kind of process.getActiveResourcesInfo()) {
      counts.set(kind, (counts.get(kind) || 0) + 1);
    }
    return counts;
  }
  function settled(before) {
    for (const [kind, n] of resources()) {
      if (n > (before.get(kind) || 0)) {
        return false;
      }
    }
    return true;
  }

  // The kernel's own descriptor 0 is empty and cannot be swapped per cell: reading
  // it whole, as `fs.readFileSync(0)` or `'/dev/stdin'` does, gets the cell's input.
  let unread = Buffer.alloc(0);
  const readFileSync = fs.readFileSync;
  fs.readFileSync = function (file, options) {
    if (cell && (file === 0 || file === '/dev/stdin')) {
      const bytes = unread;
      unread = Buffer.alloc(0);
      const encoding = typeof options === 'string' ? options : options && options.encoding;
      return encoding ? bytes.toString(encoding) : Buffer.from(bytes);
    }
    return readFileSync.apply(this, arguments);
  };

  function apply(env) {
    const saved = new Map();
    for (const item of env.toString().split('\0')) {
      const at = item.indexOf('=');
      if (at > 0) {
        const key = item.slice(0, at);
        // The first value is the one to restore, whatever the run repeats.
        if (!saved.has(key)) {
          saved.set(key, process.env[key]);
        }
        process.env[key] = item.slice(at + 1);
      }
    }
    return saved;
  }
  function restore(saved) {
    for (const [key, value] of saved) {
      if (value === undefined) {
        delete process.env[key];
      } else {
        process.env[key] = value;
      }
    }
  }

  async function run(code, stdin, count) {
    const before = resources();
    const ended = new Promise((resolve) => {
      cell = {
        finish(status, why) {
          if (cell && cell.status === undefined) {
            cell.status = status;
            if (why) {
              process.stderr.write(why + '\n');
            }
            resolve();
          }
        },
      };
    });
    const mine = cell;
    Object.defineProperty(process, 'stdin', {
      value: Readable.from([stdin]),
      configurable: true,
      writable: true,
    });
    unread = stdin;
    try {
      let source = code.toString();
      const awaiting = source.includes('await') ? topLevelAwait(source) : null;
      const script = new vm.Script(awaiting || source, { filename: `<cell-${count}>` });
      let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
      if (value && typeof value.then === 'function') {
        // A promise is shown resolved, as a notebook awaits it.
        value = await Promise.race([value, ended]);
        if (awaiting && value) {
          value = value.value;
        }
      }
      if (mine.status === undefined && value !== undefined) {
        process.stdout.write(util.inspect(value) + '\n');
      }
      // What the cell started (timers, requests, files) finishes inside it.
      while (mine.status === undefined && !settled(before)) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      mine.finish(0);
    } catch (error) {
      if (error && error.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
        mine.finish(130, 'Interrupted');
      } else {
        failed(error);
      }
    }
    await ended;
    cell = null;
    return mine.status;
  }

  async function main() {
    fs.writeSync(doneFd, 'ready\n');
    for (let count = 1; ; count++) {
      const fields = await header();
      if (fields.length !== 5 || fields[0] !== 'sandlot-cell') {
        process.stderr.write(`sandlot kernel: malformed cell header ${fields.join(' ')}\n`);
        leave(2);
      }
      const [code, stdin, env, cwd] = [
        await take(Number(fields[1])),
        await take(Number(fields[2])),
        await take(Number(fields[3])),
        await take(Number(fields[4])),
      ];
      let status;
      const saved = apply(env);
      try {
        const dir = cwd.toString();
        process.chdir(dir);
        // As `node main.js` would: modules resolve from the working directory, and
        // the module's own names are there.
        const main = path.join(dir, 'main.js');
        globalThis.require = createRequire(main);
        globalThis.__filename = main;
        globalThis.__dirname = dir;
        if (!globalThis.module) {
          globalThis.module = { exports: {} };
          globalThis.exports = globalThis.module.exports;
        }
        status = await run(code, stdin, count);
      } catch (error) {
        process.stderr.write(describe(error) + '\n');
        status = 1;
      }
      restore(saved);
      // As a process's exit status would be.
      fs.writeSync(doneFd, `${status & 0xff}\n`);
    }
  }
  main();
})();
