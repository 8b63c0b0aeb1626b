"""The coordinator's status page: one self-contained HTML document (inline CSS and JavaScript,
no external resources: it must work on a machine without internet access).

The status at the time of the request is embedded in the page, so the tables show at first
paint; the script then polls ``status.json`` every :data:`POLL_MS` and redraws the tables and two
SVG charts from the coordinator's rolling history: throughput (timestamps handed out per second)
and observer lag (age of each observer's oldest waiting change). Every value is inserted as text
(``textContent``), never as markup: observer errors and names come from users.
"""

from __future__ import annotations

import json
from typing import Any

from percolator.server.status.sampler import DEFAULT_CAPACITY

POLL_MS = 1500
"""How often the page polls ``status.json``."""

_STYLE = """
:root { --fg: #1d2330; --muted: #667085; --bg: #ffffff; --panel: #f5f7fa; --line: #d8dde6;
  --ok: #1a7f37; --bad: #c62828; --warn: #b26a00; font-family: system-ui, sans-serif; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6e9ef; --muted: #98a2b3; --bg: #12151c; --panel: #1b2029; --line: #2e3541; } }
body { margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 78rem; color: var(--fg);
  background: var(--bg); font-size: 14px; }
header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
h1 { font-size: 1.4rem; margin: 0.2rem 0; }
h2 { font-size: 1.05rem; margin: 1.4rem 0 0.4rem; }
.badge { padding: 0.15rem 0.6rem; border-radius: 1rem; color: #fff; font-weight: 600; }
.badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); }
#updated { color: var(--muted); } #updated.stale { color: var(--bad); }
#problems { color: var(--bad); margin: 0.5rem 0; padding-left: 1.2rem; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(22rem, 1fr)); gap: 1rem;
  margin-top: 1rem; }
figure { margin: 0; padding: 0.6rem 0.8rem; background: var(--panel); border-radius: 6px; }
figcaption { font-weight: 600; margin-bottom: 0.3rem; }
figcaption .now { font-weight: 400; color: var(--muted); margin-left: 0.5rem; }
svg.chart { width: 100%; height: 140px; display: block; }
svg.chart .frame { fill: none; stroke: var(--line); }
svg.chart .label { fill: var(--muted); font-size: 10px; }
svg.chart .series { fill: none; stroke-width: 1.6; }
.legend { display: flex; gap: 0.8rem; flex-wrap: wrap; color: var(--muted); font-size: 12px; }
.legend i { display: inline-block; width: 0.8rem; height: 0.25rem; margin-right: 0.3rem;
  vertical-align: middle; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.3rem 0.6rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.bad, .bad-text { color: var(--bad); } td.ok { color: var(--ok); } td.warn { color: var(--warn); }
td.empty { color: var(--muted); font-style: italic; }
code { font-size: 12px; }
"""

