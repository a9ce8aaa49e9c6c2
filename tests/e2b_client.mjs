// E2B's official JavaScript SDKs (pinned in tests/run.sh) against `sandlot serve --e2b`:
// the checks of tests/e2b_client.py, through `e2b` and `@e2b/code-interpreter`.
//
//     node e2b_client.mjs TEMPLATE SHELL
//
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (Alice's key) come from the environment,
// BOB_KEY is a second key, E2B_NPM_PREFIX the folder whose node_modules holds the SDKs.
// Prints `ok: ...` for each check; any failure throws.

import { createRequire } from 'node:module'
import { randomBytes } from 'node:crypto'
import path from 'node:path'

const require = createRequire(path.join(process.env.E2B_NPM_PREFIX, 'index.js'))
const { Sandbox } = require('@e2b/code-interpreter')
const { CommandExitError, NotFoundError, InvalidArgumentError } = require('e2b')

const [template, shellArg] = process.argv.slice(2)
const shell = shellArg === 'yes'
const bob = process.env.BOB_KEY
const tag = `e2b-client-js-${process.pid}-${template}`
const ok = (what) => console.log(`ok: ${what}`)
const assert = (condition, what) => {
  if (!condition) throw new Error(`failed: ${what}`)
}
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b)

const sandbox = await Sandbox.create(template, {
  timeoutMs: 120_000,
  metadata: { suite: tag },
  envs: { GREETING: 'hello' },
})
ok('created')

const first = await sandbox.runCode('x = 41')
assert(!first.error, `x = 41: ${JSON.stringify(first.error)}`)
const second = await sandbox.runCode('print(x + 1)')
assert(eq(second.logs.stdout, ['42\n']), `state: ${JSON.stringify(second.logs)}`)
assert(second.executionCount === 2, `count: ${second.executionCount}`)
ok('state across run_code calls')

const value = await sandbox.runCode('x * 2')
assert(value.text === '82' && value.logs.stdout.length === 0, value)
const frame = await sandbox.runCode("import pandas as pd\nprint('made')\npd.DataFrame({'a': [1, 2]})")
const main = frame.results.filter((r) => r.isMainResult)
assert(main.length === 1 && main[0].html.includes('<table'), frame)
assert(eq(frame.logs.stdout, ['made\n']), frame.logs)
const shown = await sandbox.runCode("display('one'); display({'k': 1})\nNone")
assert(eq(shown.results.map((r) => r.text), ["'one'", "{'k': 1}"]), shown)
assert(shown.text === undefined, shown.text)
ok('a last value as the main result, a frame as HTML, display()')

const env = await sandbox.runCode("import os; print(os.environ['GREETING'])")
assert(eq(env.logs.stdout, ['hello\n']), `env: ${JSON.stringify(env.logs)}`)
ok("the sandbox's environment")

const streamed = []
const chart = await sandbox.runCode(
  "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" +
    "print('drawing')\nplt.plot([1, 4, 9])\nplt.show()",
  { onStdout: (message) => streamed.push(message.line) },
)
const pngs = chart.results.filter((r) => r.png).map((r) => r.png)
assert(pngs.length === 1, `pngs: ${chart.results.length}`)
assert(Buffer.from(pngs[0], 'base64').subarray(0, 8).equals(Buffer.from('\x89PNG\r\n\x1a\n', 'latin1')), 'png magic')
assert(eq(streamed, ['drawing\n']), `streamed: ${JSON.stringify(streamed)}`)
ok('a matplotlib chart as a PNG result, output streamed')

const failed = await sandbox.runCode('def f():\n    return 1 / 0\nf()')
assert(failed.error && failed.error.name === 'ZeroDivisionError', JSON.stringify(failed.error))
assert(failed.error.value === 'division by zero', failed.error.value)
assert(failed.error.traceback.includes('return 1 / 0'), failed.error.traceback)
assert(failed.logs.stderr.length === 0, JSON.stringify(failed.logs))
ok('an exception as an error with its traceback')

const text = 'naïve café\n'.repeat(3)
await sandbox.files.write('/home/user/notes/a.txt', text)
assert((await sandbox.files.read('/home/user/notes/a.txt')) === text, 'text read back')
const blob = randomBytes(10 << 20)
await sandbox.files.write('blob.bin', blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.length))
const back = await sandbox.files.read('/home/user/blob.bin', { format: 'bytes' })
assert(Buffer.from(back).equals(blob), 'binary read back')
ok('files written and read back, text and 10 MB binary')

