// The official TypeScript SDK's client calls one tool of the server, over
// stdio or streamable HTTP, with onprogress and resetTimeoutOnProgress,
// and prints on stdout, as one JSON line, the progress notifications and
// log messages it got before the result (each with the milliseconds since
// the call), when the result came, and the result's text. Run with
// Node.js 22; the Go test (integration/stream_test.go) reads the line.
//
// Its environment:
//   SANDBOX_NODE_MODULES  integration/node's node_modules, where the SDK is
//   STREAM_TRANSPORT      "stdio" or "http"
//   STREAM_SERVER         stdio: {"command", "args", "env"}; http: {"url", "token"}
//   STREAM_CALL           {"name", "arguments", "timeoutMs", "logLevel"}
//                         (logLevel: "" sets none)
const modules = process.env.SANDBOX_NODE_MODULES;
const sdk = (path) => import(`${modules}/@modelcontextprotocol/sdk/dist/esm/${path}`);
const { Client } = await sdk('client/index.js');
const { LoggingMessageNotificationSchema } = await sdk('types.js');

const server = JSON.parse(process.env.STREAM_SERVER);
let transport;
if (process.env.STREAM_TRANSPORT === 'stdio') {
  const { StdioClientTransport } = await sdk('client/stdio.js');
  transport = new StdioClientTransport({ command: server.command, args: server.args, env: server.env, stderr: 'inherit' });
} else {
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
  });
}
const client = new Client({ name: 'stream-test', version: '1' });
await client.connect(transport);

const call = JSON.parse(process.env.STREAM_CALL);
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logs.push({ ...n.params, ms: Date.now() - began });
});
if (call.logLevel) {
  await client.setLoggingLevel(call.logLevel);
}
const progress = [];
const began = Date.now();
// timeoutMs is shorter than the run: the call lives on because each
// notification resets it.
const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, {
  onprogress: (p) => progress.push({ ...p, ms: Date.now() - began }),
  resetTimeoutOnProgress: true,
  timeout: call.timeoutMs,
});
const resultMs = Date.now() - began;
await client.close();
console.log(JSON.stringify({ progress, logs, resultMs, text: result.content[0].text }));
process.exit(0);