_SCRIPT = """
"use strict";
const POLL_MS = %(poll_ms)d;
const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700"];
const KEEP = %(keep)d;
let polls = 0;
let history = [];

function text(v) { return v === null || v === undefined ? "" : String(v); }
function ms(v) {
  if (v === null || v === undefined) return "";
  if (v < 1000) return Math.round(v) + " ms";
  if (v < 120000) return (v / 1000).toFixed(1) + " s";
  if (v < 7200000) return (v / 60000).toFixed(1) + " min";
  return (v / 3600000).toFixed(1) + " h";
}
function bytes(v) {
  if (v === null || v === undefined) return "";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}
function clock(t) { return t ? new Date(t).toLocaleTimeString() : ""; }
function ago(t, now) { return t ? ms(Math.max(0, now - t)) + " ago" : ""; }

function cell(tr, value, cls) {
  const td = document.createElement("td");
  td.textContent = text(value);
  if (cls) td.className = cls;
  tr.appendChild(td);
}

// columns: [header, row => value, row => class]
function fillTable(id, columns, rows, rowId, empty) {
  const table = document.getElementById(id);
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const [name] of columns) {
    const th = document.createElement("th");
    th.textContent = name;
    head.appendChild(th);
  }
  const body = table.createTBody();
  if (!rows.length) {
    const tr = body.insertRow();
    const td = document.createElement("td");
    td.colSpan = columns.length;
    td.className = "empty";
    td.textContent = empty;
    tr.appendChild(td);
  }
  for (const row of rows) {
    const tr = body.insertRow();
    tr.dataset.id = rowId(row);
    for (const [, value, cls] of columns) cell(tr, value(row), cls ? cls(row) : "");
  }
  table.dataset.rows = String(rows.length);
}

const SVG = "http://www.w3.org/2000/svg";
function svgEl(parent, tag, attrs, content) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (content !== undefined) e.textContent = content;
  parent.appendChild(e);
  return e;
}

// series: [{name, color, points: [[t_ms, value], ...]}]
function drawChart(id, series, unit) {
  const svg = document.getElementById(id);
  svg.replaceChildren();
  const W = 400, H = 140, L = 44, R = 6, T = 8, B = 18;
  svgEl(svg, "rect", {class: "frame", x: L, y: T, width: W - L - R, height: H - T - B});
  const all = series.flatMap(s => s.points);
  if (all.length < 2) {
    svgEl(svg, "text", {class: "label", x: L + 8, y: H / 2}, "waiting for samples");
    svg.dataset.series = "0";
    return;
  }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]));
  const top = Math.max(1, ...all.map(p => p[1])) * 1.1;
  const x = t => L + (W - L - R) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
  const y = v => T + (H - T - B) * (1 - v / top);
  svgEl(svg, "text", {class: "label", x: 2, y: T + 9}, unit(top));
  svgEl(svg, "text", {class: "label", x: 2, y: H - B}, unit(0));
  svgEl(svg, "text", {class: "label", x: L, y: H - 4}, clock(t0));
  svgEl(svg, "text", {class: "label", x: W - R, y: H - 4, "text-anchor": "end"}, clock(t1));
  let drawn = 0;
  for (const s of series) {
    if (!s.points.length) continue;
    const pts = s.points.map(p => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
    const line = svgEl(svg, "polyline", {class: "series", points: pts, stroke: s.color});
    line.dataset.name = s.name;
    line.dataset.points = String(s.points.length);
    drawn++;
  }
  svg.dataset.series = String(drawn);
}

function legend(id, series) {
  const box = document.getElementById(id);
  box.replaceChildren();
  for (const s of series) {
    const span = document.createElement("span");
    const swatch = document.createElement("i");
    swatch.style.background = s.color;
    span.appendChild(swatch);
    span.appendChild(document.createTextNode(s.name));
    box.appendChild(span);
  }
}

function render(s) {
  const now = s.generated_ms;
  const badge = document.getElementById("health");
  badge.textContent = s.ok ? "OK" : "PROBLEMS";
  badge.className = "badge " + (s.ok ? "ok" : "bad");
  const updated = document.getElementById("updated");
  updated.textContent = "updated " + clock(now);
  updated.className = "";
  const problems = document.getElementById("problems");
  problems.replaceChildren();
  for (const p of s.problems) {
    const li = document.createElement("li");
    li.textContent = p;
    problems.appendChild(li);
  }

  const c = s.coordinator;
  fillTable("coordinator", [
    ["address", r => r.address],
    ["state", r => r.reachable ? "up" : "down: " + text(r.error), r => r.reachable ? "ok" : "bad"],
    ["latest timestamp", r => r.latest_ts, () => "num"],
    ["at", r => clock(r.latest_ts_ms)],
    ["GC safe point", r => r.gc_safe_point, () => "num"],
    ["safe point age", r => r.gc_safe_point_ms ? ms(now - r.gc_safe_point_ms) : "no GC yet"],
    ["next safe point", r => r.gc_next_safe_point, () => "num"],
    ["live clients", r => r.live_clients, () => "num"],
  ], [c], r => r.address, "");

  fillTable("shards", [
    ["#", r => r.index, () => "num"],
    ["DSN", r => r.dsn],
    ["state", r => r.reachable ? (r.error ? r.error : "up") : "down: " + text(r.error),
      r => !r.reachable ? "bad" : r.error ? "warn" : "ok"],
    ["schema", r => r.schema_version, () => "num"],
    ["locks", r => r.locks, () => "num"],
    ["safe point", r => r.safe_point, () => "num"],
    ["size", r => bytes(r.size_bytes), () => "num"],
    ["Postgres", r => r.postgres_version],
    ["probe", r => ms(r.probe_ms), () => "num"],
  ], s.shards, r => "shard-" + r.index, "no shards (status gathered without --store)");

  fillTable("servers", [
    ["id", r => r.id],
    ["SQL address", r => r.sql_address],
    ["metrics", r => r.metrics_url],
    ["host", r => r.host],
    ["pid", r => r.pid, () => "num"],
    ["lease left", r => ms(r.lease_remaining_ms), () => "num"],
    ["joined", r => ago(r.joined_ms, now)],
  ], s.servers, r => r.id, "no SQL server has joined");

  fillTable("workers", [
    ["id", r => r.id],
    ["info", r => r.info],
    ["slice", r => r.slice],
    ["lease left", r => ms(r.lease_remaining_ms), () => "num"],
    ["joined", r => ago(r.joined_ms, now)],
  ], s.workers, r => r.id, "no observer worker is running");

  fillTable("observers", [
    ["name", r => r.name],
    ["table", r => r.table],
    ["columns", r => r.columns],
    ["state", r => r.paused ? "paused" : "active", r => r.paused ? "warn" : "ok"],
    ["pending", r => r.pending, () => "num"],
    ["lag", r => r.lag_ms === null ? "-" : ms(r.lag_ms), () => "num"],
    ["runs", r => r.runs, () => "num"],
    ["commits", r => r.commits, () => "num"],
    ["conflicts", r => r.conflicts, () => "num"],
    ["failures", r => r.failures, r => r.failures ? "num bad" : "num"],
    ["parked", r => r.parked, r => r.parked ? "num bad" : "num"],
    ["last error", r => r.last_error, () => "bad"],
  ], s.observers, r => r.name, s.observers_error ? "cannot read: " + s.observers_error
    : "no observers");

  const hist = history;
  const tput = hist.filter(h => h.timestamps_per_s !== null)
    .map(h => [h.t_ms, h.timestamps_per_s]);
  drawChart("chart-throughput", [{name: "timestamps/s", color: COLORS[0], points: tput}],
    v => v >= 1000 ? (v / 1000).toFixed(1) + "k" : v.toFixed(v < 10 ? 1 : 0));
  const last = tput.length ? tput[tput.length - 1][1] : null;
  document.getElementById("throughput-now").textContent =
    last === null ? "" : "now " + last.toFixed(1) + "/s";

  const names = [...new Set(s.observers.map(o => o.name)
    .concat(hist.flatMap(h => Object.keys(h.lag_ms || {}))))].sort();
  const lagSeries = names.map((name, i) => ({
    name, color: COLORS[i %% COLORS.length],
    points: hist.filter(h => h.lag_ms && name in h.lag_ms).map(h => [h.t_ms, h.lag_ms[name]]),
  }));
  drawChart("chart-lag", lagSeries, ms);
  legend("lag-legend", lagSeries);
  const worst = s.observers.reduce((m, o) => Math.max(m, o.lag_ms || 0), 0);
  document.getElementById("lag-now").textContent = s.observers.length ? "now max " + ms(worst) : "";
  document.body.dataset.rendered = String(now);
}

async function poll() {
  try {
    const since = history.length ? history[history.length - 1].t_ms : 0;
    const response = await fetch("status.json?since=" + since, {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    const status = await response.json();
    polls++;
    document.body.dataset.polls = String(polls);
    remember(status.history);
    render(status);
  } catch (e) {
    const updated = document.getElementById("updated");
    updated.textContent = "coordinator not answering (" + e.message + "); retrying";
    updated.className = "stale";
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

// The page keeps the last KEEP samples and asks only for newer ones (?since=).
function remember(samples) {
  history = history.concat(samples || []).slice(-KEEP);
}

const initial = JSON.parse(document.getElementById("initial-status").textContent);
remember(initial.history);
render(initial);
setTimeout(poll, POLL_MS);
"""

