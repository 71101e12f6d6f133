// Drives LoopLedger's OpenCode plugin under Node as OpenCode 1.x calls it (tests/test_live_never_waits.py):
// `node opencode_plugin_driver.mjs PLUGIN.mjs`, then one JSON op per line on stdin, one JSON result line
// per op on stdout. The plugin's `client` is a stand-in that records what the plugin logs and aborts;
// everything else (the guard process it starts, the ledger) is real.
//   {"op": "call", "session", "ids": [...], "tool", "args"}  tool.execute.before for each id at once
//        -> {"results": [{"id", "refused": null | the error the plugin threw}]}
//   {"op": "after", "session", "id", "tool", "output", "exit"}  tool.execute.after -> {"output"}
//   {"op": "user", "session", "text"}  chat.message -> {}
//   {"op": "logs"}  -> {"logs": [every line the plugin logged]}
import readline from "node:readline";

const { LoopLedger } = await import(process.argv[2]);
const logs = [];
const client = {
  app: { log: async ({ body }) => { logs.push(body.message); } },
  session: { abort: async () => {}, messages: async () => ({ data: [] }) },
};
const hooks = await LoopLedger({ client, project: { id: "driver" } });
const reply = (value) => process.stdout.write(JSON.stringify(value) + "\n");

for await (const line of readline.createInterface({ input: process.stdin })) {
  const op = JSON.parse(line);
  if (op.op === "call") {
    const results = await Promise.all(op.ids.map(async (id) => {
      try {
        await hooks["tool.execute.before"]({ sessionID: op.session, callID: id, tool: op.tool }, { args: op.args });
        return { id, refused: null };
      } catch (err) {
        return { id, refused: String(err.message) };
      }
    }));
    reply({ results });
  } else if (op.op === "after") {
    const output = { output: op.output, metadata: { exit: op.exit } };
    await hooks["tool.execute.after"]({ sessionID: op.session, callID: op.id, tool: op.tool }, output);
    reply({ output: output.output });
  } else if (op.op === "user") {
    await hooks["chat.message"]({ sessionID: op.session }, { parts: [{ type: "text", text: op.text }] });
    reply({});
  } else if (op.op === "logs") {
    reply({ logs });
  }
}
process.exit(0); // the guard, its stdin closed with ours, ends by itself
