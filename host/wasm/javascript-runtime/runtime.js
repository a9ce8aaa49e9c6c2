// sandlot JavaScript runtime: implements sandlot:plugin/interpreter@0.4.0 on QuickJS
// (componentize-qjs 0.4.5, --sync runtime), and gives code the session's tools through
// sandlot:plugin/tools@0.4.0 (`require("sandlot_tools")`).
//
// Things worth knowing (see also README section of the build report):
// * The module body runs once, at build time, inside Wizer; the snapshot is what every
//   instance starts from. Nothing here may touch WASI at module top level: handles
//   obtained during the snapshot are invalid at run time, and Math.random's seed would
//   be baked in. Stdout/stderr handles are fetched per write, randomness lazily.
// * The sync runtime never drains QuickJS's native job queue, so native Promise
//   continuations would never run. This file therefore installs its own Promise,
//   queueMicrotask and (virtual-time) timers, and rewrites `async` functions and
//   `await` into generators driven by that Promise (see `transform`). Async generators
//   and `for await` over them stay native and do not progress past their first await.
// * Top-level let/const/class are rewritten so they persist across runs (see `transform`).
// * process.exit(n) throws a private sentinel; if user code catches it, the run still
//   returns n, but code after the catch keeps running (its output is discarded).
import stdoutApi from "wasi:cli/stdout@0.2.4";
import stderrApi from "wasi:cli/stderr@0.2.4";
import randomApi from "wasi:random/random@0.2.4";
import toolsApi from "sandlot:plugin/tools@0.4.0";
import { parse, Parser } from "acorn";

// Replaced by `sandlot runtimes install javascript` with what it builds from.
const SANDLOT_BUILD = 'quickjs (unversioned build)';
const G = globalThis;
const indirectEval = G.eval;
const jsonStringify = JSON.stringify;
const ObjectToString = Object.prototype.toString;
const FunctionToString = Function.prototype.toString;
const hasOwn = Object.prototype.hasOwnProperty;
const isArray = Array.isArray;
const NativeError = Error;
const CHUNK = 4096;

// ---------------------------------------------------------------- output

function utf8(s) {
  const n = s.length;
  const buf = new Uint8Array(n * 3);
  let j = 0;
  for (let i = 0; i < n; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) { buf[j++] = c; continue; }
    if (c < 0x800) { buf[j++] = 0xc0 | (c >> 6); buf[j++] = 0x80 | (c & 63); continue; }
    if (c >= 0xd800 && c <= 0xdfff) {
      const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
        i++;
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        buf[j++] = 0xf0 | (c >> 18); buf[j++] = 0x80 | ((c >> 12) & 63);
        buf[j++] = 0x80 | ((c >> 6) & 63); buf[j++] = 0x80 | (c & 63);
        continue;
      }
      c = 0xfffd; // lone surrogate
    }
    buf[j++] = 0xe0 | (c >> 12); buf[j++] = 0x80 | ((c >> 6) & 63); buf[j++] = 0x80 | (c & 63);
  }
  return buf.subarray(0, j);
}

function utf8Decode(bytes) {
  let out = '';
  const n = bytes.length;
  for (let i = 0; i < n;) {
    const b = bytes[i];
    let c = 0xfffd, len = 1;
    if (b < 0x80) c = b;
    else if (b >= 0xc2 && b < 0xe0 && i + 1 < n && (bytes[i + 1] & 0xc0) === 0x80) {
      c = ((b & 31) << 6) | (bytes[i + 1] & 63); len = 2;
    } else if (b >= 0xe0 && b < 0xf0 && i + 2 < n && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80) {
      c = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63); len = 3;
      if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
    } else if (b >= 0xf0 && b < 0xf5 && i + 3 < n && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80 && (bytes[i + 3] & 0xc0) === 0x80) {
      c = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63); len = 4;
      if (c < 0x10000 || c > 0x10ffff) c = 0xfffd;
    }
    out += String.fromCodePoint(c);
    i += len;
  }
  return out;
}

// Set when process.exit() was called: later output of the same run is dropped.
let exitNow = null;

function writeTo(api, getter, s) {
  if (exitNow !== null) return;
  const bytes = utf8(String(s));
  if (bytes.length === 0) return;
  const stream = api[getter]();
  try {
    for (let i = 0; i < bytes.length; i += CHUNK) {
      stream.blockingWriteAndFlush(bytes.subarray(i, i + CHUNK));
    }
  } finally {
    try { stream[Symbol.dispose](); } catch {}
  }
}
const writeOut = (s) => writeTo(stdoutApi, 'getStdout', s);
const writeErr = (s) => writeTo(stderrApi, 'getStderr', s);

// ---------------------------------------------------------------- formatting

