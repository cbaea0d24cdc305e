"""Server-rendered HTML: the run list, a run's page and the timeline fragment the live refresh swaps in.

Everything a page needs is inline (style and a small script): no build step, no network, works offline. Every
value from the World goes through ``esc`` (``html.escape``), payloads included; the script only ever puts
values into the page with ``textContent``, or HTML fragments this module rendered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from .._deployments.pins import pin_of
from .._engine.parking import PARKED_ATTRIBUTE, parked_run, shown_status, ways_out, why
from .._timeline import Row, error_lines
from .._worker.error_shapes import error_brief, error_summary
from ..client.limits import queued_text
from ..schedules.info import schedule_label
from ..world.entities import RUN_STATUSES, Run
from ..world.streams import StreamInfo
from .model import QUEUED, Lane, Picture, parent_of

VALUE_CHARS = 300  # longer values are cut on the page; the whole value is a click away (the JSON API)


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#232f3e;color:#fff;padding:8px 16px}header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:12px 16px}table{border-collapse:collapse;width:100%;background:#fff}
td,th{border-bottom:1px solid #e3e6ea;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#eef0f3;font-weight:600}code,pre{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;margin:0}
.status{display:inline-block;padding:0 6px;border-radius:8px;background:#dde3ea}
.s-completed,.s-received{background:#cdebd3}.s-failed{background:#f6cdcd}.s-running,.s-retrying{background:#d5e4fa}
.s-cancelled,.s-disposed{background:#e4e4e4}.s-waiting,.s-pending{background:#faecc8}.s-parked{background:#f3c89b}
section{margin:14px 0}h2{font-size:16px;margin:8px 0}
.wf{background:#fff;border:1px solid #e3e6ea;padding:6px}.axis{display:flex;justify-content:space-between;
color:#667;font-size:12px;margin-left:220px;margin-right:260px}
.lane{display:flex;align-items:center;height:20px;border-bottom:1px solid #f0f1f3}
.lane .name{width:212px;padding-right:8px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis;font-size:12px}
.lane .track{position:relative;flex:1;height:14px;background:#fafbfc}
.lane .info{width:252px;padding-left:8px;font-size:12px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.bar{position:absolute;top:2px;height:10px;min-width:2px;border-radius:2px}
.b-queued{background:#c9d3df}.b-completed{background:#2e9e4f}.b-failed{background:#d13b3b}
.b-retrying{background:#e0892b}.b-running{background:#3b7dd8}.b-backoff{background:repeating-linear-gradient(
45deg,#f3c89b 0 3px,#fff 3px 6px)}.b-wait{background:#b08ee0}.b-hook{background:#e3b83b}
.inl{box-shadow:inset 0 -4px 0 #1d2330}
.err{color:#a11;overflow-wrap:anywhere}.muted{color:#778}button{font-size:12px}td code,pre{word-break:break-all}
.ev td:first-child{white-space:nowrap}.sw{display:inline-block;width:18px;height:10px;border-radius:2px;
margin:0 4px 0 10px;vertical-align:middle}
"""

