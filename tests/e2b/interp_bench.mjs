// Latency of @e2b/code-interpreter against airlockd (docs/performance.md
// "Code interpreter"): create, first runCode, then N runCode("1 + 1"), a
// plot and a DataFrame. Prints numbers only; run by hand with the same
// variables as interp.mjs (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
import { Sandbox } from '@e2b/code-interpreter'

const n = Number(process.env.N || 10)
const rt = { requestTimeoutMs: 600_000 }
const ms = (t) => Math.round(Date.now() - t)
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]
let t = Date.now()
const sbx = await Sandbox.create({ ...rt, timeoutMs: 600_000, allowInternetAccess: false })
const create = ms(t)
t = Date.now()
await sbx.runCode('1 + 1', rt)
const first = ms(t)
const runs = []
for (let i = 0; i < n; i++) {
  t = Date.now()
  await sbx.runCode('1 + 1', rt)
  runs.push(ms(t))
}
t = Date.now()
await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()', rt)
const plot = ms(t)
t = Date.now()
await sbx.runCode('import pandas as pd\npd.DataFrame({"a": list(range(100))})', rt)
const frame = ms(t)
console.log(JSON.stringify({ create_ms: create, first_run_ms: first, run_median_ms: median(runs),
  run_max_ms: Math.max(...runs), plot_ms: plot, dataframe_ms: frame, n }))
await sbx.kill()