function isError(v) {
  return v instanceof NativeError || ObjectToString.call(v) === '[object Error]';
}
function errorHeader(e) {
  let name, message;
  try { name = e.name; } catch {}
  try { message = e.message; } catch {}
  name = name === undefined ? 'Error' : String(name);
  message = message === undefined ? '' : String(message);
  return message === '' ? name : `${name}: ${message}`;
}
function fnDescr(f) {
  let src = '';
  try { src = FunctionToString.call(f); } catch {}
  const name = f.name ? String(f.name) : '';
  if (/^class\b/.test(src)) return name ? `[class ${name}]` : '[class (anonymous)]';
  return name ? `[Function: ${name}]` : '[Function (anonymous)]';
}
function jsonReplacer() {
  const seen = new WeakSet();
  return function (key, value) {
    if (typeof value === 'bigint') return `${value}n`;
    if (typeof value === 'object' && value !== null) {
      if (isError(value)) return errorHeader(value);
      if (seen.has(value)) return '[Circular]';
      seen.add(value);
    }
    return value;
  };
}
// A string as Node's REPL shows one: single-quoted, escaped.
function quoted(s) {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n')}'`;
}
function fmt(a) {
  switch (typeof a) {
    case 'string': return a;
    case 'number': return Object.is(a, -0) ? '-0' : String(a);
    case 'bigint': return `${a}n`;
    case 'boolean': case 'undefined': return String(a);
    case 'symbol': return a.toString();
    case 'function': return fnDescr(a);
  }
  if (a === null) return 'null';
  if (isError(a)) return errorHeader(a);
  try {
    const s = jsonStringify(a, jsonReplacer());
    if (s !== undefined) return s;
  } catch {}
  try { return String(a); } catch { return ObjectToString.call(a); }
}
function formatArgs(args) {
  let out = '';
  let i = 0;
  if (typeof args[0] === 'string' && args[0].includes('%') && args.length > 1) {
    i = 1;
    out = args[0].replace(/%[sdifjoOc%]/g, (m) => {
      if (m === '%%') return '%';
      if (i >= args.length) return m;
      const v = args[i++];
      switch (m) {
        case '%s': return typeof v === 'string' ? v : fmt(v);
        case '%d': case '%i': {
          if (typeof v === 'bigint') return `${v}n`;
          const n = Number(v);
          return String(m === '%i' ? Math.trunc(n) : n);
        }
        case '%f': return String(parseFloat(v));
        case '%c': return '';
        default: return fmt(v);
      }
    });
    if (i < args.length) out += ' ';
  }
  for (let first = true; i < args.length; i++, first = false) {
    out += (first ? '' : ' ') + fmt(args[i]);
  }
  return out;
}

let groupIndent = '';
function emit(write, args) {
  let s = formatArgs(args);
  if (groupIndent) s = groupIndent + s.split('\n').join('\n' + groupIndent);
  write(s + '\n');
}

const counts = new Map();
const timers = new Map();
const console_ = {
  log: (...a) => emit(writeOut, a),
  info: (...a) => emit(writeOut, a),
  debug: (...a) => emit(writeOut, a),
  dir: (v) => emit(writeOut, [v]),
  table: (...a) => emit(writeOut, a),
  warn: (...a) => emit(writeErr, a),
  error: (...a) => emit(writeErr, a),
  trace: (...a) => {
    let stack = '';
    try { stack = String(new NativeError().stack || ''); } catch {}
    emit(writeErr, ['Trace' + (a.length ? ': ' + formatArgs(a) : '') + '\n' + stack.replace(/\n$/, '')]);
  },
  assert: (cond, ...a) => {
    if (!cond) emit(writeErr, a.length ? ['Assertion failed:', ...a] : ['Assertion failed']);
  },
  count: (label = 'default') => {
    const n = (counts.get(label) || 0) + 1;
    counts.set(label, n);
    emit(writeOut, [`${label}: ${n}`]);
  },
  countReset: (label = 'default') => { counts.delete(label); },
  time: (label = 'default') => { timers.set(label, performance.now()); },
  timeLog: (label = 'default', ...a) => {
    if (timers.has(label)) emit(writeOut, [`${label}: ${(performance.now() - timers.get(label)).toFixed(3)}ms`, ...a]);
  },
  timeEnd: (label = 'default') => {
    if (timers.has(label)) {
      emit(writeOut, [`${label}: ${(performance.now() - timers.get(label)).toFixed(3)}ms`]);
      timers.delete(label);
    }
  },
  group: (...a) => { if (a.length) emit(writeOut, a); groupIndent += '  '; },
  groupCollapsed: (...a) => { if (a.length) emit(writeOut, a); groupIndent += '  '; },
  groupEnd: () => { groupIndent = groupIndent.slice(2); },
};
G.console = console_;

// ---------------------------------------------------------------- randomness

let rngState = null; // xoshiro128** state, seeded from wasi:random on first use
function seedRng() {
  const b = randomApi.getRandomBytes(16);
  const s = new Uint32Array(4);
  for (let i = 0; i < 16; i++) s[i >> 2] |= b[i] << ((i & 3) * 8);
  if ((s[0] | s[1] | s[2] | s[3]) === 0) s[0] = 1;
  rngState = s;
}
function nextU32() {
  if (rngState === null) seedRng();
  const s = rngState;
  const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
  const t = s[1] << 9;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 11);
  return result;
}
function rotl(x, k) { return (x << k) | (x >>> (32 - k)); }
Object.defineProperty(Math, 'random', {
  value: function random() {
    return ((nextU32() >>> 5) * 67108864 + (nextU32() >>> 6)) / 9007199254740992;
  },
  writable: true, configurable: true, enumerable: false,
});

G.crypto = {
  getRandomValues(arr) {
    if (!ArrayBuffer.isView(arr) || arr instanceof Float32Array || arr instanceof Float64Array || arr instanceof DataView) {
      throw new TypeError('crypto.getRandomValues: argument must be an integer TypedArray');
    }
    if (arr.byteLength > 65536) throw new RangeError('crypto.getRandomValues: byteLength exceeds 65536');
    const bytes = randomApi.getRandomBytes(arr.byteLength);
    new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength).set(bytes);
    return arr;
  },
  randomUUID() {
    const b = randomApi.getRandomBytes(16);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = '';
    for (let i = 0; i < 16; i++) {
      h += (b[i] + 0x100).toString(16).slice(1);
      if (i === 3 || i === 5 || i === 7 || i === 9) h += '-';
    }
    return h;
  },
};

class TextEncoder {
  get encoding() { return 'utf-8'; }
  encode(s = '') { return utf8(String(s)).slice(); }
}
class TextDecoder {
  constructor(label = 'utf-8') {
    if (!/^utf-?8$/i.test(String(label))) throw new RangeError(`TextDecoder: unsupported encoding ${label}`);
  }
  get encoding() { return 'utf-8'; }
  decode(b) {
    if (b === undefined) return '';
    if (b instanceof ArrayBuffer) b = new Uint8Array(b);
    else if (ArrayBuffer.isView(b)) b = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    let s = utf8Decode(b);
    if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
    return s;
  }
}
if (typeof G.TextEncoder === 'undefined') G.TextEncoder = TextEncoder;
if (typeof G.TextDecoder === 'undefined') G.TextDecoder = TextDecoder;

// ---------------------------------------------------------------- event loop

// Microtasks. Errors thrown by a job end the run like an uncaught exception.
let jobs = [];
let jobHead = 0;
const enqueue = (job) => { jobs.push(job); };
function drainJobs() {
  while (jobHead < jobs.length) {
    const job = jobs[jobHead];
    jobs[jobHead++] = undefined;
    job();
  }
  jobs = [];
  jobHead = 0;
}

// Promise, spec-shaped, running its reactions on the queue above.
const unhandled = new Set();
const PENDING = 0, FULFILLED = 1, REJECTED = 2;
const STATE = Symbol('state');
const IS_PROMISE = new WeakSet();

function settle(p, state, value) {
  if (p[STATE].state !== PENDING) return;
  const st = p[STATE];
  st.state = state;
  st.value = value;
  const reactions = st.reactions;
  st.reactions = null;
  if (state === REJECTED && !st.handled) unhandled.add(p);
  for (const r of reactions) scheduleReaction(r, state, value);
}
function scheduleReaction(r, state, value) {
  enqueue(() => {
    const handler = state === FULFILLED ? r.onFulfilled : r.onRejected;
    if (typeof handler !== 'function') {
      if (state === FULFILLED) r.resolve(value); else r.reject(value);
      return;
    }
    let result;
    try { result = handler(value); } catch (e) { r.reject(e); return; }
    r.resolve(result);
  });
}
function resolvingFunctions(p) {
  let done = false;
  const resolve = (x) => {
    if (done) return;
    done = true;
    resolvePromise(p, x);
  };
  const reject = (e) => {
    if (done) return;
    done = true;
    settle(p, REJECTED, e);
  };
  return { resolve, reject };
}
function resolvePromise(p, x) {
  if (x === p) { settle(p, REJECTED, new TypeError('Chaining cycle detected for promise')); return; }
  if ((typeof x === 'object' && x !== null) || typeof x === 'function') {
    let then;
    try { then = x.then; } catch (e) { settle(p, REJECTED, e); return; }
    if (typeof then === 'function') {
      enqueue(() => {
        const fns = resolvingFunctions(p);
        try { then.call(x, fns.resolve, fns.reject); } catch (e) { fns.reject(e); }
      });
      return;
    }
  }
  settle(p, FULFILLED, x);
}

class Promise {
  constructor(executor) {
    if (typeof executor !== 'function') throw new TypeError('Promise resolver is not a function');
    Object.defineProperty(this, STATE, { value: { state: PENDING, value: undefined, reactions: [], handled: false } });
    IS_PROMISE.add(this);
    const { resolve, reject } = resolvingFunctions(this);
    try { executor(resolve, reject); } catch (e) { reject(e); }
  }
  then(onFulfilled, onRejected) {
    if (!IS_PROMISE.has(this)) throw new TypeError('Promise.prototype.then called on incompatible receiver');
    let resolve, reject;
    const C = speciesOf(this);
    const derived = new C((res, rej) => { resolve = res; reject = rej; });
    const r = { onFulfilled, onRejected, resolve, reject };
    const st = this[STATE];
    if (st.state === PENDING) st.reactions.push(r);
    else scheduleReaction(r, st.state, st.value);
    if (!st.handled) { st.handled = true; unhandled.delete(this); }
    return derived;
  }
  catch(onRejected) { return this.then(undefined, onRejected); }
  finally(onFinally) {
    if (typeof onFinally !== 'function') return this.then(onFinally, onFinally);
    const C = speciesOf(this);
    return this.then(
      (v) => C.resolve(onFinally()).then(() => v),
      (e) => C.resolve(onFinally()).then(() => { throw e; }),
    );
  }
  static resolve(x) {
    if (IS_PROMISE.has(x) && x.constructor === this) return x;
    return new this((res) => res(x));
  }
  static reject(e) { return new this((_, rej) => rej(e)); }
  static withResolvers() {
    let resolve, reject;
    const promise = new this((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  }
  static try(f, ...args) { return new this((res) => res(f(...args))); }
  static all(iterable) {
    const C = this;
    return new C((resolve, reject) => {
      const results = [];
      let remaining = 1, i = 0;
      for (const item of iterable) {
        const idx = i++;
        remaining++;
        C.resolve(item).then((v) => { results[idx] = v; if (--remaining === 0) resolve(results); }, reject);
      }
      if (--remaining === 0) resolve(results);
    });
  }
  static allSettled(iterable) {
    const C = this;
    return new C((resolve) => {
      const results = [];
      let remaining = 1, i = 0;
      for (const item of iterable) {
        const idx = i++;
        remaining++;
        C.resolve(item).then(
          (value) => { results[idx] = { status: 'fulfilled', value }; if (--remaining === 0) resolve(results); },
          (reason) => { results[idx] = { status: 'rejected', reason }; if (--remaining === 0) resolve(results); },
        );
      }
      if (--remaining === 0) resolve(results);
    });
  }
  static race(iterable) {
    const C = this;
    return new C((resolve, reject) => {
      for (const item of iterable) C.resolve(item).then(resolve, reject);
    });
  }
  static any(iterable) {
    const C = this;
    return new C((resolve, reject) => {
      const errors = [];
      let remaining = 1, i = 0;
      const fail = () => reject(new AggregateError(errors, 'All promises were rejected'));
      for (const item of iterable) {
        const idx = i++;
        remaining++;
        C.resolve(item).then(resolve, (e) => { errors[idx] = e; if (--remaining === 0) fail(); });
      }
      if (--remaining === 0) fail();
    });
  }
  static get [Symbol.species]() { return this; }
}
Object.defineProperty(Promise.prototype, Symbol.toStringTag, { value: 'Promise', configurable: true });
function speciesOf(p) {
  const C = p.constructor;
  if (C === undefined) return Promise;
  const S = C[Symbol.species];
  return S === undefined || S === null ? Promise : S;
}
G.Promise = Promise;
G.queueMicrotask = (f) => {
  if (typeof f !== 'function') throw new TypeError('queueMicrotask: callback must be a function');
  enqueue(() => f());
};

// Timers run in virtual time: once the microtask queue is empty, the earliest timer
// fires immediately (nothing really waits). Date.now() is not shifted.
let timerSeq = 0;
let timerQueue = []; // {id, at, seq, fn, args, interval}
let virtualNow = 0;
const liveTimers = new Map();
function addTimer(fn, delay, args, repeat) {
  if (typeof fn !== 'function') throw new TypeError('The "callback" argument must be of type function');
  let d = Number(delay);
  if (!(d >= 1)) d = 1;
  if (d > 2147483647) d = 1;
  const id = ++timerSeq;
  const t = { id, at: virtualNow + d, seq: id, fn, args, interval: repeat ? d : 0 };
  liveTimers.set(id, t);
  timerQueue.push(t);
  return id;
}
function clearTimer(id) {
  if (id !== null && typeof id === 'object') id = Number(id);
  liveTimers.delete(id);
}
function nextTimer() {
  let best = -1;
  for (let i = 0; i < timerQueue.length; i++) {
    const t = timerQueue[i];
    if (!liveTimers.has(t.id) || liveTimers.get(t.id) !== t) { timerQueue.splice(i--, 1); continue; }
    if (best < 0 || t.at < timerQueue[best].at || (t.at === timerQueue[best].at && t.seq < timerQueue[best].seq)) best = i;
  }
  if (best < 0) return null;
  return timerQueue.splice(best, 1)[0];
}
G.setTimeout = (fn, delay, ...args) => addTimer(fn, delay, args, false);
G.setInterval = (fn, delay, ...args) => addTimer(fn, delay, args, true);
G.setImmediate = (fn, ...args) => addTimer(fn, 0, args, false);
G.clearTimeout = clearTimer;
G.clearInterval = clearTimer;
G.clearImmediate = clearTimer;

function resetLoop() {
  jobs = []; jobHead = 0;
  unhandled.clear();
  timerQueue = []; liveTimers.clear();
  virtualNow = 0;
}

class UnhandledRejection {
  constructor(reason) { this.reason = reason; }
}

// Runs microtasks and timers until nothing is left, like Node's event loop.
function runLoop() {
  for (;;) {
    drainJobs();
    if (exitNow !== null) return;
    if (unhandled.size) {
      const p = unhandled.values().next().value;
      throw new UnhandledRejection(p[STATE].value);
    }
    const t = nextTimer();
    if (t === null) return;
    if (t.at > virtualNow) virtualNow = t.at;
    if (t.interval) {
      t.at = virtualNow + t.interval;
      t.seq = ++timerSeq;
      timerQueue.push(t);
    } else {
      liveTimers.delete(t.id);
    }
    t.fn(...t.args);
  }
}

// Drives a generator that yields awaited values: the body of a rewritten async function.
function runAsync(genFn, self, args) {
  return new Promise((resolve, reject) => {
    const gen = genFn.apply(self, args || []);
    const step = (method, arg) => {
      let r;
      try { r = gen[method](arg); } catch (e) { reject(e); return; }
      if (r.done) { resolve(r.value); return; }
      Promise.resolve(r.value).then((v) => step('next', v), (e) => step('throw', e));
    };
    step('next', undefined);
  });
}

// `for await (x of it)` is rewritten to `for (x of (yield collect(it)))`: the iterable
// is consumed completely first (eagerly), then its awaited values are iterated.
function collectAsyncIterable(it) {
  return runAsync(function* () {
    const out = [];
    if (it != null && typeof it[Symbol.asyncIterator] === 'function') {
      const iter = it[Symbol.asyncIterator]();
      for (;;) {
        const r = yield iter.next();
        if (r.done) break;
        out.push(r.value);
      }
    } else {
      for (const v of it) out.push(yield v);
    }
    return out;
  });
}

// Top-level await: the run's body becomes a generator; its outcome is checked after the loop.
let topLevel = null;
function runTopLevel(genFn, self) {
  const p = runAsync(genFn, self);
  const st = { done: false, failed: false, error: undefined };
  p.then(() => { st.done = true; }, (e) => { st.done = true; st.failed = true; st.error = e; });
  topLevel = st;
}

Object.defineProperty(G, '__sandlot', {
  value: Object.freeze({ a: runAsync, fa: collectAsyncIterable, tla: runTopLevel }),
  writable: false, enumerable: false, configurable: false,
});

// ---------------------------------------------------------------- process

class ProcessExit {
  constructor(code) { this.code = code; }
  toString() { return `process.exit(${this.code})`; }
}
let pendingExitCode = undefined;
function toExitCode(c) {
  if (c === undefined || c === null) return 0;
  const n = Number(c);
  return Number.isFinite(n) ? n | 0 : 1;
}
// The host's workspace path; only reported (this runtime has no file system).
let workingDirectory = '/workspace';
let perfStart = 0; // set on the first run (the snapshot's clock is meaningless later)
G.process = {
  argv: ['quickjs', 'main.js'],
  argv0: 'quickjs',
  execArgv: [],
  env: {},
  platform: 'wasi',
  arch: 'wasm32',
  pid: 1,
  version: 'v0.0.0',
  versions: { quickjs: 'quickjs' },
  exit(code) {
    if (exitNow === null) {
      let c = pendingExitCode;
      try { c = code === undefined ? pendingExitCode : toExitCode(code); } catch { c = 1; }
      exitNow = toExitCode(c);
    }
    throw new ProcessExit(exitNow);
  },
  get exitCode() { return pendingExitCode; },
  set exitCode(v) { pendingExitCode = v; },
  cwd: () => workingDirectory,
  nextTick: (f, ...args) => { enqueue(() => f(...args)); },
  hrtime: Object.assign(
    (prev) => {
      const ns = Math.round((performance.now() - perfStart) * 1e6);
      let s = Math.floor(ns / 1e9), n = ns % 1e9;
      if (prev) { s -= prev[0]; n -= prev[1]; if (n < 0) { s--; n += 1e9; } }
      return [s, n];
    },
    { bigint: () => BigInt(Math.round((performance.now() - perfStart) * 1e6)) },
  ),
  uptime: () => (performance.now() - perfStart) / 1000,
  memoryUsage: () => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }),
  stdout: { write: (s) => { writeOut(typeof s === 'string' ? s : utf8Decode(s)); return true; }, isTTY: false },
  stderr: { write: (s) => { writeErr(typeof s === 'string' ? s : utf8Decode(s)); return true; }, isTTY: false },
  on() { return this; },
  once() { return this; },
  off() { return this; },
};

// ---------------------------------------------------------------- source rewriting

// Cheap pre-check: only code mentioning one of these words is parsed.
const NEEDS_PARSE = /\b(let|const|class|async|await)\b/;
const ACORN_OPTS = {
  ecmaVersion: 'latest',
  sourceType: 'script',
  allowAwaitOutsideFunction: true,
  allowHashBang: true,
};

// acorn's Parser#strictDirective does `input.slice(start)` once per function body; in
// QuickJS a slice copies, so parsing became quadratic in the number of functions. Same
// logic with sticky regexes (`keywordOpAt` simplified to a regex).
{
  const skipWhiteSpace = /(?:\s|\/\/.*|\/\*[^]*?\*\/)*/y;
  const literal = /(?:'((?:\\[^]|[^'\\])*?)'|"((?:\\[^]|[^"\\])*?)")/y;
  const lineBreak = /\r\n?|\n|\u2028|\u2029/;
  const keywordOp = /(?:instanceof|in)(?![\w$\u0080-\uffff])/y;
  const skip = (input, pos) => { skipWhiteSpace.lastIndex = pos; return skipWhiteSpace.exec(input)[0].length; };
  Parser.prototype.strictDirective = function (start) {
    if (this.options.ecmaVersion < 5) return false;
    const input = this.input;
    for (;;) {
      start += skip(input, start);
      literal.lastIndex = start;
      const match = literal.exec(input);
      if (!match) return false;
      if ((match[1] || match[2]) === 'use strict') {
        const after = start + match[0].length;
        const spaceLen = skip(input, after);
        const end = after + spaceLen;
        const next = input.charAt(end);
        keywordOp.lastIndex = end;
        return next === ';' || next === '}' ||
          (lineBreak.test(input.slice(after, end)) &&
            !(/[(`.[+\-/*%<>=,?^&]/.test(next) ||
              (next === '!' && input.charAt(end + 1) === '=') ||
              (next === 'i' && keywordOp.test(input))));
      }
      start += match[0].length;
      start += skip(input, start);
      if (input[start] === ';') start++;
    }
  };
}

function isNode(v) { return v !== null && typeof v === 'object' && typeof v.type === 'string'; }

function forEachChild(node, f) {
  for (const key in node) {
    if (key === 'type' || key === 'start' || key === 'end' || key === 'loc' || key === 'range') continue;
    const v = node[key];
    if (isArray(v)) { for (const c of v) if (isNode(c)) f(c, node); }
    else if (isNode(v)) f(v, node);
  }
}

// Whether `fn`'s own body (not nested ordinary functions) uses something a generator
// wrapper cannot express: `super`, `new.target`; and whether it uses `arguments`.
function scanBody(fn) {
  const res = { unsupported: false, usesArguments: false };
  const visit = (n) => {
    if (n.type === 'Super' || n.type === 'MetaProperty') res.unsupported = true;
    if (n.type === 'Identifier' && n.name === 'arguments') res.usesArguments = true;
    if ((n.type === 'FunctionExpression' || n.type === 'FunctionDeclaration') && n !== fn) return;
    forEachChild(n, visit);
  };
  forEachChild(fn, visit);
  return res;
}

function patternNames(p, out) {
  if (!p) return out;
  switch (p.type) {
    case 'Identifier': out.push(p.name); break;
    case 'ObjectPattern': for (const prop of p.properties) patternNames(prop.type === 'RestElement' ? prop.argument : prop.value, out); break;
    case 'ArrayPattern': for (const e of p.elements) patternNames(e, out); break;
    case 'RestElement': patternNames(p.argument, out); break;
    case 'AssignmentPattern': patternNames(p.left, out); break;
  }
  return out;
}

// Returns the code to evaluate. Rewrites (all of them keep line numbers):
// * top-level `let`/`const` become `var`, `class C {}` becomes `var C = class C {};`,
//   so they are global properties visible to later runs;
// * `async` functions, arrows and methods become ordinary ones returning
//   `__sandlot.a(function* () { ... }, this, arguments)`, with `await x` → `(yield x)`;
// * if the code uses top-level `await`, the whole body becomes such a generator; its
//   top-level declarations then become assignments to global variables.
// Code acorn cannot parse is returned unchanged, so QuickJS reports the error itself.
function transform(code) {
  if (code.startsWith('#!')) code = '//' + code.slice(2);
  if (!NEEDS_PARSE.test(code)) return code;
  let ast;
  try { ast = parse(code, ACORN_OPTS); } catch { return code; }

  const edits = [];
  let seq = 0;
  // kind 0: opening insert / replacement, kind 1: closing insert
  const open = (pos, text, end = pos) => edits.push({ pos, end, text, kind: 0, seq: seq++ });
  const close = (pos, text) => edits.push({ pos, end: pos, text, kind: 1, seq: seq++ });
  let tla = false;

  const asyncKeyword = (from, to) => {
    const m = /\basync\b/.exec(code.slice(from, to));
    return m ? from + m.index : -1;
  };

  const visitFunction = (fn, parent) => {
    let ctx = 'plain';
    if (fn.async && !fn.generator) {
      const scan = scanBody(fn);
      if (!scan.unsupported) {
        const isMethod = parent && (parent.type === 'MethodDefinition' || (parent.type === 'Property' && (parent.method || parent.kind !== 'init'))) && parent.value === fn;
        const kw = isMethod ? asyncKeyword(parent.start, parent.key.start) : asyncKeyword(fn.start, fn.start + 5);
        if (kw >= 0) {
          ctx = 'gen';
          open(kw, '', kw + 5);
          if (fn.type === 'ArrowFunctionExpression') {
            const args = scan.usesArguments ? ', arguments' : '';
            if (fn.expression) {
              open(fn.body.start, '__sandlot.a(function* () { return (');
              close(fn.body.end, `); }, this${args})`);
            } else {
              open(fn.body.start + 1, ' return __sandlot.a(function* () {');
              close(fn.body.end - 1, `}, this${args}); `);
            }
          } else {
            open(fn.body.start + 1, ' return __sandlot.a(function* () {');
            close(fn.body.end - 1, '}, this, arguments); ');
          }
        }
      }
    }
    forEachChild(fn, (c, p) => visit(c, p, ctx));
  };

  const visit = (node, parent, ctx) => {
    switch (node.type) {
      case 'FunctionDeclaration': case 'FunctionExpression': case 'ArrowFunctionExpression':
        visitFunction(node, parent);
        return;
      case 'AwaitExpression':
        if (ctx === 'gen' || ctx === 'top') {
          if (ctx === 'top') tla = true;
          open(node.start, '(yield', node.start + 5);
          close(node.end, ')');
        }
        break;
      case 'ForOfStatement':
        if (node.await && (ctx === 'gen' || ctx === 'top')) {
          const m = /\bawait\b/.exec(code.slice(node.start + 3, node.left.start));
          if (m) {
            if (ctx === 'top') tla = true;
            const kw = node.start + 3 + m.index;
            open(kw, '', kw + 5);
            open(node.right.start, '(yield __sandlot.fa(');
            close(node.right.end, '))');
          }
        }
        break;
    }
    forEachChild(node, (c, p) => visit(c, p, ctx));
  };

  for (const stmt of ast.body) visit(stmt, ast, 'top');

  if (!tla) {
    for (const stmt of ast.body) {
      if (stmt.type === 'VariableDeclaration' && (stmt.kind === 'let' || stmt.kind === 'const')) {
        open(stmt.start, 'var', stmt.start + stmt.kind.length);
      } else if (stmt.type === 'ClassDeclaration' && stmt.id) {
        open(stmt.start, `var ${stmt.id.name} = `);
        close(stmt.end, ';');
      }
    }
  } else {
    const names = [];
    const fnNames = [];
    for (const stmt of ast.body) {
      if (stmt.type === 'VariableDeclaration' && (stmt.kind === 'let' || stmt.kind === 'const' || stmt.kind === 'var')) {
        open(stmt.start, ';(', stmt.start + stmt.kind.length);
        for (const d of stmt.declarations) {
          patternNames(d.id, names);
          if (!d.init && stmt.kind !== 'var') close(d.id.end, ' = void 0');
        }
        close(stmt.declarations[stmt.declarations.length - 1].end, ')');
      } else if (stmt.type === 'ClassDeclaration' && stmt.id) {
        names.push(stmt.id.name);
        open(stmt.start, `;${stmt.id.name} = `);
        close(stmt.end, ';');
      } else if (stmt.type === 'FunctionDeclaration' && stmt.id) {
        fnNames.push(stmt.id.name);
      }
    }
    const decl = names.length ? `var ${[...new Set(names)].join(', ')}; ` : '';
    const hoist = fnNames.map((n) => `globalThis[${jsonStringify(n)}] = ${n}; `).join('');
    edits.push({ pos: 0, end: 0, text: `${decl}__sandlot.tla(function* () { ${hoist}`, kind: 0, seq: -1 });
    edits.push({ pos: code.length, end: code.length, text: '\n}, this);', kind: 1, seq: -1 });
  }

  if (edits.length === 0) return code;
  edits.sort((a, b) => {
    if (a.pos !== b.pos) return a.pos - b.pos;
    if (a.kind !== b.kind) return b.kind - a.kind; // closing inserts before opening ones
    return a.kind === 1 ? b.seq - a.seq : a.seq - b.seq; // inner closes first, outer opens first
  });
  const parts = [];
  let cursor = 0;
  for (const e of edits) {
    if (e.pos < cursor) continue; // overlapping edit: cannot happen for valid input
    parts.push(code.slice(cursor, e.pos), e.text);
    cursor = e.end;
  }
  parts.push(code.slice(cursor));
  return parts.join('');
}

// ---------------------------------------------------------------- errors

// Stack frames of this file are noise for the user.
function userStack(e) {
  let stack;
  try { stack = e.stack; } catch { return ''; }
  if (typeof stack !== 'string' || stack === '') return '';
  const lines = stack.split('\n').filter((l) => l.trim() !== '' && !/runtime\.js|__sandlot|\(native\)/.test(l));
  return lines.length ? lines.join('\n') + '\n' : '';
}
function describeUncaught(e, prefix) {
  if (isError(e)) return `${prefix}${errorHeader(e)}\n${userStack(e)}`;
  return `${prefix}${fmt(e)}\n`;
}
function reportUncaught(e, prefix) {
  try { writeErr(describeUncaught(e, prefix)); } catch {
    try { writeErr(`${prefix}(error could not be printed)\n`); } catch {}
  }
}

// ---------------------------------------------------------------- tools

// `require("sandlot_tools")`: the session's tools as async functions, the same module
// the container backends' Node binding is. A call goes to the host at once (the host
// import blocks until it answers) and settles the promise it returns; calls made side
// by side (Promise.all) therefore run one after another.
class ToolError extends NativeError {
  constructor(message, kind) {
    super(message);
    this.name = 'ToolError';
    this.kind = kind || 'tool_error';
  }
}
let nextToolId = 1;
function toolExchange(request) {
  request.v = 1;
  request.id = nextToolId++;
  let answer;
  try {
    answer = toolsApi.call(jsonStringify(request));
  } catch (e) {
    // The import's error: no run that offers tools is under way.
    const why = typeof e === 'string' ? e : (e && (e.payload || e.message)) || String(e);
    throw new ToolError(String(why), 'protocol');
  }
  let parsed;
  try { parsed = JSON.parse(answer); } catch { throw new ToolError('the answer is not JSON', 'protocol'); }
  if (parsed.ok) return parsed;
  const error = parsed.error || {};
  throw new ToolError(error.message || 'the call failed', error.kind);
}
function settled(work) {
  return new Promise((resolve, reject) => {
    try { resolve(work()); } catch (e) { reject(e); }
  });
}
function callTool(name, args) {
  return settled(() => toolExchange({ op: 'call', tool: String(name), args: args === undefined ? {} : args }).value);
}
function listTools() {
  return settled(() => toolExchange({ op: 'list' }).tools);
}
// Any other name is a tool: the host says whether the session has it.
const toolsModule = new Proxy(
  { ToolError, call: callTool, tools: listTools },
  {
    get(target, name) {
      if (typeof name !== 'string' || hasOwn.call(target, name) || name === 'then' || name.startsWith('__')) {
        return target[name];
      }
      return (args) => callTool(name, args);
    },
  },
);
const builtinModules = { sandlot_tools: toolsModule };
G.require = function require(name) {
  if (hasOwn.call(builtinModules, name)) return builtinModules[name];
  const error = new NativeError(`Cannot find module '${name}': this runtime has no module system; only "sandlot_tools" can be required`);
  error.code = 'MODULE_NOT_FOUND';
  throw error;
};

// ---------------------------------------------------------------- interpreter

function runCode(code) {
  if (perfStart === 0) perfStart = performance.now();
  exitNow = null;
  pendingExitCode = undefined;
  topLevel = null;
  groupIndent = '';
  resetLoop();
  try {
    const value = indirectEval(transform(String(code)));
    runLoop();
    if (exitNow !== null) return exitNow;
    if (topLevel !== null) {
      if (topLevel.failed) {
        reportUncaught(topLevel.error, 'Uncaught ');
        return 1;
      }
      if (!topLevel.done) {
        writeErr('Warning: Detected unsettled top-level await\n');
        return 13;
      }
    } else if (value !== undefined) {
      // The code's completion value, as a notebook cell, Node's REPL and the
      // container kernel show it.
      writeOut(`${typeof value === 'string' ? quoted(value) : fmt(value)}\n`);
    }
    return toExitCode(pendingExitCode);
  } catch (e) {
    if (exitNow !== null) return exitNow;
    if (e instanceof UnhandledRejection) reportUncaught(e.reason, 'Uncaught (in promise) ');
    else reportUncaught(e, 'Uncaught ');
    return 1;
  } finally {
    resetLoop();
    topLevel = null;
  }
}

class Session {
  run(code) {
    try {
      const rc = runCode(code);
      return typeof rc === 'number' ? rc | 0 : 1;
    } catch {
      // Only reachable if even error reporting failed (e.g. stack exhaustion).
      return exitNow !== null ? exitNow | 0 : 1;
    }
  }

  setEnv(vars) {
    for (const [name, value] of vars) G.process.env[name] = value;
  }

  setCwd(path) {
    workingDirectory = String(path);
  }
}

export const interpreter = {
  info() {
    return {
      id: 'quickjs',
      languages: ['javascript'],
      version: SANDLOT_BUILD,
      bundled: [],
    };
  },
  Session,
};