SCRIPT = """
(function(){
const main=document.querySelector('main');const run=main.dataset.run;
const api='/api/runs/'+encodeURIComponent(run);
document.addEventListener('click',async function(e){
 const b=e.target.closest('button[data-value]');
 if(b){const r=await fetch(api+'/events/'+encodeURIComponent(b.dataset.value)+'/value');const d=await r.json();
  const pre=document.createElement('pre');pre.textContent=JSON.stringify(d.value,null,2);b.replaceWith(pre);return;}
 const t=e.target.closest('button[data-error]');
 if(t){const r=await fetch(api+'/events/'+encodeURIComponent(t.dataset.error)+'/value');const d=await r.json();
  const pre=document.createElement('pre');pre.className='tb';pre.textContent=d.error+'\\n'+(d.traceback||'');
  t.replaceWith(pre);return;}
 const s=e.target.closest('button[data-stream]');
 if(s){if(!document.getElementById('stream-'+s.dataset.stream)){const pre=document.createElement('pre');
  pre.id='stream-'+s.dataset.stream;pre.dataset.stream=s.dataset.stream;s.after(pre);
  for(let i=0;i<20&&await more(pre);i++){}}return;}
 const w=e.target.closest('button[data-write]');
 if(w){let body={};if(w.dataset.write==='resume'){const t=document.getElementById('payload-'+w.dataset.hook).value;
  body={token:w.dataset.token,payload:w.dataset.codec?t:JSON.parse(t||'null')};}
  const r=await fetch(w.dataset.write==='cancel'?api+'/cancel':'/api/hooks/resume',{method:'POST',
  headers:{'Content-Type':'application/json','X-Awsworld-Write':'1'},body:JSON.stringify(body)});
  w.textContent=r.ok?'done':'refused ('+r.status+')';}
});
async function more(pre){
 const c=pre.dataset.cursor;const r=await fetch(api+'/streams/'+encodeURIComponent(pre.dataset.stream)+
  (c?'?cursor='+encodeURIComponent(c):''));const d=await r.json();
 pre.textContent+=d.chunks.map(c=>c.text!==undefined?c.text:'[base64] '+c.base64).join('');
 if(d.cursor)pre.dataset.cursor=d.cursor;if(d.closed&&!d.more)pre.dataset.closed='1';return d.more;
}
async function poll(){
 try{const r=await fetch(api+'/events?since='+main.dataset.since);const d=await r.json();
  main.dataset.since=Math.max(+main.dataset.since,d.count);document.getElementById('timeline').innerHTML=d.timeline;
  document.getElementById('events').insertAdjacentHTML('beforeend',d.rows);
  const st=document.getElementById('status'),sh=d.shownStatus||d.status;
  st.textContent=sh;st.className='status s-'+sh;
  for(const pre of document.querySelectorAll('pre[data-stream]'))if(!pre.dataset.closed)await more(pre);
  if(d.terminal&&!d.more)await ended();else setTimeout(poll,d.more?200:2000);}catch(err){setTimeout(poll,5000);}
}
async function ended(){
 const doc=new DOMParser().parseFromString(await (await fetch(location.href)).text(),'text/html');
 for(const id of ['summary','hooks']){const n=doc.getElementById(id),o=document.getElementById(id);
  if(!n||!o)throw new Error('no #'+id);o.replaceWith(document.adoptNode(n));}
 main.dataset.live='0';
}
if(main.dataset.live==='1')setTimeout(poll,2000);
})();
"""


def layout(title: str, body: str, *, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} · awsworld</title>"
            # (an empty icon: without one the browser asks for /favicon.ico, a 404 in the console of every page)
            f"<meta name=viewport content='width=device-width'><link rel=icon href='data:,'><style>{STYLE}</style>"
            "</head><body>"
            f"<header><a href='/'>awsworld</a> · runs</header>{body}{tail}</body></html>")


def _status(status: str, element_id: str = "") -> str:
    ident = f" id='{esc(element_id)}'" if element_id else ""
    return f"<span class='status s-{esc(status)}'{ident}>{esc(status)}</span>"


def _time(moment: datetime | None) -> str:
    return "" if moment is None else esc(moment.strftime("%Y-%m-%d %H:%M:%S"))


def run_link(run_id: str) -> str:
    return f"<a href='/runs/{esc(quote(run_id, safe=''))}'>{esc(run_id)}</a>"


def _scheduled(run: Run) -> str:
    """The schedule that started a run, under its workflow's name in the runs table (nothing if none)."""
    label = schedule_label(run.execution_context)
    return "" if label is None else f"<br><span class=muted>{esc(label)}</span>"


LIST_ERROR_CHARS = 160
"""A failed run's error in the runs table is cut to this many characters (with ``…``): the run's page has it
whole."""


def _list_error(run: Run) -> str:
    """A failed run's error, one line, in the runs table: why it failed without opening it."""
    text = error_brief(run.error) if run.error is not None and run.status == "failed" else None
    if not text:
        return ""
    cut = text if len(text) <= LIST_ERROR_CHARS else text[:LIST_ERROR_CHARS] + "…"
    return f"<span class=err>{esc(cut)}</span>"


def _queued(queued: dict[str, Any] | None) -> str:
    return f" <span class=muted>queued: {esc(queued_text(queued))}</span>" if queued else ""


