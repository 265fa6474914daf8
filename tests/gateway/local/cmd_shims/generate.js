// Writes the .cmd shims in this folder with a real copy of npm's cmd-shim package.
//
//   mkdir /tmp/shim && cd /tmp/shim && npm install cmd-shim@9.0.2
//   node generate.js /tmp/shim/node_modules/cmd-shim v9.0.2
//
// The shims are written as npm writes them for a global install (the shim beside
// node_modules, as in %APPDATA%\npm) and, into <out>/bin, for a project's node_modules\.bin.
// Only the .cmd files are kept; the packages they point at are laid out again by the tests.
const fs = require('fs')
const os = require('os')
const path = require('path')

const [shimPackage, out] = process.argv.slice(2)
const cmdShim = require(path.resolve(shimPackage))
const here = path.join(__dirname, out)
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cmd-shim-'))
const packages = {
  // @openai/codex: "bin": {"codex": "bin/codex.js"}, a node script
  codex: ['@openai/codex/bin/codex.js', '#!/usr/bin/env node\n'],
  // @anthropic-ai/claude-code 2.x: "bin": {"claude": "bin/claude.exe"}, a native program (the
  // package's placeholder, which has no #! line, is what npm links)
  claude: ['@anthropic-ai/claude-code/bin/claude.exe', 'echo "Error: claude native binary not installed." >&2\n'],
  // a node script with an argument for node on its #! line
  argtool: ['argtool/bin/argtool.js', '#!/usr/bin/env node --no-warnings\n'],
  // a node script that sets a variable on its #! line (the shim SETs it)
  envtool: ['envtool/bin/envtool.js', '#!/usr/bin/env -S NODE_OPTIONS=--no-warnings node\n'],
}
const call = (from, to) =>
  cmdShim.length === 3 ? new Promise((resolve, reject) => cmdShim(from, to, e => (e ? reject(e) : resolve()))) : cmdShim(from, to)

;(async () => {
  const modules = path.join(root, 'node_modules')
  for (const [file, text] of Object.values(packages)) {
    fs.mkdirSync(path.dirname(path.join(modules, file)), { recursive: true })
    fs.writeFileSync(path.join(modules, file), text)
  }
  for (const [name, [file]] of Object.entries(packages)) {
    await call(path.join(modules, file), path.join(root, name))
    await call(path.join(modules, file), path.join(modules, '.bin', name))
  }
  fs.mkdirSync(path.join(here, 'bin'), { recursive: true })
  for (const name of Object.keys(packages)) {
    fs.copyFileSync(path.join(root, name + '.cmd'), path.join(here, name + '.cmd'))
    fs.copyFileSync(path.join(modules, '.bin', name + '.cmd'), path.join(here, 'bin', name + '.cmd'))
  }
  fs.rmSync(root, { recursive: true, force: true })
})().catch(error => {
  console.error(error)
  process.exit(1)
})
