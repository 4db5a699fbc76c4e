"""The run report as one self-contained HTML page: inline CSS, JS and SVG,
the data as JSON in a script tag; nothing is fetched."""

from __future__ import annotations

import html
from typing import Any, Final

import msgspec

__all__ = ("render",)

_CSS: Final = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.fail{color:#b00020;font-weight:600} .pass{color:#1b5e20}
tr.trace{cursor:pointer} tr.trace:hover{background:#f3f3f3}
.detail{background:#fafafa} .call.deciding{background:#ffe0e0}
mark{background:#ffeb3b} code{font-size:12px;word-break:break-all}
.warn{background:#fff3cd;padding:.5em;border:1px solid #e0c36b}
#filters label{margin-right:1em}
"""

_JS: Final = r"""
const R = JSON.parse(document.getElementById('report-data').textContent);
const $ = (t, a = {}, ...k) => { const e = document.createElement(t);
  for (const [n, v] of Object.entries(a)) e.setAttribute(n, v);
  for (const c of k) e.append(c); return e; };
function chart(row) {
  const w = 300, h = 40, n = Math.max(row.events, 1), NS = 'http://www.w3.org/2000/svg';
  const s = document.createElementNS(NS, 'svg');
  s.setAttribute('width', w); s.setAttribute('height', h); s.setAttribute('class', 'timeline');
  const line = document.createElementNS(NS, 'line');
  Object.entries({x1: 0, y1: h - 2, x2: w, y2: h - 2, stroke: '#999'}).forEach(([k, v]) => line.setAttribute(k, v));
  s.append(line);
  const max = Math.max(...row.budget.map(p => p[1]), 1e-9);
  if (row.budget.length) {
    const p = document.createElementNS(NS, 'polyline');
    p.setAttribute('points', row.budget.map(([e, c]) => `${e / n * w},${h - 2 - c / max * (h - 6)}`).join(' '));
    p.setAttribute('fill', 'none'); p.setAttribute('stroke', '#1565c0'); s.append(p);
  }
  for (const [e, g, a] of row.decisions) {
    const c = document.createElementNS(NS, 'circle');
    c.setAttribute('cx', e / n * w); c.setAttribute('cy', h / 2); c.setAttribute('r', 3);
    c.setAttribute('fill', a === 'deny' ? '#b00020' : '#ef6c00');
    const t = document.createElementNS(NS, 'title'); t.textContent = `${g}: ${a} at event ${e}`;
    c.append(t); s.append(c);
  }
  return s;
}
function highlighted(text, value) {
  const code = $('code');
  const i = value ? text.indexOf(value) : -1;
  if (i < 0) { code.textContent = text; return code; }
  code.append(text.slice(0, i), $('mark', {}, value), text.slice(i + value.length));
  return code;
}
function detail(row) {
  const box = $('div', {class: 'detail'});
  const d = row.deciding;
  if (d) box.append($('p', {}, `Decided by ${d.grader} at event ${d.at_event}: ${d.evidence}`));
  const t = $('table', {class: 'calls'}, $('tr', {}, $('th', {}, 'event'), $('th', {}, 'call'), $('th', {}, 'tool'), $('th', {}, 'arguments')));
  for (const c of row.window) {
    const hit = d && d.call_at === c.at_event;
    t.append($('tr', {class: hit ? 'call deciding' : 'call'}, $('td', {}, String(c.at_event)),
      $('td', {}, c.call_id || ''), $('td', {}, c.tool), $('td', {}, hit ? highlighted(c.args, d.value) : highlighted(c.args, null))));
  }
  if (row.window.length) box.append(t);
  else box.append($('p', {}, 'No calls were held for this trace.'));
  box.append($('p', {}, 'Guard decisions and budget over the trace:'), chart(row));
  return box;
}
function draw() {
  const onlyFailed = document.getElementById('only-failed').checked;
  const grader = document.getElementById('grader').value;
  const body = document.getElementById('traces'); body.replaceChildren();
  for (const row of R.rows) {
    const vs = Object.entries(row.verdicts).filter(([g]) => !grader || g === grader);
    if (grader && !vs.length) continue;
    const failed = vs.some(([, v]) => v.outcome !== 'pass');
    if (onlyFailed && !failed) continue;
    const tr = $('tr', {class: 'trace', 'data-trace': row.trace_id, 'data-failed': String(failed)},
      $('td', {}, row.trace_id), $('td', {}, row.source), $('td', {}, String(row.events)),
      $('td', {}, ...vs.map(([g, v]) => $('div', {class: v.outcome === 'pass' ? 'pass' : 'fail'}, `${g}: ${v.outcome}`))));
    let open = null;
    tr.addEventListener('click', () => {
      if (open) { open.remove(); open = null; return; }
      open = $('tr', {class: 'detail-row'}, $('td', {colspan: 4}, detail(row)));
      tr.after(open);
    });
    body.append(tr);
  }
}
const graders = new Set(R.rows.flatMap(r => Object.keys(r.verdicts)));
for (const g of [...graders].sort()) document.getElementById('grader').append($('option', {value: g}, g));
document.getElementById('only-failed').addEventListener('change', draw);
document.getElementById('grader').addEventListener('change', draw);
draw();
"""


def render(snapshot: dict[str, Any], *, title: str, live: bool) -> str:
    """The page for one :meth:`RunReport.snapshot`."""
    data = msgspec.json.encode(snapshot).decode().replace("</", "<\\/")
    files = "".join(_file_row(name, f) for name, f in snapshot["files"].items())
    dupes = "".join(
        f"<li>session {html.escape(t)} is in both {html.escape(a)} and {html.escape(b)}</li>"
        for t, a, b in snapshot["duplicates"]
    )
    warn = f'<div class="warn"><ul>{dupes}</ul></div>' if dupes else ""
    refresh = '<meta http-equiv="refresh" content="5">' if live else ""
    return f"""<!doctype html><html><head><meta charset="utf-8">{refresh}
<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>
<h1>{html.escape(title)}</h1>
<p id="summary"><span id="n-traces">{snapshot["traces"]}</span> traces,
<span id="n-failed" class="fail">{snapshot["failed"]}</span> failed,
<span id="n-events">{snapshot["events"]}</span> events{" (live: this page is rewritten as the run goes)" if live else ""}</p>
{warn}
<h2>By file</h2><table id="files"><tr><th>file</th><th>traces</th><th>graders (pass/fail)</th><th>first deciding event</th></tr>{files}</table>
<h2>Traces</h2><div id="filters"><label><input type="checkbox" id="only-failed"> failed only</label>
<label>grader <select id="grader"><option value="">all</option></select></label></div>
<table><thead><tr><th>trace</th><th>file</th><th>events</th><th>verdicts</th></tr></thead><tbody id="traces"></tbody></table>
<script type="application/json" id="report-data">{data}</script>
<script>{_JS}</script></body></html>
"""


def _file_row(name: str, f: dict[str, Any]) -> str:
    graders = ", ".join(
        f"{html.escape(g)} {c['pass']}/{c['fail']}" for g, c in f["graders"].items()
    )
    first = f["first"]
    told = (
        ""
        if first is None
        else html.escape(
            f"{first['trace']}: {first['grader']} at event {first['at_event']}"
        )
    )
    return f"<tr><td>{html.escape(name)}</td><td>{f['traces']}</td><td>{graders}</td><td>{told}</td></tr>"