assert((await sandbox.files.makeDir('/home/user/made/deeper')) === true, 'makeDir made it')
assert((await sandbox.files.makeDir('made')) === false, 'makeDir of one that exists')
const moved = await sandbox.files.rename('notes/a.txt', '/home/user/made/deeper/b.txt')
assert(eq([moved.name, moved.path, moved.type], ['b.txt', '/home/user/made/deeper/b.txt', 'file']), moved)
const info = await sandbox.files.getInfo('made/deeper/b.txt')
assert(info.size === Buffer.byteLength(text) && info.permissions.startsWith('-rw'), info)
assert(info.modifiedTime.getFullYear() >= 2024, info.modifiedTime)
assert(!(await sandbox.files.exists('notes/a.txt')), 'the moved file is gone')
const tree = (await sandbox.files.list('/home/user/made', { depth: 2 }))
  .map((e) => [e.path, e.type])
  .sort()
assert(eq(tree, [['/home/user/made/deeper', 'dir'], ['/home/user/made/deeper/b.txt', 'file']]), tree)
await sandbox.files.remove('/home/user/made')
assert(!(await sandbox.files.exists('/home/user/made')), 'removed')
try {
  await sandbox.files.getInfo('/home/user/made')
  throw new Error('a removed directory was found')
} catch (e) {
  assert(e instanceof NotFoundError, e)
}
try {
  await sandbox.files.list('/etc')
  throw new Error('a path outside the workspace was listed')
} catch (e) {
  assert(e instanceof InvalidArgumentError && e.message.includes('/home/user'), e)
}
ok('files listed, described, made, moved and removed')

// `prints` writes one and GREETING to stdout, two to stderr; `fails` writes partial
// and exits 3.
async function streamsAndFails(prints, fails) {
  const out = []
  const done = await sandbox.commands.run(prints, { onStdout: (d) => out.push(d) })
  assert(done.exitCode === 0 && done.stdout === 'one\nhello\n', JSON.stringify(done))
  assert(done.stderr === 'two\n', JSON.stringify(done))
  assert(out.join('') === 'one\nhello\n', JSON.stringify(out))
  try {
    await sandbox.commands.run(fails)
    throw new Error('a failing command did not throw')
  } catch (e) {
    assert(e instanceof CommandExitError && e.exitCode === 3 && e.stdout === 'partial\n', String(e))
  }
}

if (shell) {
  await streamsAndFails('echo one; echo two >&2; echo $GREETING', 'echo partial; exit 3')
  ok('commands.run with streamed output and exit codes')
} else {
  // No shell: a command runs the interpreter, in the sandbox's files.
  await streamsAndFails(
    `python3 -c "import os, sys; print('one'); print('two', file=sys.stderr); print(os.environ['GREETING'])"`,
    `python3 -c 'import sys; print("partial"); sys.exit(3)'`,
  )
  await sandbox.files.write('job.py', 'import sys\nprint(sys.argv)\n')
  const argv = (await sandbox.commands.run(`python3 job.py a 'b c'`)).stdout
  assert(argv === "['job.py', 'a', 'b c']\n", argv)
  try {
    await sandbox.commands.run('echo hi | wc -c')
    throw new Error('shell syntax ran on a backend without a shell')
  } catch (e) {
    assert(String(e).includes('python3 -c CODE'), String(e))
  }
  ok('commands.run runs the interpreter where there is no shell, exit codes, argv')
}

const listed = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
assert(eq(listed.map((s) => s.sandboxId), [sandbox.sandboxId]), JSON.stringify(listed))
ok('listing by metadata')

const again = await Sandbox.connect(sandbox.sandboxId)
assert(eq((await again.runCode('print(x)')).logs.stdout, ['41\n']), 'connect')
ok('connect to a running sandbox')

const theirs = await Sandbox.list({ apiKey: bob }).nextItems()
assert(!theirs.some((s) => s.sandboxId === sandbox.sandboxId), 'bob lists it')
for (const attempt of [
  () => Sandbox.connect(sandbox.sandboxId, { apiKey: bob }),
  () => Sandbox.getInfo(sandbox.sandboxId, { apiKey: bob }),
]) {
  try {
    await attempt()
    throw new Error('another key reached the sandbox')
  } catch (e) {
    assert(e instanceof NotFoundError, String(e))
  }
}
assert((await Sandbox.kill(sandbox.sandboxId, { apiKey: bob })) === false, 'bob killed it')
assert(eq((await sandbox.runCode('print(x)')).logs.stdout, ['41\n']), 'still there')
ok('another key cannot see or touch it')

assert((await sandbox.kill()) === true, 'kill')
try {
  await Sandbox.getInfo(sandbox.sandboxId)
  throw new Error('a killed sandbox is still there')
} catch (e) {
  assert(e instanceof NotFoundError, String(e))
}
ok('kill')

const short = await Sandbox.create(template, { timeoutMs: 120_000 })
await short.setTimeout(2_000)
await new Promise((r) => setTimeout(r, 4_000))
try {
  await Sandbox.getInfo(short.sandboxId)
  throw new Error('the sandbox outlived its timeout')
} catch (e) {
  assert(e instanceof NotFoundError, String(e))
}
ok('a timeout ends the sandbox')
