// LoopLedger's guard for OpenCode, installed by `loopledger hook install opencode` (which fills
// in CONFIG below) and removed by `loopledger hook uninstall opencode`. Thin on purpose: every
// tool call goes to one `loopledger guard` process (JSON lines, started on the first call) that
// judges it with the policy enforced in the ledger and records the decision; this file only
// applies the verdict. allow: nothing. warn: the call runs and a notice is added to its result.
// block: the call is refused (the model reads why). halt: refused, and the session's run is
// aborted (no model request after it); the next message of the person starts a fresh run.
// Anything going wrong here (no guard, no answer in time) allows the call, at once where it can:
// a guard that cannot start (a moved virtualenv, loopledger uninstalled) or ends before answering
// answers every call waiting on it, and is not started again before a back-off (30 s, doubling up
// to 10 min) has passed; meanwhile every call is allowed without waiting.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import readline from "node:readline";

const CONFIG = /* loopledger:config */ { command: ["loopledger", "guard", "--origin", "opencode"], timeoutMs: 10000 } /* loopledger:end */;
// The notice is wrapped so LoopLedger's OpenCode reader can take it off the stored result again
// (loopledger.formats.opencode): a replay then reads the answer the guard judged.
const NOTICE = (text) => `\n\n<loopledger_notice>\n${text}\n</loopledger_notice>`;
// A call carries the time this plugin stops waiting for its verdict, less this reserve: the guard
// answers a call it could not decide by then "allow" without judging or storing it, so a call
// this plugin let run is never recorded as refused after it ran.
const RESERVE_MS = 1000;
const BACKOFF_MS = [30000, 600000]; // first, longest wait before a guard that failed is started again

