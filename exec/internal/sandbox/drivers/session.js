'use strict';
// Session driver for Node.js: keeps one interpreter alive and runs each
// request's code in it, like a notebook cell. Started by the server as
// `node --expose-internals /sandbox/session.js` in /workspace.
//
// Protocol (the contract with the Go server, exec/session.go):
// - stdin: one JSON request a line, {"cell": N, "code": "...", "end": "<token>"}.
//   Cell 0, with empty code, is sent once at start; answering it says ready.
// - After a cell, once everything it wrote has reached fd 1 and fd 2: the
//   token alone on stderr, then the token, one line of JSON status and "\n"
//   on stdout: {"status": "ok"|"error"|"interrupted", "exit_code": N}.
// - SIGINT interrupts the running cell (status interrupted, 130); it is
//   ignored while no cell runs. stdin EOF: exit 0 at once.

// Everything the driver uses is taken now, before any cell runs, so that a
// cell that shadows a global (`const Promise = require('bluebird')`,
// `var process = ...`) does not break the driver by accident.
const fs = require('fs');
const net = require('net');
const vm = require('vm');
const util = require('util');
const Module = require('module');
const proc = process;
const { Promise, JSON, Buffer, Atomics, Int32Array, SharedArrayBuffer, Error, String } = globalThis;
const DRIVER_FILE = __filename;

const WORKSPACE = '/workspace';
const CELL_FILE = `${WORKSPACE}/[cell]`;

// The original standard streams. Writes to them can be asynchronous (on a
// pipe that is full, libuv queues the rest), so they are drained before each
// end marker; taking them now also survives a cell replacing process.stdout.
const stdout = proc.stdout;
const stderr = proc.stderr;

// --- The request channel ----------------------------------------------------

// Node.js cannot dup2. If /proc lets us reopen our stdin pipe (it does when the
// pipe belongs to our uid), we read requests from that new descriptor (libuv
// opens it close-on-exec) and put /dev/null on fd 0 for the code: close(0)
// then open() takes the lowest free descriptor, 0. Otherwise (a pipe owned by
// another uid gives EACCES) we read from fd 0 itself; the libuv pipe handle
// makes it non-blocking, so a cell that reads fd 0 directly gets EAGAIN
// (there is no pending request while a cell runs) rather than hanging.
function requestChannel() {
  let fd;
  try {
    fs.closeSync(fs.openSync('/dev/null', 'r')); // there to take fd 0's place
    fd = fs.openSync('/proc/self/fd/0', fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch {
    return 0;
  }
  try {
    fs.closeSync(0);
    const devnull = fs.openSync('/dev/null', 'r');
    if (devnull !== 0) fs.closeSync(devnull); // something else took fd 0: leave it
  } catch {
    // fd 0 is closed or not /dev/null: cells reading it get an error
  }
  return fd;
}

function openRequests(fd) {
  try {
    return new net.Socket({ fd, readable: true, writable: false });
  } catch {
    // Not a pipe or socket (a regular file, say): read it as a file.
    return fs.createReadStream(null, { fd });
  }
}

// process.stdin for cells reads nothing, like /dev/null, whichever
// descriptor the requests come from.
let cellStdin = null;
Object.defineProperty(proc, 'stdin', {
  configurable: true,
  enumerable: true,
  get() {
    if (cellStdin === null) cellStdin = fs.createReadStream('/dev/null');
    return cellStdin;
  },
});

// --- Writing ----------------------------------------------------------------

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

// writeAll writes all of data to fd with raw writes, waiting out EAGAIN: the
// descriptor is non-blocking once Node has made a stream of it.
function writeAll(fd, data) {
  const buf = Buffer.from(data);
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(fd, buf, off, buf.length - off);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
      Atomics.wait(sleepCell, 0, 0, 1);
    }
  }
}

// drain resolves once everything written to stream so far has been handed to
// the kernel. An empty write's callback runs after the writes queued before it.
function drain(stream) {
  try {
    if (!stream || !stream.writableLength || stream.destroyed) return null;
  } catch {
    return null;
  }
  return new Promise((resolve) => {
    try {
      stream.write('', resolve);
      stream.once('close', resolve);
    } catch {
      resolve();
    }
  });
}

function writeErr(text) {
  try {
    stderr.write(text);
  } catch {
    try { writeAll(2, text); } catch { /* nothing left to tell */ }
  }
}

// --- Showing errors ---------------------------------------------------------

const FRAME = /^\s+at /;
const CELL_FRAME = /^\s+at .*<cell \d+>/;

// trimStack drops the driver's own frames: those below the last frame of a
// cell or, when no cell frame is there, from the first frame of the driver
// (with the node:vm frames that called into it) down.
function trimStack(stack) {
  const lines = stack.split('\n');
  let cut = -1;
  for (let i = lines.length - 1; i >= 0; i--) {
    if (CELL_FRAME.test(lines[i])) { cut = i + 1; break; }
  }
  if (cut < 0) {
    const first = lines.findIndex((l) => FRAME.test(l) && l.includes(DRIVER_FILE));
    if (first < 0) return stack;
    cut = first;
    while (cut > 0 && FRAME.test(lines[cut - 1]) && lines[cut - 1].includes('(node:vm:')) cut--;
  }
  return lines.filter((l, i) => i < cut || !FRAME.test(l)).join('\n');
}

