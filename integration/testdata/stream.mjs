// The official TypeScript SDK's client calls one tool of the server, over
// stdio or streamable HTTP, with onprogress and resetTimeoutOnProgress,
// and prints on stdout, as one JSON line, the progress notifications and
// log messages it got before the result (each with the milliseconds since
// the call), when the result came, the result's text, and, over HTTP, each
// request the transport made: its method, the JSON-RPC method of a POST,
// the status and content type of its answer, and for an event stream what
// each of its messages was (a notification's method, or "result" for the
// POST's own answer), in order. Run with Node.js 22; the Go test
// (integration/stream_test.go) reads the line.
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
const requests = [];
// recordingFetch is fetch, recording each request in requests and, for an
// answer that is an event stream, what each message on it was as the
// transport reads it.
const recordingFetch = async (url, init) => {
  const rpc = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
  const response = await fetch(url, init);
  const r = {
    method: init?.method ?? 'GET', rpc: rpc?.method ?? '', status: response.status,
    contentType: response.headers.get('content-type') ?? '', events: [],
  };
  requests.push(r);
  if (!r.contentType.startsWith('text/event-stream') || !response.body) {
    return response;
  }
  const decoder = new TextDecoder();
  let pending = '';
  const seen = new TransformStream({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      const parts = pending.split(/\r?\n\r?\n/);
      pending = parts.pop();
      for (const part of parts) {
        const data = part.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
        if (data) {
          const m = JSON.parse(data);
          r.events.push(m.method ?? (m.id === rpc?.id ? 'result' : `answer to ${m.id}`));
        }
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(response.body.pipeThrough(seen), { status: response.status, statusText: response.statusText, headers: response.headers });
};

let transport;
if (process.env.STREAM_TRANSPORT === 'stdio') {
  const { StdioClientTransport } = await sdk('client/stdio.js');
  transport = new StdioClientTransport({ command: server.command, args: server.args, env: server.env, stderr: 'inherit' });
} else {
  const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
  transport = new StreamableHTTPClientTransport(new URL(server.url), {
    requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
    fetch: recordingFetch,
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
console.log(JSON.stringify({ progress, logs, resultMs, text: result.content[0].text, requests }));
process.exit(0);
