// code-sandbox-mcp: the warm start of Node.js sandboxes. Every sandbox of a
// warm JavaScript language runs `node --require THIS_FILE /sandbox/main.js`.
//
// In a warm ready sandbox (started as the sandbox's program process, the
// child of its init, pid 1, and at its start the only other process of
// the sandbox, before /sandbox/main.js exists, with standard input a pipe
// from the server; a process the program starts is never alone with the
// init, since the program's process lives as long as anything in the
// sandbox does) this module waits: the server
// writes one line at once, "csm-warm MODULE...", whose modules are
// required here, then an empty line once the program is in place. Node.js
// then runs the program as its main module, as `node /sandbox/main.js`
// does: require.main, CommonJS, process.argv, exit codes, uncaught
// exceptions and rejections, the event loop. Anywhere else (a cold start,
// a worker thread) it only takes itself out of sight and returns.
//
// The program must not be able to tell, beyond timing and the modules
// already loaded: this module leaves process.execArgv and require.cache as
// they would be without it, and standard input becomes /dev/null, as the
// server gives a cold program. /proc/self/cmdline still shows the flag.
'use strict';

(function warm() {
  const fs = require('fs');

  const at = process.execArgv.indexOf('--require');
  if (at >= 0 && process.execArgv[at + 1] === __filename) {
    process.execArgv.splice(at, 2);
  }
  delete require.cache[__filename];

  try {
    if (process.ppid !== 1 || !fs.fstatSync(0).isFIFO() || fs.existsSync(process.argv[1])) {
      return;
    }
    const me = String(process.pid);
    if (fs.readdirSync('/proc').some((p) => /^[0-9]+$/.test(p) && p !== '1' && p !== me)) {
      return;
    }
  } catch {
    return;
  }

  const byte = Buffer.alloc(1);
  // line reads one line of standard input a byte at a time (what follows
  // is not ours), or returns null at its end.
  function line() {
    let data = '';
    while (!data.endsWith('\n')) {
      let n;
      try {
        n = fs.readSync(0, byte, 0, 1, null);
      } catch (err) {
        if (err.code === 'EAGAIN' || err.code === 'EINTR') {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
          continue;
        }
        throw err;
      }
      if (n === 0) {
        return null;
      }
      data += byte.toString('latin1');
    }
    return data;
  }

  const first = line();
  if (first === null || !first.startsWith('csm-warm')) {
    return;
  }
  for (const name of first.split(/\s+/).slice(1).filter(Boolean)) {
    try {
      require(name);
    } catch (err) {
      const reason = String(err && err.message || err).split(/\s+/).join(' ').slice(0, 300);
      fs.writeSync(2, `code-sandbox-mcp: warm start: cannot require ${name}: ${reason}\n`);
      process.reallyExit(3);
    }
  }
  const marker = '\0code-sandbox-mcp warm\0\n';
  fs.writeSync(1, marker);
  fs.writeSync(2, marker);
  if (line() === null) {
    process.reallyExit(0); // the sandbox is being destroyed: no program comes
  }
  // The lowest free descriptor is the one just closed. Read and write, as
  // the runtime opens it for a cold program.
  fs.closeSync(0);
  const fd = fs.openSync('/dev/null', 'r+');
  if (fd !== 0) {
    fs.writeSync(2, `code-sandbox-mcp: warm start: /dev/null opened as descriptor ${fd}, not 0\n`);
    process.reallyExit(3);
  }
})();