// describe renders what a cell threw as Node's REPL does: "Uncaught " and
// the stack (or util.inspect of what is not an Error). A stack that Node
// decorated with the source line and a caret (a SyntaxError) keeps that part
// first, as the REPL shows it.
function describe(err) {
  try {
    if (err instanceof Error || (err !== null && typeof err === 'object' && typeof err.stack === 'string')) {
      const stack = trimStack(String(err.stack));
      const name = String(err.name);
      const at = stack.indexOf(`\n\n${name}`);
      if (!stack.startsWith(name) && at >= 0) {
        return `${stack.slice(0, at + 2)}Uncaught ${stack.slice(at + 2)}\n`;
      }
      return `Uncaught ${stack}\n`;
    }
    return `Uncaught ${util.inspect(err)}\n`;
  } catch {
    return 'Uncaught exception (that could not be shown)\n';
  }
}

// Errors outside a cell (a timer that throws later, a promise rejected and
// never handled) are shown and the session lives on.
proc.on('uncaughtException', (err) => writeErr(describe(err)));
proc.on('unhandledRejection', (err) => writeErr(describe(err)));

// --- Turning a cell into a script --------------------------------------------

// Loaded on first use (or while idle after cell 0): they take ~25 ms.
let acorn = null;
let topLevelAwait = null;

function loadParsers() {
  if (acorn === null) acorn = require('internal/deps/acorn/acorn/dist/acorn');
  if (topLevelAwait === null) topLevelAwait = require('internal/repl/await').processTopLevelAwait;
}

// lexicalToVar rewrites the cell's top-level let, const and class
// declarations into var, so that they persist as globals and a cell can be
// run again (V8 would throw "Identifier 'x' has already been declared"):
//   const x = 1      ->  var x = 1
//   let y            ->  var y = void 0    (re-running resets it, as let would)
//   class C {}       ->  var C = class C {};
// Only Program-level declarations are touched. If the code does not parse,
// it is returned unchanged so that V8 reports the SyntaxError itself.
function lexicalToVar(code) {
  if (!/\b(?:let|const|class)\b/.test(code)) return code;
  loadParsers();
  let program;
  try {
    program = acorn.parse(code, {
      ecmaVersion: 'latest',
      sourceType: 'script',
      allowAwaitOutsideFunction: true,
      allowHashBang: true,
    });
  } catch {
    return code;
  }
  const edits = []; // [start, end, replacement], in source order
  for (const node of program.body) {
    if (node.type === 'VariableDeclaration' && node.kind !== 'var') {
      edits.push([node.start, node.start + node.kind.length, 'var']);
      if (node.kind === 'let') {
        for (const d of node.declarations) {
          if (d.init === null) edits.push([d.end, d.end, ' = void 0']);
        }
      }
    } else if (node.type === 'ClassDeclaration') {
      edits.push([node.start, node.start, `var ${node.id.name} = `]);
      edits.push([node.end, node.end, ';']);
    }
  }
  let out = '';
  let pos = 0;
  for (const [start, end, text] of edits) {
    out += code.slice(pos, start) + text;
    pos = end;
  }
  return out + code.slice(pos);
}

const importModuleDynamically = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;

function compile(code, filename, lineOffset = 0) {
  const options = { filename, lineOffset };
  if (importModuleDynamically) options.importModuleDynamically = importModuleDynamically;
  return new vm.Script(code, options);
}

// toScript compiles a cell. It says whether the script's value is Node's
// top-level-await wrapper (a Promise of {value}) rather than the cell's value.
function toScript(source, filename) {
  const code = lexicalToVar(source);
  if (!/\bawait\b/.test(code)) return { script: compile(code, filename), wrapped: false };
  loadParsers();
  let wrappedCode = null;
  try {
    // The trailing newline keeps a final line comment from swallowing the
    // end of the wrapper ("x // c" would become "return {value: (x // c) }").
    wrappedCode = topLevelAwait(`${code}\n`);
  } catch {
    // A syntax error. V8 names it best inside an async function: compiled
    // as the body of one (lines kept), it reports the real error rather than
    // "await is only valid in async functions". If that compiles, the code
    // is valid there but not here (a top-level return): V8 says why below.
    compile(`(async function () {\n${code}\n})`, filename, -1);
  }
  if (wrappedCode === null) return { script: compile(code, filename), wrapped: false };
  return { script: compile(wrappedCode, filename), wrapped: true };
}

// --- Running cells ------------------------------------------------------------

const INTERRUPTED = Symbol('interrupted');

// The running cell's abandon function while it awaits a Promise; null otherwise.
let abandon = null;

