// A program as E2B's public documentation writes it (the quickstart, then the
// commands and filesystem pages), not as our tests do: no options, the SDKs'
// default timeouts, the default template, the environment variables alone
// (E2B_API_KEY plus E2B_API_URL / E2B_SANDBOX_URL pointing at airlock,
// docs/e2b.md). run_interp.py runs it unchanged and checks what it prints.
import { Sandbox } from '@e2b/code-interpreter'

const sbx = await Sandbox.create() // By default the sandbox is alive for 5 minutes
const execution = await sbx.runCode('print("hello world")') // Python inside the sandbox
console.log(execution.logs)

const files = await sbx.files.list('/')
console.log(files.map((f) => f.name).join(' '))

await sbx.files.write('/home/user/notes.txt', 'written by the docs program')
console.log(await sbx.files.read('/home/user/notes.txt'))

const result = await sbx.commands.run('echo "Hello from E2B!"')
console.log(result.stdout)

await sbx.kill()