def runs_page(runs: list[Run], next_cursor: str | None, *, workflow: str | None, status: str | None,
              since: str | None, cursor: str | None, note: str | None = None,
              queued: dict[str, dict[str, Any]] | None = None) -> str:
    """The run list. ``queued``: the pending runs waiting for a slot of their workflow's limit
    (``client.limits.queued_runs``), whose status says so and for which limit (a plain "pending" may be stuck)."""
    queued = queued or {}
    options = "".join(f"<option value='{s}'{' selected' if s == status else ''}>{s}</option>"
                      for s in ("", *RUN_STATUSES))
    form = (f"<form method=get>workflow <input name=workflow value='{esc(workflow or '')}'> status "
            f"<select name=status>{options}</select> created within <input name=since size=8 placeholder='2h, 7d' "
            f"value='{esc(since or '')}'> <button>filter</button></form>")
    rows = "".join(
        f"<tr><td>{run_link(r.run_id)}</td><td>{esc(r.workflow_name)}{_scheduled(r)}</td>"
        f"<td>{_status(shown_status(r.status, r.attributes))}{_queued(queued.get(r.run_id))}</td>"
        f"<td>{_time(r.created_at)}</td><td>{_time(r.completed_at)}</td><td>{_list_error(r)}</td></tr>"
        for r in runs)
    if not runs:
        more = " on these pages; the next page reads on" if next_cursor else ""
        rows = f"<tr><td colspan=6 class=muted>no runs{more}{f' ({esc(note)})' if note else ''}</td></tr>"
    base = {k: v for k, v in (("workflow", workflow), ("status", status), ("since", since)) if v}
    nav = []
    if cursor:
        nav.append(f"<a href='/?{esc(urlencode(base))}'>first page</a>")
    if next_cursor:
        nav.append(f"<a rel=next href='/?{esc(urlencode({**base, 'cursor': next_cursor}))}'>next page</a>")
    table = ("<table><tr><th>run</th><th>workflow</th><th>status</th><th>created</th><th>completed</th>"
             f"<th>error</th></tr>{rows}</table>")
    return layout("runs", f"<main><h2>Runs</h2>{form}{table}<p>{' · '.join(nav)}</p></main>")


def _pct(moment: datetime, start: datetime, span: float) -> float:
    return max(0.0, min(100.0, (moment - start).total_seconds() / span * 100))


def _bar(kind: str, a: datetime, b: datetime, start: datetime, span: float, title: str, *,
         inline: bool = False) -> str:
    left = _pct(a, start, span)
    width = max(0.0, _pct(b, start, span) - left)
    marker = " inl" if inline else ""
    return (f"<div class='bar b-{kind}{marker}' style='left:{left:.3f}%;width:{width:.3f}%' "
            f"title='{esc(title)}'></div>")


