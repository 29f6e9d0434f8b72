/*
 * web/dashboard.js: the tarmac dashboard's only script, plain JavaScript
 * with no library.  It reads the API of the server that served it with the
 * operator's bearer token and draws SVG by hand:
 *   GET /v1/timeseries  GPUs provisioned / allocated / idle, jobs queued and
 *                       running over the chosen window, and the same now
 *   GET /v1/spend       this month's spend, idle spend, the projection
 *   GET /v1/budgets     caps per team and org with what was spent against them
 *   GET /v1/pools       pools and their live nodes
 *   GET /v1/jobs        running multi-node jobs, every node with its rank
 *   GET /v1/decisions   the latest decisions and their reasons
 * Text goes in with textContent only (decision reasons and team names come
 * from users).  Every figure shown is also kept raw in a data-value
 * attribute, so tests/lib/dashboard_check.py can compare it with the API.
 * The token comes from /#token=... (moved to sessionStorage, then the
 * fragment is cleared) or from the form; a 401 brings the form back.
 */
'use strict';

(function () {
  const REFRESH_MS = 15000;
  const TOKEN_KEY = 'tarmac-token';
  /* Window -> step in seconds: 60 points whatever the window. */
  const WINDOWS = { '15m': 15, '1h': 60, '6h': 360, '24h': 1440, '7d': 10080 };
  const DECISIONS_SHOWN = 15;

  const $ = (id) => document.getElementById(id);
  /* The SVG namespace, taken from an <svg> the HTML parser made, so that
   * no address of any kind is written in this file. */
  let svgNS = null;
  let token = null;
  let timer = null;

  class AuthError extends Error {}

  /* ---- the token -------------------------------------------------------- */

  function takeToken() {
    const frag = new URLSearchParams(location.hash.replace(/^#/, ''));
    const given = frag.get('token');
    const win = frag.get('window');
    if (given) {
      sessionStorage.setItem(TOKEN_KEY, given);
    }
    if (win && WINDOWS[win]) {
      $('window').value = win;
    }
    if (given || win) {
      /* Out of the address bar and the history. */
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function showLogin(message) {
    clearTimeout(timer);
    $('main').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    setStatus(message ? 'token refused' : 'no token', !!message);
    document.body.dataset.state = 'login';
  }

  /* ---- the API ---------------------------------------------------------- */

  async function api(path) {
    const r = await fetch(path, {
      headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
      cache: 'no-store',
    });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    if (r.status === 401) {
      throw new AuthError((body && body.error) || 'the token was refused');
    }
    if (!r.ok) {
      let why = (body && body.error) || 'HTTP ' + r.status;
      if (r.status === 403) {
        why = 'this token\'s role may not read ' + path.split('?')[0];
      } else if (r.status === 429) {
        why = 'rate limited; retrying at the next refresh';
      }
      return { ok: false, status: r.status, error: why };
    }
    return { ok: true, status: r.status, body: body };
  }

  /* ---- formatting ------------------------------------------------------- */

  function num(v) {
    if (v === null || v === undefined) {
      return '–';
    }
    const n = Number(v);
    return Number.isInteger(n) ? n.toLocaleString('en-US') : String(Number(n.toFixed(2)));
  }

  function money(cents) {
    if (cents === null || cents === undefined) {
      return '–';
    }
    return '$' + (Number(cents) / 100).toLocaleString('en-US',
      { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }

  function clock(ms) {
    return new Date(Number(ms)).toISOString().slice(11, 19);
  }

  function when(ms) {
    const d = new Date(Number(ms)).toISOString();
    return d.slice(5, 10) + ' ' + d.slice(11, 19);
  }

  /* A figure: the raw value in data-value, the formatted one as text. */
  function figure(id, value, text, title) {
    const el = $(id);
    el.dataset.value = value === null || value === undefined ? '' : String(value);
    el.textContent = text;
    el.title = title || '';
  }

  function setStatus(text, isError) {
    const el = $('status');
    el.textContent = text;
    el.classList.toggle('error', !!isError);
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      e.setAttribute(k, attrs[k]);
    }
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  }

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs || {}) {
      e.setAttribute(k, attrs[k]);
    }
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  }

  /* ---- charts ----------------------------------------------------------- */

  /* 0, then a round step so that about four gridlines fit under max. */
  function niceMax(max) {
    if (!(max > 0)) {
      return { top: 1, step: 0.25 };
    }
    const raw = max / 4;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    return { top: Math.ceil(max / step) * step, step: step };
  }

  /*
   * A line chart of points (the /v1/timeseries points) into svg: series
   * [{key, cls, area}], each point drawn at the middle of its step (it is
   * the step's average).  Hovering a step shows its figures.
   */
  function lineChart(svg, points, series, opts) {
    const box = svg.getBoundingClientRect();
    const W = Math.max(300, Math.round(box.width));
    const H = Math.max(120, Math.round(box.height));
    const m = { l: 44, r: 12, t: 10, b: 22 };
    svg.replaceChildren();
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    const usable = points.filter((p) => series.some((s) => p[s.key] !== null));
    if (usable.length === 0) {
      svg.appendChild(svgEl('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' },
        opts.empty || 'no data in this window'));
      return;
    }
    const x0 = Number(points[0].start_ms);
    const x1 = Number(points[points.length - 1].end_ms);
    let max = opts.max || 0;
    if (!opts.max) {
      for (const p of points.concat(opts.now ? [opts.now] : [])) {
        for (const s of series) {
          max = Math.max(max, Number(p[s.key] || 0));
        }
      }
    }
    const y = niceMax(max);
    const sx = (t) => m.l + (W - m.l - m.r) * (t - x0) / Math.max(1, x1 - x0);
    const sy = (v) => H - m.b - (H - m.t - m.b) * v / y.top;

    for (let v = 0; v <= y.top + 1e-9; v += y.step) {
      svg.appendChild(svgEl('line', { x1: m.l, x2: W - m.r, y1: sy(v), y2: sy(v), class: 'grid' }));
      svg.appendChild(svgEl('text', { x: m.l - 6, y: sy(v) + 4, 'text-anchor': 'end' },
        num(v) + (opts.unit || '')));
    }
    /* As many time labels as fit, about 90 px apart. */
    const ticks = Math.max(1, Math.min(6, Math.floor((W - m.l - m.r) / 90)));
    for (let i = 0; i <= ticks; i++) {
      const t = x0 + (x1 - x0) * i / ticks;
      svg.appendChild(svgEl('text', {
        x: sx(t), y: H - 6, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle',
      }, clock(t)));
    }
    for (const s of series) {
      const pts = points.filter((p) => p[s.key] !== null)
        .map((p) => [sx((Number(p.start_ms) + Number(p.end_ms)) / 2), sy(Number(p[s.key]))]);
      if (pts.length === 0) {
        continue;
      }
      const d = pts.map((q, i) => (i ? 'L' : 'M') + q[0].toFixed(1) + ' ' + q[1].toFixed(1)).join(' ');
      if (s.area) {
        svg.appendChild(svgEl('path', {
          d: d + ' L' + pts[pts.length - 1][0].toFixed(1) + ' ' + sy(0) + ' L' + pts[0][0].toFixed(1) +
            ' ' + sy(0) + ' Z',
          class: s.cls + '-area',
        }));
      }
      svg.appendChild(svgEl('path', { d: d, class: 'line ' + s.cls }));
    }
    /* The figures of this instant at the right edge: the last step is
     * an average over a step not yet over, the dot is where it is going. */
    if (opts.now) {
      for (const s of series) {
        if (opts.now[s.key] !== undefined && opts.now[s.key] !== null) {
          const dot = svgEl('circle', { cx: sx(x1), cy: sy(Number(opts.now[s.key])), r: 3.5,
            class: 'now ' + s.cls });
          dot.appendChild(svgEl('title', {}, 'now: ' + s.label + ' ' + num(opts.now[s.key])));
          svg.appendChild(dot);
        }
      }
    }
    /* One transparent column per step, titled with its figures. */
    for (const p of points) {
      const a = sx(Number(p.start_ms));
      const b = sx(Number(p.end_ms));
      const r = svgEl('rect', { x: a, y: m.t, width: Math.max(1, b - a), height: H - m.t - m.b,
        fill: 'transparent' });
      r.appendChild(svgEl('title', {}, clock(p.start_ms) + '–' + clock(p.end_ms) + ' UTC: ' +
        series.map((s) => s.label + ' ' + num(p[s.key]) + (opts.unit || '')).join(', ')));
      svg.appendChild(r);
    }
  }

  /* ---- sections --------------------------------------------------------- */

  function renderTimeseries(r) {
    if (!r.ok) {
      $('chart-gpus-note').textContent = r.error;
      return;
    }
    const ts = r.body;
    const now = ts.now;
    figure('gpus-provisioned', now.gpus_provisioned, num(now.gpus_provisioned));
    figure('gpus-allocated', now.gpus_allocated, num(now.gpus_allocated));
    figure('gpus-idle', now.gpus_idle, num(now.gpus_idle));
    const prov = Number(now.gpus_provisioned);
    figure('gpus-util', prov > 0 ? (100 * Number(now.gpus_allocated) / prov).toFixed(1) : null,
      prov > 0 ? (100 * Number(now.gpus_allocated) / prov).toFixed(1) + ' %' : '–',
      'GPUs held by running jobs / GPUs on billed nodes, now');
    figure('jobs-queued', now.queued_jobs, num(now.queued_jobs));
    figure('jobs-running', now.running_jobs, num(now.running_jobs));

    lineChart($('chart-gpus'), ts.points, [
      { key: 'gpus_provisioned', cls: 'prov', label: 'provisioned' },
      { key: 'gpus_allocated', cls: 'alloc', label: 'allocated', area: true },
      { key: 'gpus_idle', cls: 'idle', label: 'idle' },
    ], { empty: 'no GPUs in this window', now: now });
    let idleGpuS = 0;
    let provGpuS = 0;
    for (const p of ts.points) {
      const secs = (Number(p.end_ms) - Number(p.start_ms)) / 1000;
      idleGpuS += Number(p.gpus_idle) * secs;
      provGpuS += Number(p.gpus_provisioned) * secs;
    }
    $('chart-gpus-note').textContent = provGpuS > 0
      ? 'Averages per ' + ts.step_s + ' s step. Idle in this window: ' +
        num(idleGpuS / 3600) + ' GPU-hours of ' + num(provGpuS / 3600) + ' provisioned (' +
        (100 * idleGpuS / provGpuS).toFixed(1) + ' %).'
      : 'Averages per ' + ts.step_s + ' s step.';
    lineChart($('chart-queue'), ts.points, [
      { key: 'queued_jobs', cls: 'queue', label: 'queued' },
      { key: 'running_jobs', cls: 'run', label: 'running' },
    ], { empty: 'no jobs in this window', now: now });
    const hasUtil = ts.points.some((p) => p.util_percent !== null);
    lineChart($('chart-util'), ts.points, [
      { key: 'util_percent', cls: 'util', label: 'utilisation' },
    ], { max: 100, unit: '%', empty: 'no GPU samples from node agents in this window' });
    $('chart-util-note').textContent = hasUtil
      ? 'Average of the utilisation samples node agents reported (heartbeats).' : '';
  }

  function renderSpend(r) {
    if (!r.ok) {
      for (const id of ['spend-total', 'spend-idle', 'spend-projected']) {
        figure(id, null, '–', r.error);
      }
      return null;
    }
    const s = r.body;
    figure('spend-total', s.total_cents, money(s.total_cents), 'period ' + s.period);
    const hidden = 'not shown to an engineer token (fleet-wide figure)';
    figure('spend-idle', s.idle_cents, money(s.idle_cents), s.idle_cents === null ? hidden : '');
    figure('spend-projected', s.projected_cents, money(s.projected_cents),
      s.projected_cents === null ? hidden : 'spend so far + the current hourly rate to month end');
    return s;
  }

  /* One bar: spent against cap, the warning threshold marked. */
  function budgetRow(label, scope, spent, cap, warnPercent, hard) {
    const row = el('div', { class: 'bar-row', 'data-scope': scope, 'data-spent-cents': String(spent),
      'data-cap-cents': cap === null ? '' : String(cap) });
    row.appendChild(el('span', { class: 'team', title: scope }, label));
    const svg = svgEl('svg', { viewBox: '0 0 100 18', preserveAspectRatio: 'none' });
    svg.appendChild(svgEl('rect', { x: 0, y: 2, width: 100, height: 14, class: 'track' }));
    if (cap !== null) {
      const frac = cap > 0 ? spent / cap : (spent > 0 ? 1 : 0);
      svg.appendChild(svgEl('rect', { x: 0, y: 2, width: Math.min(100, 100 * frac), height: 14,
        class: 'spent' }));
      svg.appendChild(svgEl('line', { x1: warnPercent, x2: warnPercent, y1: 0, y2: 18,
        class: 'warnmark' }));
      if (frac >= 1) {
        row.classList.add('over');
      } else if (100 * frac >= warnPercent) {
        row.classList.add('warned');
      }
    }
    row.appendChild(svg);
    row.appendChild(el('span', { class: 'figs' }, cap === null
      ? money(spent) + ' · no cap'
      : money(spent) + ' / ' + money(cap) + (hard ? ' hard' : ' soft')));
    return row;
  }

  function renderBudgets(r, spend) {
    const box = $('budgets');
    box.replaceChildren();
    if (!r.ok) {
      $('budgets-note').textContent = r.error;
      return;
    }
    const capped = new Set();
    for (const b of r.body.items) {
      const scope = b.scope_kind + ':' + b.scope;
      capped.add(scope);
      box.appendChild(budgetRow((b.scope_kind === 'org' ? 'org ' : '') + b.scope, scope,
        Number(b.spent_cents), Number(b.cap_cents), Number(b.warn_percent), b.hard));
    }
    /* Teams that spend with no cap set, so no spend is out of sight. */
    for (const t of (spend && spend.teams) || []) {
      if (!capped.has('team:' + t.team)) {
        box.appendChild(budgetRow(t.team, 'team:' + t.team, Number(t.cents), null, 0, false));
      }
    }
    $('budgets-note').textContent = box.children.length === 0
      ? 'No budgets and no spend this month.'
      : 'Team bars: the team\'s job spend; org bars: all spend, idle included. Marker: warning threshold.';
  }

  function renderPools(r) {
    const body = $('pools').tBodies[0];
    body.replaceChildren();
    if (!r.ok) {
      body.appendChild(el('tr')).appendChild(el('td', { colspan: '4' }, r.error));
      return;
    }
    for (const p of r.body.items) {
      const tr = el('tr', { 'data-pool': p.name });
      tr.appendChild(el('td', {}, p.name));
      tr.appendChild(el('td', {}, p.gpus_per_node + ' × ' + p.gpu_model));
      tr.appendChild(el('td', {}, p.capacity_type));
      tr.appendChild(el('td', { class: 'num', 'data-value': String(p.live_nodes) },
        p.live_nodes + ' / ' + p.max_nodes));
      body.appendChild(tr);
    }
  }

  /* Running jobs of more than one node: every node of the gang with its
   * rank (the API's members), so a gang is never shown as one node. */
  function renderGangs(r) {
    const body = $('gangs').tBodies[0];
    body.replaceChildren();
    if (!r.ok) {
      body.appendChild(el('tr')).appendChild(el('td', { colspan: '3' }, r.error));
      return;
    }
    const gangs = r.body.items.filter((j) => j.nodes > 1);
    for (const j of gangs) {
      const tr = el('tr', { 'data-job': String(j.id) });
      tr.appendChild(el('td', {}, String(j.id)));
      tr.appendChild(el('td', {}, j.team));
      tr.appendChild(el('td', { 'data-value': (j.members || []).map((m) => m.rank + ':' + m.node_id).join(',') },
        (j.members || []).map((m) => 'rank ' + m.rank + ' node ' + m.node_id +
          (m.started_ms == null ? ' (waiting)' : '')).join(' · ')));
      body.appendChild(tr);
    }
    if (gangs.length === 0) {
      body.appendChild(el('tr')).appendChild(el('td', { colspan: '3' }, 'No multi-node job runs.'));
    }
  }

  function renderDecisions(r) {
    const body = $('decisions').tBodies[0];
    body.replaceChildren();
    if (!r.ok) {
      body.appendChild(el('tr')).appendChild(el('td', { colspan: '4' }, r.error));
      return;
    }
    for (const d of r.body.items) {
      const tr = el('tr', { 'data-id': String(d.id) });
      tr.appendChild(el('td', {}, when(d.at_ms)));
      tr.appendChild(el('td', {}, d.kind));
      tr.appendChild(el('td', {}, d.subject_kind + ' ' + d.subject_id));
      tr.appendChild(el('td', {}, d.reason));
      body.appendChild(tr);
    }
    if (r.body.items.length === 0) {
      body.appendChild(el('tr')).appendChild(el('td', { colspan: '4' }, 'No decisions yet.'));
    }
  }

  /* ---- the refresh ------------------------------------------------------ */

  async function refresh() {
    clearTimeout(timer);
    const step = WINDOWS[$('window').value] || 60;
    try {
      const [ts, spend, budgets, pools, decisions, gangs] = await Promise.all([
        api('/v1/timeseries?step_s=' + step),
        api('/v1/spend'),
        api('/v1/budgets'),
        api('/v1/pools?limit=100'),
        api('/v1/decisions?limit=' + DECISIONS_SHOWN),
        api('/v1/jobs?state=running&limit=100'),
      ]);
      $('login').hidden = true;
      $('main').hidden = false;
      renderTimeseries(ts);
      const s = renderSpend(spend);
      renderBudgets(budgets, s);
      renderPools(pools);
      renderDecisions(decisions);
      renderGangs(gangs);
      const failed = [ts, spend, budgets, pools, decisions, gangs].filter((x) => !x.ok);
      const at = ts.ok ? ' (controller clock ' + clock(ts.body.now_ms) + ' UTC)' : '';
      setStatus(failed.length ? failed.length + ' of 6 reads failed: ' + failed[0].error
        : 'updated ' + new Date().toLocaleTimeString() + at, failed.length > 0);
      $('updated').textContent = 'Refreshes every ' + REFRESH_MS / 1000 + ' s. Times in UTC.';
      document.body.dataset.state = failed.length ? 'partial' : 'ready';
    } catch (e) {
      if (e instanceof AuthError) {
        sessionStorage.removeItem(TOKEN_KEY);
        token = null;
        showLogin(e.message);
        return;
      }
      setStatus('could not reach the server: ' + e.message, true);
      document.body.dataset.state = 'error';
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function start() {
    svgNS = $('chart-gpus').namespaceURI;
    token = takeToken();
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      $('token-input').value = '';
      if (t) {
        sessionStorage.setItem(TOKEN_KEY, t);
        token = t;
        refresh();
      }
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      token = null;
      showLogin('');
    });
    $('window').addEventListener('change', () => {
      if (token) {
        refresh();
      }
    });
    if (token) {
      refresh();
    } else {
      showLogin('');
    }
  }

  document.addEventListener('DOMContentLoaded', start);
}());