// A SIGINT listener stays installed for the life of the driver (without one,
// the SIGINT the sandbox's init passes on to its child, the driver, would
// end the session). While a cell
// runs synchronously, vm's breakOnSigint takes the signal and interrupts the
// script (node:vm removes this listener for that time and puts it back); while
// a cell awaits, this listener abandons the await; otherwise it does nothing.
proc.on('SIGINT', () => {
  if (abandon !== null) abandon();
});

function isThenable(value) {
  try {
    return value !== null && (typeof value === 'object' || typeof value === 'function') &&
      typeof value.then === 'function';
  } catch {
    return false;
  }
}

// settle waits for a Promise (or thenable) unless a SIGINT comes first. The
// abandoned Promise keeps running; what it does later is not this cell's.
function settle(value) {
  return new Promise((resolve, reject) => {
    abandon = () => reject(INTERRUPTED);
    Promise.resolve(value).then(resolve, reject);
  }).finally(() => {
    abandon = null;
  });
}

// evaluate runs a cell and returns the value to show (undefined: nothing).
async function evaluate(source, filename) {
  const { script, wrapped } = toScript(source, filename);
  let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
  if (wrapped) {
    const result = await settle(value);
    value = result === undefined || result === null ? undefined : result.value;
  }
  if (isThenable(value)) value = await settle(value);
  return value;
}

function isSigintInterruption(err) {
  return err instanceof Error && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
}

async function runCell(n, source) {
  const filename = `<cell ${n}>`;
  let status = 'ok';
  let exitCode = 0;
  try {
    const value = await evaluate(source, filename);
    if (value !== undefined) stdout.write(`${util.inspect(value, { showProxy: true })}\n`);
  } catch (err) {
    if (err === INTERRUPTED) {
      status = 'interrupted';
      exitCode = 130;
      writeErr(`Interrupted: ${filename} was awaiting a Promise\n`);
    } else if (isSigintInterruption(err)) {
      status = 'interrupted';
      exitCode = 130;
      writeErr(`Interrupted: ${filename} was running (Script execution interrupted.)\n`);
    } else {
      status = 'error';
      exitCode = 1;
      writeErr(describe(err));
    }
  }
  return { status, exit_code: exitCode };
}

// finish writes a cell's end markers once its output is out.
async function finish(token, status) {
  const pending = [drain(stdout), drain(stderr)].filter((p) => p !== null);
  if (pending.length > 0) await Promise.all(pending);
  try {
    writeAll(2, token);
    writeAll(1, `${token}${JSON.stringify(status)}\n`);
  } catch {
    proc.exit(0); // the server is gone (EPIPE)
  }
}

async function handle(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    req = null;
  }
  if (req === null || typeof req !== 'object' || typeof req.end !== 'string' || req.end === '') {
    writeErr('session driver: ignoring a malformed request\n');
    return;
  }
  let status;
  try {
    status = await runCell(req.cell, typeof req.code === 'string' ? req.code : '');
  } catch (err) {
    writeErr(`session driver: ${describe(err)}`);
    status = { status: 'error', exit_code: 1 };
  }
  await finish(req.end, status);
  if (req.cell === 0) setImmediate(loadParsers); // warm up while idle
}

// Requests are handled one at a time, in order.
const queue = [];
let busy = false;

function next() {
  if (busy || queue.length === 0) return;
  busy = true;
  handle(queue.shift()).then(() => {
    busy = false;
    next();
  }, (err) => {
    writeErr(`session driver: ${describe(err)}`);
    busy = false;
    next();
  });
}

// --- Start ----------------------------------------------------------------------

// What cells see as their module: require resolves from /workspace (so
// require('./x.js') loads /workspace/x.js), as in Node's REPL but from there.
{
  const cellRequire = Module.createRequire(CELL_FILE);
  cellRequire.main = undefined; // the driver is not the cells' main module
  const cellModule = new Module(CELL_FILE, null);
  cellModule.filename = CELL_FILE;
  cellModule.paths = Module._nodeModulePaths(WORKSPACE);
  cellModule.loaded = true;
  const globals = {
    require: cellRequire,
    module: cellModule,
    exports: cellModule.exports,
    __filename: CELL_FILE,
    __dirname: WORKSPACE,
  };
  for (const [name, value] of Object.entries(globals)) {
    Object.defineProperty(globalThis, name, { configurable: true, writable: true, value });
  }
  proc.argv.splice(1); // as in the REPL: [node]
}

{
  const requests = openRequests(requestChannel());
  let pending = []; // chunks of the line not yet ended
  requests.on('data', (chunk) => {
    let start = 0;
    let nl;
    while ((nl = chunk.indexOf(10, start)) >= 0) {
      pending.push(chunk.subarray(start, nl));
      queue.push(Buffer.concat(pending).toString('utf8'));
      pending = [];
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
    next();
  });
  requests.on('end', () => proc.exit(0));
  requests.on('error', (err) => {
    writeErr(`session driver: reading requests: ${err.message}\n`);
    proc.exit(1);
  });
}