def _ms(a: datetime, b: datetime) -> str:
    ms = (b - a).total_seconds() * 1000
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _lane(lane: Lane, start: datetime, end: datetime, span: float) -> str:
    bars: list[str] = []
    info = ""
    if lane.kind == "step":
        first = lane.attempts[0].start if lane.attempts else (lane.ended or end)
        if first > lane.created:
            bars.append(_bar("queued", lane.created, first, start, span,
                             f"waited {_ms(lane.created, first)} to start"))
        for i, attempt in enumerate(lane.attempts):
            stop = attempt.end or end
            path = "inline" if attempt.inline else "queued"
            title = f"attempt {attempt.number} ({path}): {attempt.outcome}, {_ms(attempt.start, stop)}"
            if attempt.error:  # (a tooltip: cut, the event's row has the whole a click away)
                title += f" — {_cut(attempt.error)}"
            bars.append(_bar(attempt.outcome, attempt.start, stop, start, span, title, inline=attempt.inline))
            if attempt.outcome == "retrying":
                nxt = lane.attempts[i + 1].start if i + 1 < len(lane.attempts) else end
                bars.append(_bar("backoff", stop, nxt, start, span, f"back-off {_ms(stop, nxt)} before a retry"))
        errors = [f"#{a.number} {_cut(a.error)}" for a in lane.attempts if a.error]  # (the lane shows a line)
        count = f"{len(lane.attempts)} attempt{'s' if len(lane.attempts) != 1 else ''}"
        if lane.path:
            count += f", {lane.path}"
        info = esc(count) + (f" <span class=err>{esc('; '.join(errors))}</span>" if errors else "")
        if lane.ended is not None:
            info += f" <span class=muted>{esc(_ms(lane.created, lane.ended))}</span>"
    elif lane.kind == QUEUED:  # the run's start, waiting for a slot of its workflow's limit (``ui.model``)
        stop = lane.ended or end
        bars.append(_bar("queued", lane.created, stop, start, span,
                         f"queued {_ms(lane.created, stop)} for a slot of {lane.detail}"))
        info = f"queued {esc(_ms(lane.created, stop))} <code>{esc(lane.detail)}</code>"
    else:
        stop = lane.ended or end
        label = "slept" if lane.kind == "wait" else "waited"
        bars.append(_bar("wait" if lane.kind == "wait" else "hook", lane.created, stop, start, span,
                         f"{label} {_ms(lane.created, stop)}"))
        info = f"{esc(label)} {esc(_ms(lane.created, stop))} <code>{esc(lane.detail)}</code>"
    name = esc(lane.label)
    if lane.child_run_id:
        named = lane.label != "child run"  # a call's display name (``with_name``, ``child_options(name=)``)
        name = (f"{esc(lane.label)}: " if named else "") + f"child {run_link(lane.child_run_id)}"
    title = f"{lane.label} ({lane.detail})" if lane.kind == "step" and lane.detail else lane.label
    return (f"<div class=lane data-kind='{esc(lane.kind)}' data-status='{esc(lane.status)}' "
            f"data-path='{esc(lane.path)}' data-name='{esc(lane.label)}'>"
            f"<div class=name title='{esc(title)}'>{name}</div>"
            f"<div class=track>{''.join(bars)}</div><div class=info>{_status(lane.status)} {info}</div></div>")


def timeline_html(pic: Picture, *, now: datetime | None = None) -> str:
    """The waterfall: one lane per step, wait and hook on one time axis (``now`` ends it while the run runs)."""
    if pic.start is None or pic.end is None:
        return "<p class=muted>no events yet</p>"
    end = max(pic.end, now) if now is not None else pic.end
    span = max((end - pic.start).total_seconds(), 0.001)
    ticks = "".join(f"<span>{esc(_ms(pic.start, pic.start + (end - pic.start) * (i / 4)))}</span>" for i in range(5))
    lanes = "".join(_lane(lane, pic.start, end, span) for lane in pic.lanes)
    legend = "<p class=muted>" + "".join(
        f"<span class='sw b-{kind}'></span>{label}" for kind, label in (
            ("queued", "waiting to start"), ("running", "running"), ("completed", "attempt ok"),
            ("retrying", "attempt retried"), ("backoff", "back-off"), ("failed", "failed"), ("wait", "sleep"),
            ("hook", "waiting for a hook"))) + (
        "<span class='sw b-completed inl'></span>dark stripe: the attempt ran inline, in the flow's replay loop "
        "(no stripe: queued, run from a step message of its own)</p>")
    return f"<div class=wf><div class=axis>{ticks}</div>{lanes or '<p class=muted>no steps</p>'}</div>{legend}"


def _cut(text: str) -> str:
    """``text`` up to ``VALUE_CHARS`` characters, ``…`` marking a cut."""
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


FOLD_CHARS = 1000
"""A run's error message longer than this shows its first ``VALUE_CHARS`` characters in the summary, and the whole
under a fold: a 32 KB message filled screens above the waterfall."""


def _folded(text: str) -> str:
    """An error message for the run's summary: whole when short, else cut with the whole a click away."""
    if len(text) <= FOLD_CHARS:
        return f"<span class=err>{esc(text)}</span>"
    return (f"<span class=err>{esc(_cut(text))}</span><details><summary>whole message ({len(text):,} chars)"
            f"</summary><pre class=tb>{esc(text)}</pre></details>")


