// Grades a batch of generated cases with the real @agentv/core, one process
// per batch. Each input line: {"config": <agentv eval YAML text>, "record":
// <the CLI target's output file text>}. Each output line: {score, verdict,
// hits, misses} or {error}. Nothing of agentv is reimplemented here: the
// config is read by agentv's YAML parser (the `yaml` package it depends on),
// the record by its CLI provider's parseOutputContent (what `agentv eval`
// does with a CLI target's output file), the grade by ToolTrajectoryGrader.
// Only the snake_case -> camelCase mapping of the evaluator entry is ours:
// agentv 4.42.4 no longer ships a YAML parser for tool-trajectory entries.
import fs from 'node:fs';
import { parse } from 'yaml';
import { ToolTrajectoryGrader, computeTraceSummary, createProvider } from '@agentv/core';

const provider = createProvider({ kind: 'cli', name: 'differential', config: { command: 'true' } });
const camelItem = (it) => {
  const o = { tool: it.tool };
  if (it.args !== undefined && (it.args === 'any' || (typeof it.args === 'object' && it.args !== null && !Array.isArray(it.args)))) o.args = it.args;
  if (typeof it.max_duration_ms === 'number' && it.max_duration_ms >= 0) o.maxDurationMs = it.max_duration_ms;
  if (it.args_match !== undefined) o.argsMatch = it.args_match;
  return o;
};
const out = [];
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
const warn = console.warn;
console.warn = () => {};  // the provider warns about negative record durations
for (const line of lines) {
  const c = JSON.parse(line);
  try {
    const entry = parse(c.config).execution.evaluators[0];
    const cfg = { name: entry.name, type: 'tool-trajectory', mode: entry.mode };
    if (entry.minimums) {
      cfg.minimums = {};
      for (const [k, v] of Object.entries(entry.minimums)) if (typeof v === 'number' && v >= 0) cfg.minimums[k] = v;
    }
    if (entry.expected) cfg.expected = entry.expected.filter(i => i && typeof i.tool === 'string').map(camelItem);
    if (entry.args_match !== undefined) cfg.argsMatch = entry.args_match;
    const output = provider.parseOutputContent(c.record).output;
    const ctx = { output };
    if (output.length > 0) ctx.trace = computeTraceSummary(output).trace;
    const r = new ToolTrajectoryGrader({ config: cfg }).evaluate(ctx);
    out.push(JSON.stringify({
      score: r.score, verdict: r.verdict,
      hits: r.assertions.filter(a => a.passed).map(a => a.text),
      misses: r.assertions.filter(a => !a.passed).map(a => a.text),
    }));
  } catch (e) {
    out.push(JSON.stringify({ error: `${e.name}: ${e.message}` }));
  }
}
console.warn = warn;
fs.writeFileSync(process.argv[3], out.join('\n') + '\n');
