// The real @e2b/code-interpreter 2.8.0 (pinned in package-lock.json) against a
// real airlockd and the code-interpreter-v1 template (images/code-interpreter.json,
// its service src/guest/interp/airlock_interp.py on guest port 49999, reached
// through E2B's envd routing: E2b-Sandbox-Port 49999). Run by run_e2b.py with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY only; one "ok:"/"FAIL:" line per case.
import { Sandbox } from '@e2b/code-interpreter'

const pkg = '@e2b/code-interpreter'
const only = (process.env.E2B_ONLY || '').split(',').filter(Boolean)
let failed = 0

async function check(name, fn) {
  if (only.length && !only.some((o) => name.startsWith(o))) return
  try {
    await fn()
    console.log(`ok: ${pkg}: ${name}`)
  } catch (e) {
    failed++
    console.log(`FAIL: ${pkg}: ${name} (${String(e && e.stack || e).split('\n').slice(0, 3).join(' | ')})`)
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg) }
function eq(a, b, what) {
  assert(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`)
}
async function rejects(p, pred, what) {
  let err = null
  try { await p } catch (e) { err = e }
  assert(err !== null, `${what}: did not throw`)
  assert(pred(err), `${what}: wrong error ${err && err.name}: ${err && err.message}`)
  return err
}

// The loaded 2-core test machine: every call gets 10 min (TCG kernels are slow).
const rt = { requestTimeoutMs: 600_000 }
const run = { ...rt, timeoutMs: 600_000 }
let sbx, t0

await check('interp: create (default template code-interpreter-v1)', async () => {
  t0 = Date.now()
  // E2B_INTERP_CONNECT=id: the cases against a sandbox made by hand (a
  // service altered in it, to see each case fail without its feature).
  sbx = process.env.E2B_INTERP_CONNECT ? await Sandbox.connect(process.env.E2B_INTERP_CONNECT, rt)
    : await Sandbox.create({ ...rt, timeoutMs: 600_000, allowInternetAccess: false,
      envs: { FOO: 'from-sandbox' }, metadata: { suite: 'interp' } })
  const i = await sbx.getInfo()
  eq(i.templateId, 'code-interpreter-v1', 'template')
})
if (!sbx) { console.log(`FAIL: ${pkg}: no sandbox, stopping`); process.exit(1) }

await check('interp: runCode text result', async () => {
  const t = Date.now()
  const e = await sbx.runCode('1 + 1', run)
  eq(e.text, '2', 'text')
  eq(e.results.length, 1, 'results')
  assert(e.results[0].isMainResult, 'main result')
  assert(e.error === undefined, `error ${JSON.stringify(e.error)}`)
  console.log(`info: ${pkg}: first runCode ${Date.now() - t} ms (create ${t - t0} ms)`)
})

await check('interp: stdout and stderr', async () => {
  const seen = []
  const e = await sbx.runCode('import sys\nprint("hello")\nsys.stderr.write("oops\\n")', {
    ...run, onStdout: (m) => seen.push(m.line) })
  eq(e.logs.stdout, ['hello\n'], 'stdout')
  eq(e.logs.stderr, ['oops\n'], 'stderr')
  eq(seen, ['hello\n'], 'onStdout callback')
})

await check('interp: error (name, value, traceback)', async () => {
  const e = await sbx.runCode('1 / 0', run)
  assert(e.error, 'no error')
  eq(e.error.name, 'ZeroDivisionError', 'name')
  eq(e.error.value, 'division by zero', 'value')
  assert(e.error.traceback.includes('ZeroDivisionError'), `traceback ${e.error.traceback}`)
  assert(!/\x1b\[/.test(e.error.traceback), 'traceback without ANSI colours')
})

await check('interp: PNG plot (matplotlib)', async () => {
  const e = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()', run)
  const r = e.results.find((x) => x.png)
  assert(r, `no png result: ${JSON.stringify(e.results.map((x) => x.formats()))}`)
  const png = Buffer.from(r.png, 'base64')
  eq([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
  assert(png.length > 1000, `png of ${png.length} bytes`)
  assert(/Figure/.test(r.text || ''), `text ${r.text}`)
})

await check('interp: DataFrame (text/html and data)', async () => {
  const e = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})', run)
  const r = e.results[0]
  assert(r && r.isMainResult, 'main result')
  assert(/<table/.test(r.html || ''), `html ${r.html}`)
  assert(/a\s+b/.test(r.text || ''), `text ${r.text}`)
  eq(r.data, { a: [1, 2], b: ['x', 'y'] }, 'e2b/data')
})

await check('interp: env from the sandbox and per call', async () => {
  let e = await sbx.runCode('import os; os.environ.get("FOO")', run)
  eq(e.text, 'from-sandbox', 'sandbox env')
  e = await sbx.runCode('import os; os.environ.get("BAR")', { ...run, envs: { BAR: 'per-call' } })
  eq(e.text, 'per-call', 'per-call env')
  e = await sbx.runCode('import os; repr(os.environ.get("BAR"))', run)
  eq(e.text, 'None', 'per-call env restored afterwards')
})

await check('interp: contexts (create, cwd, isolation, list, restart, remove)', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp', language: 'python', ...rt })
  eq([ctx.language, ctx.cwd], ['python', '/tmp'], 'context')
  let e = await sbx.runCode('import os; os.getcwd()', { ...run, context: ctx })
  eq(e.text, '/tmp', 'cwd')
  await sbx.runCode('x = 5', { ...run, context: ctx })
  eq((await sbx.runCode('x', { ...run, context: ctx })).text, '5', 'state kept in its kernel')
  eq((await sbx.runCode('"x" in dir()', run)).text, 'False', 'default context is another kernel')
  let list = await sbx.listCodeContexts()
  assert(list.some((c) => c.id === ctx.id), `list ${JSON.stringify(list)}`)
  await sbx.restartCodeContext(ctx)
  eq((await sbx.runCode('"x" in dir()', { ...run, context: ctx })).text, 'False', 'restart clears state')
  await sbx.removeCodeContext(ctx)
  list = await sbx.listCodeContexts()
  assert(!list.some((c) => c.id === ctx.id), 'removed context still listed')
  await rejects(sbx.runCode('1', { ...run, context: ctx }), (err) => err.name === 'NotFoundError',
    'removed context')
})

await check('interp: output streams line by line (a line reaches the client mid-execution)', async () => {
  // The cell waits for a file the test writes only once its first line has
  // arrived: a service or route that buffered the response would never finish.
  const go = `/tmp/go-${Date.now()}`
  let wrote = null
  const e = await sbx.runCode(`import os, time\nprint("first", flush=True)\n` +
    `while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.05)\nprint("second")`, {
    ...rt, timeoutMs: 180_000,
    onStdout: (m) => { if (m.line === 'first\n' && !wrote) wrote = sbx.files.write(go, 'x', rt) } })
  await wrote
  eq(e.logs.stdout, ['first\n', 'second\n'], 'stdout')
})

await check('interp: keepalives while an execution is silent', async () => {
  // The NDJSON stream itself (the SDK drops keepalive lines): a 12 s silent
  // cell gets keepalive lines (every 5 s) before its output and the end.
  const res = await fetch(`${sbx.jupyterUrl}/execute`, {
    method: 'POST', body: JSON.stringify({ code: 'import time\ntime.sleep(12)\nprint("late")' }),
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId,
      'E2b-Sandbox-Port': '49999', 'X-Access-Token': sbx.envdAccessToken } })
  eq(res.status, 200, 'status')
  eq(res.headers.get('content-type'), 'application/x-ndjson', 'content type')
  const types = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l).type)
  const ka = types.indexOf('keepalive'), out = types.indexOf('stdout')
  assert(ka >= 0 && out > ka, `no keepalive before the output: ${types.join(',')}`)
  eq(types[types.length - 1], 'end_of_execution', 'last line')
})

await check('interp: a language Debian has no kernel for is a clear error', async () => {
  const err = await rejects(sbx.runCode('1', { ...run, language: 'js' }),
    (x) => x.name === 'NotFoundError', 'js')
  assert(/not available/.test(err.message), `message ${err.message}`)
})

await check('interp: a client that goes away interrupts the kernel', async () => {
  await rejects(sbx.runCode('import time\ntime.sleep(600)', { ...rt, timeoutMs: 3000 }),
    () => true, 'sleep 600 with a 3 s timeout')
  // Without the interrupt the kernel would sleep 10 min and this would wait for it.
  const e = await sbx.runCode('"after"', { ...rt, timeoutMs: 120_000 })
  eq(e.text, 'after', 'next execution')
})

if (!process.env.E2B_INTERP_CONNECT) await sbx.kill().catch(() => {})
process.exit(failed ? 1 : 0)