def _value_cell(run_id: str, row: Row) -> str:
    if row.error is not None:  # cut as a value is (a 32 KB message on each of six attempts made a 400 KB page)
        cut = len(row.error) > VALUE_CHARS
        stack = bool((row.error_details or {}).get("stack"))
        label = ("whole error and traceback" if stack else "whole error") if cut else "traceback" if stack else ""
        more = f" <button data-error='{esc(row.event_id)}'>{label}{f' ({len(row.error):,} chars)' if cut else ''}" \
               "</button>" if label else ""
        return f"<span class=err>{esc(_cut(row.error))}</span>{more}"
    if not row.has_value:
        return ""
    text = compact(row.shown_value)
    if len(text) <= VALUE_CHARS:
        return f"<code>{esc(text)}</code>"
    return (f"<code>{esc(text[:VALUE_CHARS])}…</code> <button data-value='{esc(row.event_id)}'>whole value "
            f"({len(text):,} chars)</button>")


def event_rows(run_id: str, rows: Iterable[Row]) -> str:
    return "".join(
        f"<tr><td>{row.at_ms:.0f} ms</td><td>{esc(row.event_type)}</td><td><code>{esc(row.what)}</code></td>"
        f"<td>{esc(row.detail)}</td><td>{_value_cell(run_id, row)}</td></tr>" for row in rows)


def error_facts(error: dict[str, Any]) -> list[tuple[str, str]]:
    """A failed run's error for its summary: the error, the step or child run that failed (for a step's or a
    child's error the workflow let through: its original type and message) and the tracebacks, folded."""
    cause = error.get("cause")
    summary = error_summary(error) or ""
    # A step's message is whole on its own line below: the summary only cuts it. The run's own is folded whole.
    facts = [("error", f"<span class=err>{esc(_cut(summary))}</span>" if isinstance(cause, dict) else _folded(summary))]
    if isinstance(cause, dict):
        child = error.get("childRunId")
        attempt = f", attempt {error['attempt']}" if error.get("attempt") else ""
        where = (f"{run_link(str(child))} ({esc(error.get('childWorkflowName'))})" if child else
                 f"<code>{esc(error.get('stepName'))}</code> ({esc(error.get('stepId'))}{esc(attempt)})")
        original = f"{cause.get('type') or cause.get('name')}: {cause.get('message', '')}"
        facts.append(("failed child" if child else "failed step", f"{where}: {_folded(original)}"))
    lines = error_lines(error)
    if lines:
        facts.append(("traceback", f"<details><summary>show</summary><pre class=tb>{esc(chr(10).join(lines))}</pre>"
                                   "</details>"))
    return facts


def _linked(run_id: str, statuses: dict[str, str]) -> str:
    """A link to a parent or child run, with its status when the page read it (see ``api.linked_statuses``)."""
    status = statuses.get(run_id)
    return run_link(run_id) + (f" {_status(status)}" if status else "")


