// A call run as a task through the official TypeScript SDK's client, over
// stdio or streamable HTTP: tools/list, then callToolStream with a task, which polls
// tasks/get and fetches tasks/result. It prints one JSON line: the tools
// that declare task support, the task's id, each status it saw with its
// statusMessage and how long each poll's request took, and the result.
// TestTaskTypeScriptSDK (tasks_test.go) starts it with the server in
// TASKS_SDK_SERVER (its command, args and env, which the script starts,
// or the url of one listening and a token) and the call in TASKS_SDK_CALL.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.SANDBOX_NODE_MODULES;
const sdk = (p) => import(pathToFileURL(join(modules, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");

const server = JSON.parse(process.env.TASKS_SDK_SERVER);
const call = JSON.parse(process.env.TASKS_SDK_CALL);
const client = new Client({ name: "tasks-sdk", version: "1" }, { capabilities: {} });
const transport = server.url
  ? new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: { Authorization: `Bearer ${server.token}` } } })
  : new StdioClientTransport({ command: server.command, args: server.args, env: server.env, stderr: "inherit" });
await client.connect(transport);

const out = { taskTools: [], statuses: [], result: null, error: null };
const tools = await client.listTools();
for (const t of tools.tools) {
  if (t.execution?.taskSupport === "optional") out.taskTools.push(t.name);
}
let last = Date.now();
for await (const m of client.experimental.tasks.callToolStream(call, undefined, { task: {} })) {
  const now = Date.now();
  if (m.type === "taskCreated") out.taskId = m.task.taskId;
  if (m.type === "taskStatus") out.statuses.push({ status: m.task.status, message: m.task.statusMessage ?? "", ms: now - last });
  if (m.type === "result") out.result = m.result;
  if (m.type === "error") out.error = String(m.error);
  last = now;
}
// The SDK's close ends the server's stdin, then kills it if it has not
// exited within 2 s; a server deleting its sandboxes may need longer, and
// the test checks that it leaves nothing. So end stdin and wait for its
// exit here (the process is the transport's own, not in its API).
if (server.url) {
  await client.close();
} else {
  const proc = transport._process;
  const exited = new Promise((resolve) => proc.once("close", resolve));
  proc.stdin.end();
  await exited;
}
console.log(JSON.stringify(out));
