// Peer: agentv's ToolTrajectoryGrader (@agentv/core, imported, no CLI), on
// the same canonical events.jsonl trajgrade reads. agentv grades a whole
// trajectory, so events are grouped per trace until trace_end, turned into
// agentv output messages ({role, toolCalls: [{tool, input, ...}]}) and
// graded then. The four shared checks agentv can express (see
// ../shared/notes/peers-performance.md): in_order, any_order, forbidden (as
// subset of the other tools, args ignored) and exact (args exact). A check
// passes when the score is 1 (agentv's own verdict passes at >= 0.8).
//
// usage: node agentv.mjs CORE_INDEX_JS CHECKS_JSON EVENTS_JSONL OUT_JSON
import { readFileSync, writeFileSync, createReadStream } from "node:fs";
import { pathToFileURL } from "node:url";

const [coreIndex, checksPath, eventsPath, outPath] = process.argv.slice(2);
const { ToolTrajectoryGrader } = await import(pathToFileURL(coreIndex).href);
const C = JSON.parse(readFileSync(checksPath, "utf8"));
const OTHER_TOOLS = ["bash", "create", "edit", "glob", "grep", "todo_write", "view", "web_search"];

const graders = {
  in_order: new ToolTrajectoryGrader({
    config: { type: "tool-trajectory", mode: "in_order", expected: C.IN_ORDER.map((tool) => ({ tool })) },
  }),
  any_order: new ToolTrajectoryGrader({
    config: {
      type: "tool-trajectory",
      mode: "any_order",
      minimums: Object.fromEntries(C.ANY_ORDER.map((t) => [t, 1])),
    },
  }),
  forbidden: new ToolTrajectoryGrader({
    config: {
      type: "tool-trajectory",
      mode: "subset",
      argsMatch: "ignore",
      expected: OTHER_TOOLS.map((tool) => ({ tool })),
    },
  }),
  exact: new ToolTrajectoryGrader({
    config: {
      type: "tool-trajectory",
      mode: "exact",
      argsMatch: "exact",
      expected: C.GOLDEN.map(([tool, args]) => ({ tool, args })),
    },
  }),
};
const names = Object.keys(graders);
const pass = Object.fromEntries(names.map((n) => [n, 0]));
const open = new Map(); // trace_id -> agentv messages
let nTraces = 0;

function onEvent(ev) {
  let msgs = open.get(ev.trace_id);
  if (msgs === undefined) {
    msgs = [{ role: "user", content: "" }];
    open.set(ev.trace_id, msgs);
  }
  switch (ev.type) {
    case "turn_start":
      msgs.push({ role: "assistant", content: "", toolCalls: [] });
      break;
    case "tool_call": {
      let last = msgs[msgs.length - 1];
      if (last.role !== "assistant") {
        last = { role: "assistant", content: "", toolCalls: [] };
        msgs.push(last);
      }
      last.toolCalls.push({ tool: ev.name, input: ev.args ?? {}, id: ev.call_id });
      break;
    }
    case "tool_result": {
      // attach the output to its call, as agentv's own transcripts carry it
      const last = msgs[msgs.length - 1];
      const call = last.toolCalls?.find((c) => c.id === ev.call_id);
      if (call) call.output = ev.result;
      break;
    }
    case "trace_end": {
      open.delete(ev.trace_id);
      nTraces++;
      for (const n of names) {
        if (graders[n].evaluate({ output: msgs }).score === 1) pass[n]++;
      }
      break;
    }
  }
}

const t0 = performance.now();
let rest = "";
for await (const chunk of createReadStream(eventsPath, { encoding: "utf8", highWaterMark: 1 << 20 })) {
  const lines = (rest + chunk).split("\n");
  rest = lines.pop();
  for (const line of lines) if (line) onEvent(JSON.parse(line));
}
if (rest) onEvent(JSON.parse(rest));
const seconds = (performance.now() - t0) / 1000;
writeFileSync(outPath, JSON.stringify({ peer: "agentv", n_traces: nTraces, seconds, pass_counts: pass }));