def run_page(run: Run, *, pic: Picture, rows: list[Row], streams: list[tuple[str, StreamInfo]],
             statuses: dict[str, str], allow_writes: bool, now: datetime,
             waits_on: Iterable[str] = (), cancel_reason: str | None = None, rerun: str | None = None,
             unreadable: str | None = None) -> str:
    """A run's page. ``waits_on``: what a live run waits on, one line each, as ``awsworld describe`` says it
    (``client.waits.describe_waits``: a sleep, a hook, a step, a retry, a limit's slot); ``rerun``: a failed run's
    re-run line, as describe says it (``_timeline.failed_run_hint``). ``unreadable``: why the run's values are
    missing from the page (the World's refusal to read them), when they are."""
    live = not run.is_terminal
    parent = parent_of(run)
    facts = [("workflow", esc(run.workflow_name)),
             ("status", _status(shown_status(run.status, run.attributes), "status")),
             ("created", _time(run.created_at)), ("started", _time(run.started_at)),
             ("completed", _time(run.completed_at))]
    if (parked := parked_run(run.status, run.attributes)) is not None:
        facts.append(("parked", f"since {_time(parked.since)}: {esc(why(parked.change))}"
                                f"<code>{esc(parked.divergence)}</code><br><span class=muted>"
                                f"{esc(ways_out(run.run_id, parked.change, pin_of(run.attributes)))}</span>"))
    if unreadable is not None:
        facts.append(("values", f"cannot be read: {esc(unreadable)}"))
    if cancel_reason:  # (the reason `cancel --reason` gave, as describe's "reason" line)
        facts.append(("reason", esc(cancel_reason)))
    if run.error is not None:
        facts.extend(error_facts(run.error.model_dump(by_alias=True, exclude_none=True)))
    if run.status == "failed" and rerun:
        facts.append(("re-run", esc(rerun)))
    for line in waits_on:  # (describe's "waits on" lines: one implementation, client/waits.py)
        facts.append(("waits on", esc(line)))
    if parent:
        facts.append(("parent", _linked(parent, statuses)))
    if (started_by := schedule_label(run.execution_context)) is not None:
        facts.append(("started by", esc(started_by)))
    if pic.children:
        unread = sum(1 for c in pic.children if c not in statuses)
        note = f" <span class=muted>(status shown for the first {len(pic.children) - unread})</span>" if unread else ""
        facts.append(("children", " · ".join(_linked(c, statuses) for c in pic.children) + note))
    for key, value in sorted(run.attributes.items()):
        if key != PARKED_ATTRIBUTE:  # shown above, as parked
            facts.append((f"attribute {key}", f"<code>{esc(value)}</code>"))
    if allow_writes and live:
        facts.append(("", "<button data-write=cancel>cancel this run</button>"))
    summary = "<table id=summary>" + "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts) + "</table>"

    hooks = []
    for hook in pic.hooks:
        payloads = "".join(f"<div>{_time(at)} <code>{esc(compact(p)[:VALUE_CHARS])}</code>"
                           + (f" <button data-value='{esc(eid)}'>whole value</button>"
                              if len(compact(p)) > VALUE_CHARS else "") + "</div>"
                           for eid, at, p in hook.payloads)
        if hook.heartbeats:
            payloads += f"<div class=muted>{hook.heartbeats} heartbeat(s), last {_time(hook.last_heartbeat)}</div>"
        resume = ""
        if allow_writes and live and hook.state == "open":
            # A codec hook's payload is the codec's text, sent as typed (``HookInfo.codec``); any other's is JSON.
            resume = (f"<textarea id='payload-{esc(hook.hook_id)}' rows=1>{'' if hook.codec else 'null'}</textarea> "
                      f"<button data-write=resume data-token='{esc(hook.token)}' data-hook='{esc(hook.hook_id)}'"
                      f"{' data-codec=1' if hook.codec else ''}>resume</button>")
        hooks.append(f"<tr><td><code>{esc(hook.token)}</code></td><td>{'webhook' if hook.webhook else 'hook'}</td>"
                     f"<td>{esc(hook.state)}</td><td>{payloads or '—'}{resume}</td></tr>")
    hooks_html = ("<table><tr><th>token</th><th>kind</th><th>state</th><th>payloads</th></tr>"
                  + "".join(hooks) + "</table>") if hooks else "<p class=muted>no hooks</p>"
    stream_rows = "".join(
        f"<tr><td><code>{esc(name)}</code></td><td>{info.tail_index + 1}</td><td>{'closed' if info.done else 'open'}"
        f"</td><td><button data-stream='{esc(name)}'>show</button></td></tr>" for name, info in streams)
    streams_html = ("<table><tr><th>stream</th><th>chunks</th><th>state</th><th></th></tr>" + stream_rows
                    + "</table>") if streams else "<p class=muted>no streams</p>"
    events_html = ("<table class=ev><thead><tr><th>at</th><th>event</th><th>what</th><th>detail</th><th>value</th></tr>"
                   f"</thead><tbody id=events>{event_rows(run.run_id, rows)}</tbody></table>")
    body = (f"<main data-run='{esc(run.run_id)}' data-since='{len(rows)}' data-live='{1 if live else 0}'>"
            f"<h2>Run <code>{esc(run.run_id)}</code></h2>{summary}"
            f"<section><h2>Timeline</h2><div id=timeline>{timeline_html(pic, now=now if live else None)}</div>"
            f"</section><section id=hooks><h2>Hooks</h2>{hooks_html}</section>"
            f"<section><h2>Streams</h2>{streams_html}</section>"
            f"<section><h2>Events</h2>{events_html}</section></main>")
    return layout(f"run {run.run_id}", body, script=SCRIPT)