_BODY = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Percolator status</title>
<style>%(style)s</style>
</head>
<body data-polls="0">
<header>
  <h1>Percolator</h1>
  <span id="health" class="badge">&hellip;</span>
  <span id="updated"></span>
</header>
<ul id="problems"></ul>
<section class="charts">
  <figure>
    <figcaption>Throughput: timestamps per second<span id="throughput-now" class="now"></span>
    </figcaption>
    <svg id="chart-throughput" class="chart" viewBox="0 0 400 140"
      preserveAspectRatio="none" role="img" aria-label="throughput"></svg>
  </figure>
  <figure>
    <figcaption>Observer lag<span id="lag-now" class="now"></span></figcaption>
    <svg id="chart-lag" class="chart" viewBox="0 0 400 140"
      preserveAspectRatio="none" role="img" aria-label="observer lag"></svg>
    <div id="lag-legend" class="legend"></div>
  </figure>
</section>
<h2>Coordinator</h2>
<table id="coordinator"></table>
<h2>Shards</h2>
<table id="shards"></table>
<h2>SQL servers</h2>
<table id="servers"></table>
<h2>Observer workers</h2>
<table id="workers"></table>
<h2>Observers</h2>
<table id="observers"></table>
<script id="initial-status" type="application/json">%(initial)s</script>
<script>%(script)s</script>
</body>
</html>
"""


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: ``<`` is escaped, so no string in
    it can close the element (``</script>``) or open a comment."""
    return json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")


def render_page(status: dict[str, Any]) -> str:
    """The page, with ``status`` (a ``ClusterStatus.to_json()``) embedded as its first state."""
    return _BODY % {
        "style": _STYLE,
        "initial": embed_json(status),
        "script": _SCRIPT % {"poll_ms": POLL_MS, "keep": DEFAULT_CAPACITY},
    }
