// An independent MCP client (the TypeScript SDK, which validates every
// structured result against the tool's output schema) driving
// "lethe mcp" over stdio. TestMCPTypeScriptClient runs it and checks what
// it prints. Usage: node check.mjs LETHE_BINARY DATA_DIR
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, data] = process.argv.slice(2);
const client = new Client({ name: "lethe-ts-check", version: "0" });
await client.connect(new StdioClientTransport({
  command: bin, args: ["mcp", "--data", data, "--allow-erase"],
  env: { ...process.env, LETHE_SERVER: "", LETHE_POSTGRES_DSN: "" },
}));
const call = (name, args) => client.callTool({ name, arguments: args });
const out = {};
out.tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t.annotations]));
const caveat = await call("add", { type: "caveat", content: "the stove is hot" });
const fact = await call("add", { type: "fact", subject: "kettle", content: "is electric", user_id: "u9" });
out.recall = (await call("recall", { subject: "kettle" })).structuredContent;
out.refused = await call("forget", { hash: caveat.structuredContent.hash });
out.dryRun = (await call("forget", { user_id: "u9", dry_run: true })).structuredContent;
out.sweep = (await call("forget", { dry_run: true })).structuredContent;
out.bad = await call("history", { hash: "xyz" });
out.forgotten = (await call("forget", { hash: fact.structuredContent.hash })).structuredContent;
const res = await client.readResource({ uri: `lethe://default/grains/${caveat.structuredContent.hash}` });
out.resource = JSON.parse(res.contents[0].text);
console.log(JSON.stringify(out));
await client.close();