export const LoopLedger = async ({ client, project }) => {
  let guard = null;
  const waiting = new Map(); // session \0 call id -> resolve(verdict)
  const warned = new Map(); // call id -> the notice for its result
  const pending = new Map(); // call id -> session: judged and let run, its answer not sent yet
  const halted = new Map(); // session -> the halt message, until the person writes again

  const log = (message) => {
    try {
      client.app.log({ body: { service: "loopledger", level: "warn", message } }).catch(() => {});
    } catch {}
  };

  // The file LoopLedger's reader reads this session from: OpenCode's database (1.x), else its
  // older JSON storage; decisions land in the session a later `loopledger watch` reads there.
  const dataDir = join(process.env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "opencode");
  // OpenCode's own choice of database file ($OPENCODE_DB, absolute or in its data folder; else
  // opencode.db for the releases npm installs).
  const dbFile = process.env.OPENCODE_DB ? (isAbsolute(process.env.OPENCODE_DB) ? process.env.OPENCODE_DB
                                                                                 : join(dataDir, process.env.OPENCODE_DB))
                                         : join(dataDir, "opencode.db");
  const transcript = (session) => {
    const db = dbFile;
    if (existsSync(db)) return db;
    const file = join(dataDir, "storage", "session", String(project?.id ?? ""), `${session}.json`);
    return existsSync(file) ? file : undefined;
  };

  let retryAt = 0; // no guard is started before this time (Date.now()), after one failed
  let backoff = BACKOFF_MS[0];

  // The guard is gone (it could not start, or it ended): every call waiting on it is allowed now.
  // One that never answered anything is not started again before the back-off has passed.
  const gone = (child, why) => {
    if (child.gone) return; // "error" and "exit" may both come
    child.gone = true;
    if (guard === child) guard = null;
    for (const resolve of waiting.values()) resolve(null);
    waiting.clear();
    if (child.answered) {
      backoff = BACKOFF_MS[0];
      return; // it worked until now: the next call starts a fresh one
    }
    retryAt = Date.now() + backoff;
    log(`loopledger guard ${why}: every call is allowed without judging; tried again in ${backoff / 1000} s`);
    backoff = Math.min(backoff * 2, BACKOFF_MS[1]);
  };

  const start = () => {
    const [cmd, ...args] = CONFIG.command;
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
    child.on("error", (err) => gone(child, `did not start (${err.message})`));
    child.on("exit", (code, signal) => gone(child, `ended before answering (${signal ?? `exit status ${code}`})`));
    readline.createInterface({ input: child.stderr }).on("line", (line) => log(line));
    readline.createInterface({ input: child.stdout }).on("line", (line) => {
      let verdict;
      try {
        verdict = JSON.parse(line);
      } catch {
        return;
      }
      child.answered = true;
      const key = `${verdict.session}\0${verdict.id}`;
      const resolve = waiting.get(key);
      if (resolve) {
        waiting.delete(key);
        resolve(verdict);
      }
    });
    child.stdin.on("error", () => {});
    return child;
  };

  // False: no guard now (one failed, its back-off has not passed); nothing was sent.
  const send = (event) => {
    if (!guard) {
      if (Date.now() < retryAt) return false;
      guard = start();
    }
    const session = event.session;
    guard.stdin.write(JSON.stringify({ ...event, transcript: transcript(session), format: "opencode" }) + "\n");
    return true;
  };

  const ask = (event) =>
    new Promise((resolve) => {
      const key = `${event.session}\0${event.id}`;
      const deadline = (Date.now() + Math.max(CONFIG.timeoutMs - RESERVE_MS, CONFIG.timeoutMs / 2)) / 1000;
      const timer = setTimeout(() => {
        waiting.delete(key);
        log(`no verdict from loopledger guard within ${CONFIG.timeoutMs} ms: ${event.tool} allowed`);
        resolve(null);
      }, CONFIG.timeoutMs);
      waiting.set(key, (v) => {
        clearTimeout(timer);
        resolve(v);
      });
      try {
        if (!send({ ...event, deadline })) throw new Error("no guard");
      } catch (err) {
        waiting.delete(key);
        clearTimeout(timer);
        resolve(null);
      }
    });

  const answer = (session, id, text, error) => {
    pending.delete(id);
    try {
      send({ session, event: "answer", id, text, error });
    } catch {}
  };

  // A call that errored fires no tool.execute.after: its result is what OpenCode stored, from its
  // part event, else read back from OpenCode's storage before the session's next call is judged.
  const settle = async (session) => {
    const open = [...pending].filter(([, s]) => s === session).map(([id]) => id);
    if (!open.length) return;
    let stored = [];
    try {
      stored = (await client.session.messages({ path: { id: session } })).data ?? [];
    } catch {}
    for (const id of open) {
      for (const message of stored) {
        for (const part of message.parts ?? []) {
          if (part.type === "tool" && part.callID === id && part.state?.status === "error") {
            answer(session, id, String(part.state.error ?? ""), true);
          } else if (part.type === "tool" && part.callID === id && part.state?.status === "completed") {
            answer(session, id, String(part.state.output ?? ""), exitFailed(part.tool, part.state.metadata));
          }
        }
      }
    }
  };

  // As the reader judges a completed call: a bash command that exited non-zero failed.
  const exitFailed = (tool, metadata) =>
    tool === "invalid" || (Number.isInteger(metadata?.exit) && metadata.exit !== 0);

  return {
    "chat.message": async (input, output) => {
      const parts = output?.parts ?? [];
      const texts = parts.filter((p) => p.type === "text" && typeof p.text === "string" && !p.synthetic && !p.ignored);
      if (!texts.length && !parts.some((p) => p.type === "file")) return; // OpenCode's own message
      halted.delete(input.sessionID);
      try {
        send({ session: input.sessionID, event: "user", text: texts.map((p) => p.text).join("\n") });
      } catch {}
    },
    // A halted run asks the model nothing more, whatever else is under way.
    "chat.params": async (input) => {
      if (halted.has(input.sessionID)) throw new Error(halted.get(input.sessionID));
    },
    "tool.execute.before": async (input, output) => {
      await settle(input.sessionID);
      const verdict = await ask({ session: input.sessionID, event: "call", id: input.callID, tool: input.tool,
                                  args: output.args });
      const kind = verdict?.verdict;
      if (kind === "block" || kind === "halt" || kind === "after_halt") {
        if (kind !== "block") {
          halted.set(input.sessionID, verdict.message);
          // After this refusal is stored as the call's error: the run then ends before its next request.
          setTimeout(() => client.session.abort({ path: { id: input.sessionID } }).catch(() => {}), 0);
        }
        throw new Error(verdict.message);
      }
      if (kind === "warn") warned.set(input.callID, verdict.message);
      if (verdict) pending.set(input.callID, input.sessionID);
    },
    "tool.execute.after": async (input, output) => {
      if (pending.has(input.callID)) {
        answer(input.sessionID, input.callID, String(output.output ?? ""), exitFailed(input.tool, output.metadata));
      }
      const notice = warned.get(input.callID);
      if (notice !== undefined) {
        warned.delete(input.callID);
        output.output = String(output.output ?? "") + NOTICE(notice);
      }
    },
    event: async ({ event }) => {
      const part = event?.type === "message.part.updated" ? event.properties?.part : null;
      if (part?.type === "tool" && part.state?.status === "error" && pending.has(part.callID)) {
        answer(part.sessionID ?? pending.get(part.callID), part.callID, String(part.state.error ?? ""), true);
      }
    },
  };
};
