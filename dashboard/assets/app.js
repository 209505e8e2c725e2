// fencedq dashboard. Plain JavaScript, no dependencies, no build step.
//
// Every value that comes from the API (job ids, args, error texts, notes)
// enters the page through textContent or a text attribute, never as markup,
// with the characters that would reorder or hide it shown as \u escapes.
// Every URL is relative, so the dashboard works under any path prefix.
'use strict';

(() => {
  const main = document.getElementById('main');
  const bannerEl = document.getElementById('banner');
  const sessionEl = document.getElementById('session');
  const states = ['waiting', 'pending', 'running', 'uncertain', 'review', 'succeeded', 'dead', 'cancelled'];
  const decisionLabels = { succeeded: 'Mark succeeded', rerun: 'Re-run', dead: 'Mark dead' };
  let session = { actions_enabled: false, authenticated: false, basic_auth: false };
  let csrfToken = null;
  let timer = null;
  let ticker = null; // a page's per-second countdown
  let seq = 0; // bumps on every navigation; stale responses are dropped

  // ---- DOM helpers -------------------------------------------------------

  // safeHref allows only in-page routes and the dashboard's own endpoints.
  function safeHref(h) {
    return typeof h === 'string' && (h.startsWith('#/') || h === 'api/login') ? h : '#/';
  }

  // shown makes visible the characters that would reorder or hide what a
  // value shows, as the command line prints them: format characters
  // (bidirectional formatting, zero-width space and joiners, word joiner,
  // byte order mark, soft hyphen, tag characters), line separators and
  // control characters other than line feed and tab (C0, DEL, C1) become
  // \u escapes (\U and eight digits above U+FFFF), so a job id, a note or
  // an error text cannot make itself, or the text beside it, read
  // otherwise, nor pass for another by an invisible character.
  const hidden = /(?![\t\n])[\p{Cc}\p{Cf}\u2028\u2029]/gu;
  const shown = (s) => String(s).replace(hidden, (c) => {
    const n = c.codePointAt(0);
    return n > 0xffff ? '\\U' + n.toString(16).padStart(8, '0') : '\\u' + n.toString(16).padStart(4, '0');
  });
  const text = (c) => (c instanceof Node ? c : document.createTextNode(shown(c)));

  // el builds an element. Attribute values are set as text (a title as
  // shown); children that are not nodes become text nodes, as shown.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'href') e.setAttribute('href', safeHref(v));
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, k === 'title' ? shown(v) : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(text(c));
    }
    return e;
  }

  const enc = encodeURIComponent;
  const jobHref = (queue, id) => '#/job/' + enc(queue) + '/' + enc(id);
  const jobLink = (queue, id) => el('a', { href: jobHref(queue, id), class: 'mono', 'data-job': id }, id);

  function fmtTime(s) {
    if (!s) return '—';
    const d = new Date(s);
    if (isNaN(d.getTime()) || d.getTime() <= 0) return '—';
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }

  function fmtDuration(ms) {
    const a = Math.abs(ms);
    if (a < 1000) return a + 'ms';
    if (a < 60000) return (a / 1000).toFixed(1) + 's';
    // Minutes to the nearest second, hours to the nearest minute: a
    // measured 599 999 ms reads 10m0s, not 9m59s.
    if (a < 3600000 - 500) { const s = Math.round(a / 1000); return Math.floor(s / 60) + 'm' + (s % 60) + 's'; }
    const m = Math.round(a / 60000);
    return Math.floor(m / 60) + 'h' + (m % 60) + 'm';
  }

  // clockSkew is the namespace's time minus this browser's clock, from the
  // latest answer naming it (server_time): every time shown is on the
  // namespace's time, so ages and countdowns are measured on it (nowMs),
  // whatever the clocks of the browser and the dashboard's host say.
  let clockSkew = 0;
  const nowMs = () => Date.now() + clockSkew;

  function ago(s) {
    if (!s) return '';
    const t = new Date(s).getTime();
    if (isNaN(t) || t <= 0) return '';
    return fmtDuration(Math.max(0, nowMs() - t)) + ' ago';
  }

  function fmtRate(v) {
    if (v === null || v === undefined) return '—';
    return v >= 10 ? v.toFixed(0) + '/s' : v.toFixed(2) + '/s';
  }

  // A workflow step whose job record went missing ("lost") ended dead.
  const badge = (state) => el('span', { class: 'badge state-' + (states.includes(state) ? state : state === 'lost' ? 'dead' : 'other') }, state);

  function table(headers, rows, attrs) {
    return el('table', attrs || {},
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
      el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: headers.length, class: 'muted' }, 'none'))));
  }

  function dl(pairs) {
    return el('dl', {}, pairs.filter((p) => p && p[1] !== undefined && p[1] !== null && p[1] !== '')
      .map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  // unreachable collects the names a read of the page being rendered
  // (since seq last moved) could not read: its answers flagged partial
  // (a Redis Cluster master down); show puts them in a banner.
  let unreachable = { seq: -1, names: new Set() };
  function noteUnreachable(at, names) {
    if (at !== seq) return;
    if (unreachable.seq !== at) unreachable = { seq: at, names: new Set() };
    (names || []).forEach((n) => unreachable.names.add(n));
  }

  function show(view, ...nodes) {
    const lost = unreachable.seq === seq ? [...unreachable.names] : [];
    const partialNode = lost.length ? el('p', { class: 'warn', id: 'partial', role: 'alert' },
      el('strong', {}, 'Part of the ledger could not be read'),
      ' (a Redis master down?); shown without: ', lost.map((n, i) => [i ? ', ' : '', el('span', { class: 'mono' }, n)]),
      '. Counts, lists and charts leave them out; the error is in the server log.') : null;
    main.replaceChildren(...[partialNode, ...nodes].filter((n) => n !== null && n !== undefined && n !== false && n !== ''));
    main.dataset.view = view;
    main.dataset.ready = '1';
  }

  // showError shows what a page could not read; retry says the page tries
  // again by itself.
  function showError(err, retry) {
    const box = el('p', { class: 'error', role: 'alert', 'data-retry': retry ? '1' : null },
      'Error: ' + (err && err.message ? err.message : String(err)), retry ? ' (trying again)' : '');
    main.replaceChildren(box);
    main.dataset.ready = '1';
  }

  // ---- charts ------------------------------------------------------------

  // Charts are SVG elements built here (no library, nothing inline that the
  // CSP would have to allow); colours come from style.css classes.
  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(text(c));
    }
    return e;
  }

  // tickLabel is a time on a chart's axis: the date too when the chart
  // spans more than an hour.
  const tickLabel = (ms, span) => new Date(ms).toISOString().slice(span > 3600000 ? 5 : 11, 16).replace('T', ' ') + 'Z';

  // chart draws points[field] as one bar per step over [startMs, endMs].
  // A counter ('count') is totalled over the window; a state count
  // ('gauge') shows its latest value. The peak is the highest bar (0 with
  // none); the axis only starts at 1 so that an empty chart still draws.
  function chart(name, title, points, field, startMs, endMs, stepMs, kind, now) {
    const W = 600, H = 150, L = 44, R = 8, T = 10, B = 22;
    const vals = points.map((p) => ({ t: new Date(p.at).getTime(), v: Number(p[field]) || 0 }))
      .filter((p) => p.t >= startMs - stepMs && p.t <= endMs);
    const peak = Math.max(0, ...vals.map((p) => p.v));
    const maxV = Math.max(1, peak);
    const x = (t) => L + (W - L - R) * (t - startMs) / (endMs - startMs);
    const y = (v) => T + (H - T - B) * (1 - v / maxV);
    const bw = Math.max(1, (W - L - R) * stepMs / (endMs - startMs) - 0.5);
    const total = vals.reduce((a, p) => a + p.v, 0);
    const last = vals.length ? vals[vals.length - 1].v : 0;
    const bars = vals.filter((p) => p.v > 0).map((p) => svg('rect', {
      x: Math.max(L, x(p.t)).toFixed(1), y: y(p.v).toFixed(1), width: bw.toFixed(1), height: (H - B - y(p.v)).toFixed(1),
      class: 'bar bar-' + kind,
    }, svg('title', {}, fmtTime(p.at) + ': ' + p.v)));
    const g = svg('svg', { viewBox: '0 0 ' + W + ' ' + H, class: 'chart-svg', role: 'img', 'aria-label': title },
      svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }),
      svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }),
      svg('text', { x: L - 4, y: T + 8, class: 'tick', 'text-anchor': 'end' }, String(maxV)),
      svg('text', { x: L - 4, y: H - B, class: 'tick', 'text-anchor': 'end' }, '0'),
      svg('text', { x: L, y: H - 6, class: 'tick' }, tickLabel(startMs, endMs - startMs)),
      svg('text', { x: W - R, y: H - 6, class: 'tick', 'text-anchor': 'end' }, tickLabel(endMs, endMs - startMs)),
      bars);
    const per = ' a ' + (stepMs >= 3600000 ? fmtDuration(stepMs) : (stepMs / 60000) + ' min');
    const summary = kind === 'count' ? total + ' in the window' + (peak ? ', peak ' + peak + per : '') + (now !== undefined ? '; now ' + now : '')
      : 'now ' + last + ', peak ' + peak;
    return el('figure', { class: 'chart', id: 'chart-' + name, 'data-total': String(total), 'data-bars': String(bars.length), 'data-peak': String(peak) },
      el('figcaption', {}, el('strong', {}, title), ' ', el('span', { class: 'muted' }, summary)), g);
  }

  const chartDefs = [
    ['throughput', 'Succeeded', 'succeeded', 'count'],
    ['failures', 'Failed attempts (dead or retried)', 'failed', 'count'],
    ['fenced', 'Fenced rejections', 'fenced', 'count'],
    ['deduplicated', 'Deduplications', 'deduplicated', 'count'],
    ['uncertain', 'Became uncertain', 'uncertain_started', 'count', 'uncertain'],
    ['review', 'Sent to review', 'review_started', 'count', 'review'],
  ];

  function charts(data, which) {
    const end = new Date(data.server_time).getTime();
    const span = data.window === '24h' ? 86400000 : 3600000;
    const step = data.step_seconds * 1000;
    const defs = chartDefs.filter((d) => !which || which.includes(d[0]));
    if (!data.points.length) {
      return el('p', { class: 'muted', id: 'no-history' }, 'Nothing counted in this window yet.');
    }
    const now = data.now || {};
    return el('div', { class: 'charts' }, defs.map(([name, title, field, kind, state]) =>
      chart(name, title, data.points, field, end - span, end, step, kind, state ? (now[state] || 0) : undefined)));
  }

  // ---- actions -----------------------------------------------------------

  // actionBlocker explains why actions are not offered, or returns null.
  function actionBlocker(what) {
    if (!session.actions_enabled) return el('p', { class: 'muted' }, 'Read-only: configure credentials to ' + what + '.');
    if (!session.authenticated) {
      return el('p', {}, session.basic_auth ? el('a', { href: 'api/login' }, 'Sign in') : 'Authenticate', ' to ' + what + '.');
    }
    return null;
  }
  const canAct = () => session.actions_enabled && session.authenticated;

  // actionButton opens an inline confirmation (a question, a note, Confirm
  // and Back). o.prepare (optional) returns {question, data} first; o.run
  // (note, data) does the action and returns the message shown.
  function actionButton(o) {
    const box = el('span', { class: 'action', 'data-action': o.name, 'data-target': o.target || '' });
    const status = el('span', { class: 'status', role: 'status' });
    const open = el('button', { type: 'button', class: 'act act-' + o.name }, o.label);
    open.addEventListener('click', async () => {
      let prep = { question: o.question, data: null };
      if (o.prepare) {
        open.disabled = true;
        status.textContent = 'Counting…';
        try { prep = await o.prepare(); } catch (err) { status.textContent = shown('Failed: ' + err.message); open.disabled = false; return; }
        open.disabled = false;
        status.textContent = '';
        if (!prep) return;
      }
      const note = el('input', { type: 'text', maxlength: '2000', class: 'note', 'aria-label': 'note',
        placeholder: o.noteRequired ? 'why (required; recorded with the action)' : 'why (recorded with the action)' });
      const ok = el('button', { type: 'button', class: 'confirm' }, 'Confirm');
      const back = el('button', { type: 'button', class: 'back' }, 'Back');
      back.addEventListener('click', () => { status.textContent = ''; box.replaceChildren(open, status); });
      ok.addEventListener('click', async () => {
        if (o.noteRequired && !note.value.trim()) { status.textContent = 'Say why in the note.'; note.focus(); return; }
        ok.disabled = true; back.disabled = true; note.disabled = true;
        status.textContent = 'Working…';
        const my = seq;
        try {
          status.textContent = shown(await o.run(note.value.trim(), prep.data));
          box.dataset.done = '1';
          rerender(800, my);
        } catch (err) {
          status.textContent = shown('Failed: ' + err.message);
          ok.disabled = false; back.disabled = false; note.disabled = false;
        }
      });
      box.replaceChildren(el('span', { class: 'confirm-box', role: 'group' }, el('span', { class: 'question' }, prep.question), note, ok, back), status);
      note.focus();
    });
    box.append(open, status);
    return box;
  }

  function pauseButton(q) {
    const paused = !!q.paused;
    return actionButton({
      name: paused ? 'resume' : 'pause', target: q.name, label: paused ? 'Resume' : 'Pause', noteRequired: !paused,
      question: paused ? 'Resume queue ' + q.name + '? Pools start its jobs again.'
        : 'Pause queue ' + q.name + '? No new attempts start; running ones finish; enqueues are accepted.',
      run: async (note) => {
        // a resume names the pause the page showed: a queue paused again since stays paused
        const body = paused ? { note, pause_id: q.paused.id || '' } : { note };
        const res = await post('api/queues/' + enc(q.name) + '/' + (paused ? 'resume' : 'pause'), body);
        if (res.unread) return 'Done; the queue\'s state could not be read back.';
        if (!res.changed && res.paused) {
          // another operator's pause stands: this action recorded nothing
          return 'Queue ' + q.name + ' was already paused by ' + res.paused.actor +
            (res.paused.note ? ' ("' + res.paused.note + '")' : '') + '; your note was not recorded.';
        }
        if (!res.changed) return 'Queue ' + q.name + ' was already running; nothing was recorded.';
        return 'Queue ' + q.name + (res.paused ? ' is paused.' : ' is running.');
      },
    });
  }

  // ---- API ---------------------------------------------------------------

  // exactNumber keeps a number a float64 cannot hold as it was sent (an id
  // beyond 2^53 in args or an output, a decimal with more digits): its
  // source text, which JSON.stringify writes back unchanged (JSON.rawJSON),
  // so a page never shows such a number rounded. The server's own numbers
  // (counts, times, rates) are float64s and stay numbers.
  function exactNumber(key, value, context) {
    if (typeof value !== 'number' || !context || typeof context.source !== 'string' || typeof JSON.rawJSON !== 'function') return value;
    const src = context.source;
    return src === String(value) || src === '-0' ? value : JSON.rawJSON(src);
  }

  async function api(path, opts) {
    const o = opts || {};
    const at = seq;
    let res;
    try {
      res = await fetch(path, {
        method: o.method || 'GET',
        credentials: 'same-origin',
        cache: 'no-store',
        headers: Object.assign({ Accept: 'application/json' }, o.headers || {}),
        body: o.body,
      });
    } catch (err) {
      err.status = 0; // no answer: the dashboard unreachable
      throw err;
    }
    let data = null;
    try { data = JSON.parse(await res.text(), exactNumber); } catch (_) { data = null; }
    if (!res.ok) {
      const err = new Error((data && data.error) || ('HTTP ' + res.status));
      err.status = res.status;
      err.code = data && data.code;
      throw err;
    }
    if (data && data.partial) noteUnreachable(at, data.unreachable);
    const st = data && typeof data.server_time === 'string' ? new Date(data.server_time).getTime() : NaN;
    if (!isNaN(st) && st > 0) clockSkew = st - Date.now();
    return data;
  }

  // post sends an action with the CSRF token, fetching a new token once if
  // the server refused it.
  async function post(path, body) {
    for (let i = 0; i < 2; i++) {
      if (!csrfToken) csrfToken = (await api('api/csrf')).token;
      try {
        return await api(path, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken },
          body: JSON.stringify(body),
        });
      } catch (err) {
        if (err.code === 'csrf' && i === 0) { csrfToken = null; continue; }
        // No answer from the dashboard itself (the network, or a proxy's
        // 502/504 page): it may have acted all the same.
        if (err.status === 0 || (err.status >= 500 && !err.code)) {
          err.message = 'no answer from the dashboard (' + (err.status ? 'HTTP ' + err.status : err.message) +
            '): the action may have been done; look at the job or queue before acting again';
        }
        throw err;
      }
    }
    throw new Error('CSRF token refused');
  }

  const jobPath = (queue, id) => 'api/jobs/' + enc(queue) + '/' + enc(id);
  // resolve sends a decision with the state, token and run count the page
  // showed (as do cancel and run-now): the server refuses it (409) when the
  // job moved on since, so a decision about one attempt never lands on a
  // newer one, nor on a job another operator re-ran since.
  const resolve = (job, decision, note) => post(jobPath(job.queue, job.id) + '/resolve',
    { decision, note, state: job.state, token: job.token || '', runs: job.runs || 0 });

  // loadBanner shows, above every page, the ledger rewinds (losses of
  // acknowledged writes after a Redis failover) detected in the last day,
  // and the live pools missing Redis replicas their durability requires.
  async function loadBanner() {
    let data;
    try { data = await api('api/rewinds'); } catch (_) { return; }
    const rs = data.rewinds || [];
    const reps = data.replicas || [];
    if (!rs.length && !reps.length) { bannerEl.hidden = true; bannerEl.replaceChildren(); return; }
    const replicaLines = reps.map((p) => el('p', { class: 'replicas', 'data-pool': p.pool },
      el('strong', {}, 'Too few Redis replicas'), ': pool ', el('strong', { class: 'mono' }, p.pool), ' has ' + p.missing +
      ' fewer replica' + (p.missing === 1 ? '' : 's') + ' connected than its Durability.Replicas (' + p.required +
      ') requires: its durable claims, completions and enqueues fail until enough connect.'));
    if (!rs.length) { bannerEl.replaceChildren(...replicaLines); bannerEl.hidden = false; return; }
    bannerEl.replaceChildren(
      ...replicaLines,
      el('p', {}, el('strong', {}, 'Redis lost acknowledged writes'),
        ' (a failover to a lagging replica, or a restart from older data) — detected in the last ' + data.window_hours + ' hours:'),
      ...rs.map((r) => el('p', { class: 'rewind', 'data-queue': r.queue },
        'Queue ', el('strong', { class: 'mono' }, r.queue), ': the ledger went back from write ' + r.known + ' to ' + r.found +
        ' (at least ' + r.lost_writes + ' writes, ' + r.lost_enqueues + ' enqueued jobs lost' +
        (r.lost_recorded ? '; ' + r.lost_recorded + ' of them in a client\'s record' : '') +
        (r.resubmitted ? '; ' + r.resubmitted + ' re-submitted' : '') + '), found by ' + r.detected_by +
        (r.detections > 1 ? ' and ' + (r.detections - 1) + ' more' : '') + ' ' + ago(r.last_at) +
        '. Jobs the lost writes had claimed or finished run again or are reconciled; lost enqueues come back only when a client re-submits its record (Client.Resubmit).')));
    bannerEl.hidden = false;
  }

  // fmtOffset is a clock offset in ms, signed.
  const fmtOffset = (ms) => { const r = Math.round(ms); return (r >= 0 ? '+' : '−') + fmtDuration(Math.abs(r)); };

  async function loadSession() {
    try {
      session = await api('api/session');
    } catch (_) {
      session = { actions_enabled: false, authenticated: false, basic_auth: false };
    }
    let node;
    if (!session.actions_enabled) node = el('span', { class: 'muted' }, 'read-only');
    else if (session.authenticated) node = el('span', {}, 'signed in as ', el('strong', {}, session.actor || ''));
    else if (session.basic_auth) node = el('a', { href: 'api/login' }, 'Sign in to act');
    else node = el('span', { class: 'muted' }, 'actions need a token');
    sessionEl.replaceChildren(node);
  }

  // resolveForm offers the decisions a job's state allows.
  function resolveForm(job, decisions) {
    if (!decisions || !decisions.length) return null;
    if (!session.actions_enabled) {
      return el('p', { class: 'muted' }, 'Read-only: configure credentials to resolve jobs.');
    }
    if (!session.authenticated) {
      return el('p', {}, session.basic_auth ? el('a', { href: 'api/login' }, 'Sign in') : 'Authenticate', ' to resolve this job.');
    }
    const note = el('input', { type: 'text', maxlength: '2000', placeholder: 'why (recorded in the job history)', class: 'note', 'aria-label': 'note' });
    const status = el('span', { class: 'status', role: 'status' });
    const buttons = decisions.map((d) => el('button', {
      type: 'button', class: 'decide decide-' + d, 'data-decision': d, 'data-job': job.id,
      onclick: async () => {
        buttons.forEach((b) => { b.disabled = true; });
        status.textContent = 'Resolving…';
        const my = seq;
        try {
          const res = await resolve(job, d, note.value);
          status.textContent = 'Resolved: job is now ' + res.job.state + '.';
          rerender(300, my);
        } catch (err) {
          status.textContent = shown('Failed: ' + err.message);
          buttons.forEach((b) => { b.disabled = false; });
        }
      },
    }, decisionLabels[d] || d));
    return el('div', { class: 'resolve', 'data-resolve': job.id }, note, buttons, status);
  }

  // pair writes key=value for a list of pairs: a value holding white
  // space, "=", "," or a quote is quoted (as JSON), so an error text or a
  // header cannot read as more pairs ("boom  actor=operator:admin").
  const pair = (k, v) => k + '=' + (typeof v === 'string' && /[\s=,"]/.test(v) ? JSON.stringify(v) : String(v));

  function historyDetails(e) {
    const skip = new Set(['event', 'at']);
    return Object.entries(e).filter(([k, v]) => !skip.has(k) && v !== '' && v !== 0 && v !== null && v !== undefined)
      .map(([k, v]) => pair(k, v)).join('  ');
  }

  function historyTable(history) {
    return table(['Time', 'Event', 'Details'], (history || []).map((e) => el('tr', {},
      el('td', { class: 'nowrap' }, fmtTime(e.at)),
      el('td', {}, e.event),
      el('td', { class: 'details' }, historyDetails(e)))), { class: 'history' });
  }

  // ---- pages -------------------------------------------------------------

  const listHref = (params) => '#/jobs?' + new URLSearchParams(params).toString();

  async function overviewPage(my) {
    // the history may be unreadable while the overview shows what it can
    const [ov, hist] = await Promise.all([api('api/overview'), api('api/series?window=1h').catch(() => null)]);
    if (my !== seq) return;
    const rc = ov.maintenance || {};
    let leaderNode;
    const lastScan = rc.last_scan ? fmtTime(rc.last_scan) + ' (' + fmtDuration(rc.last_scan_age_ms || 0) + ' ago)' : 'never';
    if (rc.present) {
      const stale = rc.last_scan_age_ms === undefined || rc.last_scan_age_ms > 60000;
      leaderNode = el('p', { class: stale ? 'warn' : '', id: 'maintenance-leader' },
        'Maintenance leader ', el('strong', { class: 'mono' }, rc.leader),
        ' · last scan ', lastScan,
        ' · expired ', String(rc.expired), ', resolved ', String(rc.resolved),
        stale ? ' · no recent scan: is the leader healthy?' : '');
    } else {
      leaderNode = el('p', { class: 'warn', id: 'maintenance-leader' },
        'Maintenance: no leader. Expired leases are not detected and uncertain jobs are not reconciled.',
        rc.recorded_leader ? ' Last leader ' : '', rc.recorded_leader ? el('span', { class: 'mono' }, rc.recorded_leader) : '',
        rc.recorded_leader ? ', last scan ' + lastScan + '.' : '');
    }
    const rows = ov.queues.map((q) => {
      const tp = q.throughput;
      const fencedTitle = Object.entries(q.fenced || {}).map(([k, v]) => k + ' ' + v).join(', ');
      const dedupTitle = Object.entries(q.deduplications || {}).map(([k, v]) => k + ' ' + v).join(', ');
      const paused = q.paused ? el('span', {
        class: 'badge paused', 'data-paused': q.name,
        title: 'paused by ' + q.paused.actor + (q.paused.note ? ': ' + q.paused.note : '') + ' at ' + fmtTime(q.paused.at),
      }, 'paused') : '';
      const lost = (q.unreachable || []).length ? el('span', {
        class: 'badge unreachable', 'data-unreachable': q.name,
        title: 'not counted: ' + q.unreachable.join(', '),
      }, 'partly unreachable') : '';
      return el('tr', { 'data-queue': q.name },
        el('th', { scope: 'row', class: 'mono' }, q.name, paused ? ' ' : '', paused, lost ? ' ' : '', lost),
        states.map((s) => {
          const n = (q.counts || {})[s] || 0;
          const cls = 'count' + (n > 0 && (s === 'uncertain' || s === 'review' || s === 'dead') ? ' warn' : '');
          return el('td', { class: cls, 'data-queue': q.name, 'data-state': s },
            el('a', { href: listHref({ state: s, queue: q.name }) }, String(n)));
        }),
        el('td', { class: 'num', title: tp ? 'over the last ' + tp.window_seconds.toFixed(0) + 's' : 'measuring' },
          fmtRate(tp && tp.succeeded_per_sec)),
        el('td', { class: 'num' }, fmtRate(tp && tp.attempted_per_sec)),
        el('td', { class: 'num' + (q.fenced_rejections > 0 ? ' warn' : ''), title: fencedTitle },
          el('a', { href: '#/events/fenced' }, String(q.fenced_rejections))),
        el('td', { class: 'num', title: dedupTitle },
          el('a', { href: '#/events/deduplicated' }, String(q.deduplicated))),
        canAct() ? el('td', { class: 'actions' }, pauseButton(q)) : null);
    }).flatMap((row, i) => [row, ...partitionRows(ov.queues[i])]);
    // A partitioned queue's partitions, beneath its row: depth, rate, master.
    function partitionRows(q) {
      return (q.partitions || []).map((p) => el('tr', { class: 'partition', 'data-partition': p.name },
        el('td', { class: 'mono muted' }, (p.index >= 0 ? '\u00a0\u00a0#' + p.index + ' ' : '\u00a0\u00a0(draining) ') + p.name,
          p.paused ? ' (paused)' : ''),
        p.unreachable ? el('td', { class: 'warn unreachable', colspan: states.length + 2, 'data-unreachable': p.name },
          'unreachable: its Redis master does not answer') : states.map((s) => {
          const n = (p.counts || {})[s] || 0;
          return el('td', { class: 'count muted' }, el('a', { href: listHref({ state: s, queue: p.name }) }, String(n)));
        }),
        p.unreachable ? null : el('td', { class: 'num muted' }, fmtRate(p.throughput && p.throughput.succeeded_per_sec)),
        p.unreachable ? null : el('td', { class: 'num muted' }, fmtRate(p.throughput && p.throughput.attempted_per_sec)),
        el('td', { class: 'mono muted', colspan: canAct() ? 3 : 2, title: 'the Redis master holding this partition' }, p.master || ''))).concat(
        (q.layout_changes || []).map((c) => el('tr', { class: 'partition layout-change', 'data-layout-change': q.name },
          el('td', { class: 'muted', colspan: states.length + 5 + (canAct() ? 1 : 0) },
            '\u00a0\u00a0partitions ' + c.from + ' \u2192 ' + c.to + ' by ' + c.actor + ' at ' + fmtTime(c.at) + (c.note ? ': ' + c.note : '')))));
    }
    const totals = el('p', { class: 'totals' }, states.map((s) => [badge(s), ' ', String((ov.totals || {})[s] || 0), '  ']));
    const pausedQueues = ov.queues.filter((q) => q.paused);
    const pausedNode = pausedQueues.length ? el('p', { class: 'warn', id: 'paused' },
      'Paused (no new attempts start; running ones finish; enqueues are accepted): ',
      pausedQueues.map((q, i) => [i ? '; ' : '', el('strong', { class: 'mono' }, q.name),
        ' by ' + q.paused.actor + ' ' + ago(q.paused.at) + (q.paused.note ? ' (' + q.paused.note + ')' : '')])) : '';
    show('overview',
      el('h1', {}, 'Overview ', el('small', { class: 'muted' }, 'namespace ', ov.namespace, ' · Redis time ', fmtTime(ov.server_time))),
      leaderNode,
      pausedNode,
      totals,
      table(['Queue', ...states, 'succeeded/s', 'attempts/s', 'fenced', 'deduplicated', ...(canAct() ? ['Actions'] : [])], rows, { id: 'queues' }),
      el('p', { class: 'muted' }, 'Counts are the ledger\'s state indexes; rates are measured by this dashboard between refreshes; fenced and deduplicated are totals since the queue was created.'),
      el('h2', {}, 'Last hour ', el('small', {}, el('a', { href: '#/history' }, 'more history'))),
      hist ? charts(hist, ['throughput', 'failures', 'uncertain', 'review'])
        : el('p', { class: 'muted', id: 'no-history' }, 'The history could not be read.'));
    schedule(5000);
  }

  // indexLabel names the time a state's index sorts on.
  const indexLabel = { pending: 'Due', running: 'Lease deadline', uncertain: 'Next look' };
  const bulkActions = {
    waiting: [['cancel', 'Cancel all matching', 'Cancel']],
    pending: [['run_now', 'Run all matching now', 'Make due now'], ['cancel', 'Cancel all matching', 'Cancel']],
    running: [['cancel', 'Ask all matching to stop', 'Ask to stop']],
    dead: [['rerun', 'Re-run all matching', 'Re-run']],
    cancelled: [['rerun', 'Re-run all matching', 'Re-run']],
    review: [['rerun', 'Re-run all matching', 'Re-run']],
    uncertain: [['rerun', 'Re-run all matching', 'Re-run']],
  };
  const filterKeys = ['state', 'queue', 'kind', 'from', 'to', 'sort'];

  // isoToInput turns an RFC 3339 time into a datetime-local input value
  // in UTC, as every time on the pages is (inputToISO reads one back).
  function isoToInput(iso) {
    const d = new Date(iso);
    if (!iso || isNaN(d.getTime())) return '';
    return d.toISOString().slice(0, 19);
  }
  const inputToISO = (v) => new Date(v + 'Z').toISOString();

  function describeFilter(f) {
    return [f.state, f.queue ? 'in queue ' + f.queue : 'in every queue', f.kind ? 'of kind ' + f.kind : '',
      f.from ? 'from ' + fmtTime(f.from) : '', f.to ? 'to ' + fmtTime(f.to) : ''].filter(Boolean).join(' ');
  }

  async function jobsPage(my, params) {
    const f = {};
    for (const k of filterKeys) if (params.get(k)) f[k] = params.get(k);
    if (!states.includes(f.state)) f.state = 'pending';
    const offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
    const limit = 50;
    const query = new URLSearchParams(f).toString();
    const [data, ov] = await Promise.all([
      api('api/jobs?' + query + '&offset=' + offset + '&limit=' + limit),
      api('api/overview'),
    ]);
    if (my !== seq) return;
    const desc = data.sort === 'desc';

    // The filter form.
    const stateSel = el('select', { name: 'state', 'aria-label': 'state' }, states.map((s) => el('option', { value: s, selected: s === f.state ? 'selected' : null }, s)));
    // Every queue and partition the overview lists, and the one filtered
    // on if it lists it not (no job uses it any more): the form shows the
    // filter in force, so applying it again never widens the list.
    const queueNames = ov.queues.flatMap((q) => [q.name, ...(q.partitions || []).map((p) => p.name)]);
    if (f.queue && !queueNames.includes(f.queue)) queueNames.push(f.queue);
    const queueSel = el('select', { name: 'queue', 'aria-label': 'queue' }, el('option', { value: '' }, 'every queue'),
      queueNames.map((n) => el('option', { value: n, selected: n === f.queue ? 'selected' : null }, n)));
    const kindIn = el('input', { name: 'kind', type: 'text', placeholder: 'any kind', value: f.kind || '', 'aria-label': 'kind', maxlength: '100' });
    // The times the answer says it filtered on (unix milliseconds given,
    // too), to the second as the list shows them: applying the form again
    // keeps the filter.
    if (data.from) f.from = data.from;
    if (data.to) f.to = data.to;
    const fromIn = el('input', { name: 'from', type: 'datetime-local', step: '1', value: isoToInput(f.from), 'aria-label': 'from (UTC)' });
    const toIn = el('input', { name: 'to', type: 'datetime-local', step: '1', value: isoToInput(f.to), 'aria-label': 'to (UTC)' });
    const sortSel = el('select', { name: 'sort', 'aria-label': 'order' },
      el('option', { value: 'asc', selected: desc ? null : 'selected' }, 'oldest first'),
      el('option', { value: 'desc', selected: desc ? 'selected' : null }, 'newest first'));
    const form = el('form', { id: 'filters', class: 'filters' },
      el('label', {}, 'State ', stateSel), el('label', {}, 'Queue ', queueSel), el('label', {}, 'Kind ', kindIn),
      el('label', {}, (indexLabel[f.state] || 'Since') + ' from ', fromIn), el('label', {}, 'to ', toIn, ' UTC'),
      el('label', {}, 'Order ', sortSel), el('button', { type: 'submit' }, 'Apply'),
      el('a', { href: listHref({ state: f.state }) }, 'clear'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const p = { state: stateSel.value };
      if (queueSel.value) p.queue = queueSel.value;
      if (kindIn.value.trim()) p.kind = kindIn.value.trim();
      if (fromIn.value) p.from = inputToISO(fromIn.value);
      if (toIn.value) p.to = inputToISO(toIn.value);
      if (sortSel.value === 'desc') p.sort = 'desc';
      location.hash = listHref(p);
    });

    const rows = data.jobs.map((j) => el('tr', {},
      el('td', {}, jobLink(j.queue, j.id)),
      el('td', { class: 'mono' }, j.queue),
      el('td', {}, j.kind),
      el('td', { class: 'mono' }, j.operation_id),
      el('td', { class: 'num' }, String(j.attempts)),
      el('td', { class: 'nowrap' }, fmtTime(j.index_at)),
      el('td', { class: 'preview mono', title: j.args_size + ' bytes' }, j.args_preview || ''),
      // what a pending job waits for now, before the reason of an earlier put-back
      el('td', {}, j.waiting_for ? 'waiting for ' + j.waiting_for : (j.reason || '')),
      el('td', { class: 'error-text' }, j.error || '')));

    // Pages: labels follow the order shown.
    const page = (off) => listHref(Object.assign({}, f, off ? { offset: String(off) } : {}));
    const earlier = desc ? '← newer' : '← older';
    const later = desc ? 'older →' : 'newer →';
    // Past the last job (an old link, jobs that moved on): back to the
    // last page holding jobs, within the deepest offset served.
    const pastEnd = offset > 0 && !data.jobs.length;
    const lastPage = Math.min(Math.floor(Math.max(0, data.total - 1) / limit), Math.floor(data.max_offset / limit)) * limit;
    const pager = el('p', { class: 'pager', id: 'pager' },
      offset > 0 ? el('a', { href: page(pastEnd ? lastPage : Math.max(0, offset - limit)), rel: 'prev' },
        pastEnd ? (data.total ? '← last page' : '← first page') : earlier) : '',
      ' ', data.jobs.length ? String(offset + 1) + '–' + String(offset + data.jobs.length)
        : pastEnd ? 'past the end: 0' : '0',
      ' of ' + data.total + (data.total_exact ? '' : '+') + ' (' + (desc ? 'newest' : 'oldest') + ' first) ',
      offset + data.jobs.length >= data.total ? ''
        : offset + limit <= data.max_offset ? el('a', { href: page(offset + limit), rel: 'next' }, later)
          : el('span', { class: 'muted' }, 'no pages past ' + data.max_offset + ' jobs: narrow the filters or reverse the order'));

    // A bulk action over every job that passes the filters.
    let bulk = null;
    const specs = bulkActions[f.state];
    if (specs && data.total > 0) {
      bulk = actionBlocker('act on these jobs') || el('p', { class: 'bulk', id: 'bulk' }, specs.map((ba) => actionButton({
        name: 'bulk-' + ba[0], label: ba[1], noteRequired: true,
        prepare: async () => {
          const sel = await api('api/jobs?' + query + '&limit=1&select=1');
          if (!sel.selection.length) throw new Error('no job matches any more');
          const n = sel.selection.length;
          return {
            question: ba[2] + ' ' + n + ' job' + (n === 1 ? '' : 's') + ' (' + describeFilter(f) + ')' +
              (sel.selection_truncated ? ', the first 1000 of more' : '') + '?',
            data: sel.selection,
          };
        },
        run: async (note, selection) => {
          // the state they were selected in: a job that moved on since is left alone
          const res = await post('api/bulk', { action: ba[0], jobs: selection, note, state: f.state });
          const failed = res.failed.length ? '; ' + res.failed.length + ' could not be (' +
            [...new Set(res.failed.map((x) => x.code))].join(', ') + ')' : '';
          return 'Done: ' + res.done + ' of ' + res.requested + ' jobs' + failed + '.';
        },
      })));
    }
    show('jobs', el('h1', {}, badge(f.state), ' jobs ', el('small', { class: 'muted' }, describeFilter(f))),
      form, bulk,
      table(['Job', 'Queue', 'Kind', 'Operation', 'Attempts', indexLabel[f.state] || 'Since', 'Args', 'Reason', 'Error'], rows, { id: 'jobs' }),
      pager);
  }

  // limitsPage shows every queue's concurrency limits and rate limits that
  // hold jobs back (Inspector.Limits: keys at their limit first) and its
  // fair groups with pending jobs.
  async function limitsPage(my) {
    const data = await api('api/limits');
    if (my !== seq) return;
    const limitRows = [], rateRows = [], groupRows = [];
    data.queues.forEach((q) => {
      // a partitioned queue's partitions each hold their own permits,
      // starts and groups: an entry names the partition it was read from
      const where = (e) => e.queue || q.queue;
      (q.limits || []).forEach((l) => limitRows.push(el('tr', { 'data-limit': l.key },
        el('td', {}, where(l)), el('td', { class: 'mono' }, l.key),
        el('td', { class: 'num' + (l.at_limit ? ' warn' : '') }, l.held + ' of ' + l.max + (l.promised ? ', ' + l.promised + ' promised' : '')),
        el('td', { class: 'num' }, String(l.waiting)),
        // whole ids: "=<queue>=<operation id>" ones share their first characters
        el('td', {}, (l.holders || []).map((id, i) => [i ? ' ' : '', jobLink(where(l), id)])))));
      (q.rates || []).forEach((r) => rateRows.push(el('tr', { 'data-rate': r.key },
        el('td', {}, where(r)), el('td', { class: 'mono' }, r.key),
        el('td', { class: 'num' }, r.max + ' per ' + fmtDuration(r.per_ns / 1e6)),
        el('td', { class: 'num' + (r.starts >= r.max ? ' warn' : '') }, String(r.starts)),
        el('td', { class: 'num' }, String(r.deferred)))));
      (q.groups || []).forEach((g) => groupRows.push(el('tr', { 'data-group': g.name },
        el('td', {}, where(g)), el('td', { class: 'mono' }, g.name),
        el('td', { class: 'num' }, String(g.pending)),
        el('td', {}, jobLink(where(g), g.head)))));
    });
    show('limits', el('h1', {}, 'Limits'),
      el('h2', {}, 'Concurrency limits'),
      limitRows.length ? table(['Queue', 'Key', 'Held', 'Waiting', 'Holders'], limitRows, { id: 'limits' })
        : el('p', { class: 'muted', id: 'limits-none' }, 'No limit holds jobs back.'),
      el('h2', {}, 'Rate limits'),
      rateRows.length ? table(['Queue', 'Key', 'Rate', 'Starts in the last period', 'Deferred'], rateRows, { id: 'rates' })
        : el('p', { class: 'muted', id: 'rates-none' }, 'No rate limit holds jobs back.'),
      el('h2', {}, 'Fair groups'),
      groupRows.length ? table(['Queue', 'Group', 'Pending', 'Next'], groupRows, { id: 'groups' })
        : el('p', { class: 'muted', id: 'groups-none' }, 'No group has pending jobs.'));
    schedule(5000);
  }

  async function poolsPage(my) {
    const data = await api('api/pools');
    if (my !== seq) return;
    const rc = data.maintenance || {};
    const rows = data.pools.map((p) => el('tr', { 'data-pool': p.id },
      el('td', { class: 'mono' }, p.id, p.leader ? [' ', el('span', { class: 'badge leader', title: 'holds the maintenance leader\'s lease' }, 'maintenance leader')] : ''),
      el('td', { class: 'mono' }, p.host),
      el('td', { class: 'num' }, String(p.pid)),
      el('td', { class: 'mono' }, Object.entries(p.queues || {}).map(([q, w]) => q + '=' + w).join(', ')),
      el('td', { class: 'num' }, String(p.busy) + ' / ' + String(p.concurrency)),
      el('td', { class: 'mono' }, p.version),
      el('td', { class: 'nowrap' }, fmtTime(p.started)),
      el('td', { class: 'nowrap' + (p.heartbeat_age_ms > 15000 ? ' warn' : '') }, fmtTime(p.last_heartbeat) + ' (' + fmtDuration(p.heartbeat_age_ms) + ' ago)'),
      el('td', { class: 'nowrap num' + (p.clock_warn || p.clock_jumps ? ' warn' : ''), 'data-clock': p.id,
        title: 'Redis\'s clock minus this pool\'s, ± half the ' + (p.clock ? p.clock.rtt_ms.toFixed(1) : '?') + 'ms round trip' },
        p.clock ? fmtOffset(p.clock.offset_ms) : '—',
        p.clock_jumps ? ' (' + p.clock_jumps + ' jump' + (p.clock_jumps > 1 ? 's' : '') + ' back)' : '')));
    const leaderLine = rc.present
      ? el('p', { id: 'pools-leader' }, 'Maintenance leader ', el('strong', { class: 'mono' }, rc.leader),
        data.pools.some((p) => p.leader) ? '' : ' — not among the pools listed (a pool without heartbeats, or one that just stopped).')
      : el('p', { class: 'warn', id: 'pools-leader' }, 'No maintenance leader: expired leases are not detected and uncertain jobs are not reconciled.');
    show('pools', el('h1', {}, 'Pools ', el('small', { class: 'muted' }, data.pools.length + ' live')),
      leaderLine,
      table(['Pool', 'Host', 'PID', 'Queues (weight)', 'Busy / slots', 'Version', 'Started', 'Last heartbeat', 'Redis clock'], rows, { id: 'pools' }),
      el('p', { class: 'muted' }, 'Pools publish a heartbeat every few seconds; one that stops is dropped from this list after its heartbeat lapses. ' +
        'Redis clock is Redis\'s clock minus the pool\'s, measured on each heartbeat: due times and lease deadlines are on Redis\'s clock; ' +
        'an offset beyond ' + fmtDuration(data.clock_warn_ms) + ', or a jump back (a failover to a node whose clock is behind), is flagged.'));
    schedule(5000);
  }

  // A schedule no leader has registered for this long is shown as
  // unregistered: no pool that becomes the maintenance leader runs it any more.
  const scheduleStaleMs = 5 * 60 * 1000;

  function scheduleRow(s) {
    const stale = s.seen_age_ms > scheduleStaleMs;
    const late = s.next_tick && new Date(s.next_tick).getTime() < (s.server_time_ms || Date.now()) - 60000; // a pass runs every few seconds
    return el('tr', { 'data-schedule': s.id },
      el('td', { class: 'mono' }, el('a', { href: '#/schedules/' + enc(s.id) }, s.id)),
      el('td', { class: 'mono' }, s.kind),
      el('td', { class: 'mono' }, s.queue),
      el('td', { class: 'mono' }, s.schedule, s.time_zone ? el('span', { class: 'muted' }, ' (' + s.time_zone + ')') : ''),
      el('td', {}, s.catch_up),
      el('td', { class: 'nowrap' }, fmtTime(s.last_tick)),
      el('td', {}, s.last_job ? [jobLink(s.queue, s.last_job), ' ', badge(s.last_job_state)] : '—'),
      el('td', { class: 'nowrap' + (late ? ' warn' : '') }, fmtTime(s.next_tick)),
      el('td', { class: 'num' }, String(s.enqueued)),
      el('td', { class: 'num' }, String(s.skipped)),
      el('td', { class: 'nowrap' + (stale ? ' warn' : '') }, s.seen ? fmtDuration(s.seen_age_ms) + ' ago' : '—',
        stale ? ' (no leader registers it any more)' : ''));
  }

  function ticksTable(s) {
    const rows = s.ticks.map((t) => el('tr', { 'data-tick': t.time },
      el('td', { class: 'nowrap' }, fmtTime(t.time)),
      el('td', {}, t.job_state === 'gone' ? el('span', { class: 'mono muted', title: 'past its retention' }, t.job_id) : jobLink(t.queue, t.job_id)),
      el('td', {}, badge(t.job_state)),
      el('td', { class: 'mono' }, t.queue),
      el('td', { class: 'mono' }, t.operation_id),
      el('td', { class: 'nowrap' }, fmtTime(t.recorded)),
      el('td', { class: 'mono' }, t.leader),
      el('td', { class: 'muted' }, t.deduplicated ? 'deduplicated: the tick\'s job already existed' : '')));
    return table(['Tick', 'Job', 'State', 'Queue', 'Operation', 'Recorded', 'Leader token', 'Note'], rows, { id: 'ticks' });
  }

  const scheduleHeaders = ['Schedule', 'Kind', 'Queue', 'When', 'Catch-up', 'Last tick', 'Last job', 'Next tick', 'Enqueued', 'Skipped', 'Last registered'];

  // conflictsNote lists the schedules that pools define differently: the
  // recorded definition (the most recently started pool's) runs.
  function conflictsNote(scheds) {
    const rows = scheds.filter((s) => s.conflict).map((s) => el('tr', { 'data-conflict': s.id },
      el('td', { class: 'mono' }, s.id),
      el('td', {}, el('span', { class: 'mono' }, (s.owner && s.owner.pool) || '—'), ' (started ', fmtTime(s.owner && s.owner.started), ')'),
      el('td', {}, el('span', { class: 'mono' }, s.conflict.pool), ' (started ', fmtTime(s.conflict.started), ')'),
      el('td', { class: 'mono' }, s.conflict.digest),
      el('td', { class: 'nowrap' }, fmtTime(s.conflict.since)),
      el('td', { class: 'nowrap' }, fmtTime(s.conflict.seen))));
    if (!rows.length) return null;
    return el('section', { id: 'schedule-conflicts' },
      el('h2', { class: 'warn' }, 'Defined differently by live pools'),
      table(['Schedule', 'Recorded definition (runs)', 'Defined otherwise by', 'Its definition', 'Since', 'Last tried'], rows, { id: 'conflicts' }),
      el('p', { class: 'muted' }, 'The definition of the most recently started pool is recorded and runs; an older pool with the same job ticks by it, one with another job skips the schedule. The conflict is cleared once no live pool defines it otherwise.'));
  }

  function leaderNote(rc) {
    return rc.present ? null
      : el('p', { class: 'warn', id: 'schedules-leader' }, 'No maintenance leader: no tick is enqueued until a pool becomes the leader.');
  }

  async function schedulesPage(my, id) {
    const data = await api('api/schedules' + (id ? '?ticks=50&id=' + enc(id) : ''));
    if (my !== seq) return;
    const serverMs = new Date(data.server_time).getTime();
    data.schedules.forEach((s) => { s.server_time_ms = serverMs; });
    if (id) {
      const s = data.schedules[0];
      show('schedule', el('h1', {}, 'Schedule ', el('span', { class: 'mono' }, s.id)),
        leaderNote(data.maintenance || {}),
        table(scheduleHeaders, [scheduleRow(s)], { id: 'schedules' }),
        conflictsNote([s]),
        el('h2', {}, 'Newest ticks ', el('small', { class: 'muted' }, s.ticks.length + ' shown, newest first')),
        ticksTable(s),
        el('p', { class: 'muted' }, 'Each tick is enqueued once, with operation id periodic:<schedule>:<tick>; a tick enqueued again around a leader change is deduplicated into the same job.'),
        el('p', {}, el('a', { href: '#/schedules' }, 'All schedules')));
      schedule(10000);
      return;
    }
    const more = data.total > data.schedules.length ? ' (' + data.schedules.length + ' shown)' : '';
    show('schedules', el('h1', {}, 'Schedules ', el('small', { class: 'muted' }, data.total + ' recorded' + more)),
      leaderNote(data.maintenance || {}),
      table(scheduleHeaders, data.schedules.map(scheduleRow), { id: 'schedules' }),
      conflictsNote(data.schedules),
      el('p', { class: 'muted' }, 'Periodic jobs registered on the pools. The maintenance leader enqueues each tick once and records the job it produced; open a schedule for its newest ticks.'),
      (data.removed || []).length ? el('section', { id: 'schedule-removals' },
        el('h2', {}, 'Removed ', el('small', { class: 'muted' }, 'newest first')),
        table(['Schedule', 'Kind', 'Queue', 'Removed', 'By', 'Note'], data.removed.map((r) => el('tr', { 'data-removed': r.id },
          el('td', { class: 'mono' }, r.id), el('td', { class: 'mono' }, r.kind), el('td', { class: 'mono' }, r.queue),
          el('td', { class: 'nowrap' }, fmtTime(r.at)), el('td', { class: 'mono' }, r.actor), el('td', {}, r.note || ''))), { id: 'removed-schedules' })) : '');
    schedule(10000);
  }

  function workflowRow(w) {
    return el('tr', { 'data-workflow': w.id },
      el('td', { class: 'mono' }, el('a', { href: '#/workflows/' + enc(w.id) }, w.id)),
      el('td', {}, w.name || ''),
      el('td', {}, badge(w.state)),
      el('td', { class: 'num' }, w.done + '/' + w.total),
      el('td', { class: 'nowrap' }, fmtTime(w.created)),
      el('td', { class: 'nowrap' }, ago(w.created)));
  }

  // workflowGraph draws the steps in columns by depth (a step sits right of
  // every step it depends on), each box with its state, token and output,
  // linked to its job's page; an SVG layer draws an arrow from each
  // dependency to its dependent once the boxes are laid out.
  function workflowGraph(w) {
    // Keyed by step name without a prototype: a step may be named
    // constructor, toString or __proto__.
    const depth = Object.create(null);
    const byName = Object.create(null);
    w.steps.forEach((st) => { byName[st.name] = st; });
    const depthOf = (st) => {
      if (depth[st.name] !== undefined) return depth[st.name];
      depth[st.name] = 0;
      let d = 0;
      (st.deps || []).forEach((n) => { if (byName[n]) d = Math.max(d, depthOf(byName[n]) + 1); });
      depth[st.name] = d;
      return d;
    };
    const cols = [];
    w.steps.forEach((st) => { const d = depthOf(st); (cols[d] = cols[d] || []).push(st); });
    const boxes = Object.create(null);
    const graph = el('div', { class: 'wf-graph', id: 'workflow-graph' },
      ...cols.map((col, i) => el('div', { class: 'wf-col', 'data-depth': String(i) },
        ...col.map((st) => {
          boxes[st.name] = el('div', { class: 'wf-step', 'data-step': st.name, 'data-state': st.state },
          el('div', {}, el('strong', {}, st.name), ' ', badge(st.state)),
          st.deps && st.deps.length ? el('div', { class: 'muted' }, 'after ' + st.deps.join(', ')
            + (st.allow_fail && st.allow_fail.length ? ' (may fail: ' + st.allow_fail.join(', ') + ')' : '')) : '',
          el('div', { class: 'mono' }, 'token ' + (st.token && st.token !== '0' ? st.token : '—'), ' · ', jobLink(st.queue, st.job_id)),
          st.reason ? el('div', { class: 'muted' }, st.reason) : '',
          st.output !== undefined ? el('pre', { class: 'args' }, JSON.stringify(st.output)) : '');
          return boxes[st.name];
        }))));
    const draw = () => drawWorkflowEdges(graph, w, boxes, byName);
    requestAnimationFrame(draw);
    if (window.ResizeObserver) new ResizeObserver(draw).observe(graph);
    return graph;
  }

  // drawWorkflowEdges (re)draws graph's dependency arrows: from the right
  // of a dependency's box to the left of its dependent's, green once the
  // dependency succeeded, red when it ended dead or cancelled (or lost).
  function drawWorkflowEdges(graph, w, boxes, byName) {
    const ns = 'http://www.w3.org/2000/svg';
    const old = graph.querySelector('svg.wf-edges');
    if (old) old.remove();
    if (!graph.isConnected) return;
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('class', 'wf-edges');
    svg.setAttribute('width', String(graph.scrollWidth));
    svg.setAttribute('height', String(graph.scrollHeight));
    const defs = document.createElementNS(ns, 'defs');
    const colors = { ok: '#2e7d32', bad: '#c62828', other: '#888' };
    for (const [k, c] of Object.entries(colors)) {
      const m = document.createElementNS(ns, 'marker');
      m.setAttribute('id', 'wf-arrow-' + k);
      m.setAttribute('viewBox', '0 0 10 10');
      m.setAttribute('refX', '10');
      m.setAttribute('refY', '5');
      m.setAttribute('markerWidth', '7');
      m.setAttribute('markerHeight', '7');
      m.setAttribute('orient', 'auto');
      const tip = document.createElementNS(ns, 'path');
      tip.setAttribute('d', 'M0,0 L10,5 L0,10 z');
      tip.setAttribute('fill', c);
      m.append(tip);
      defs.append(m);
    }
    svg.append(defs);
    const g = graph.getBoundingClientRect();
    const at = (r, x) => [x - g.left + graph.scrollLeft, r.top + r.height / 2 - g.top + graph.scrollTop];
    w.steps.forEach((st) => (st.deps || []).forEach((d) => {
      const from = boxes[d];
      const to = boxes[st.name];
      if (!from || !to) return;
      const a = from.getBoundingClientRect();
      const b = to.getBoundingClientRect();
      const [x1, y1] = at(a, a.right);
      const [x2, y2] = at(b, b.left);
      const dep = byName[d].state;
      const kind = dep === 'succeeded' ? 'ok' : (dep === 'dead' || dep === 'cancelled' || dep === 'lost') ? 'bad' : 'other';
      const mid = (x1 + x2) / 2;
      const p = document.createElementNS(ns, 'path');
      p.setAttribute('class', 'wf-edge');
      p.setAttribute('data-from', d);
      p.setAttribute('data-to', st.name);
      p.setAttribute('d', `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`);
      p.setAttribute('fill', 'none');
      p.setAttribute('stroke', colors[kind]);
      p.setAttribute('stroke-width', '1.5');
      p.setAttribute('marker-end', 'url(#wf-arrow-' + kind + ')');
      svg.append(p);
    }));
    graph.prepend(svg);
  }

  // maxWorkflowsOffset is the deepest offset api/workflows serves.
  const maxWorkflowsOffset = 10000;

  async function workflowsPage(my, id, params) {
    if (id) {
      const w = await api('api/workflows?id=' + enc(id));
      if (my !== seq) return;
      show('workflow', el('h1', {}, 'Workflow ', el('span', { class: 'mono' }, w.id), w.name ? ' ' + w.name : ''),
        table(['Workflow', 'Name', 'State', 'Progress', 'Started', 'Age'], [workflowRow(w)], { id: 'workflows' }),
        w.cancelled_by ? el('p', { class: 'warn' }, 'Cancelled by ' + w.cancelled_by) : '',
        el('h2', {}, 'Steps'), workflowGraph(w),
        el('p', {}, el('a', { href: '#/workflows' }, 'All workflows')));
      schedule(5000);
      return;
    }
    const limit = 50;
    // The API refuses an offset past its bound: an old link asks for the last page it serves.
    const asked = Math.min(maxWorkflowsOffset, Math.max(0, parseInt(params.get('offset') || '0', 10) || 0));
    const data = await api('api/workflows?offset=' + asked + '&limit=' + limit);
    if (my !== seq) return;
    // Pages, newest first; past the last workflow (an old link): back to the first page.
    const offset = data.offset;
    const page = (off) => '#/workflows' + (off ? '?offset=' + off : '');
    const n = data.workflows.length;
    const pager = el('p', { class: 'pager', id: 'workflows-pager' },
      offset > 0 ? el('a', { href: page(n ? Math.max(0, offset - limit) : 0), rel: 'prev' }, n ? '← newer' : '← first page') : '',
      ' ', n ? String(offset + 1) + '–' + String(offset + n) : offset > 0 ? 'past the end: 0' : '0', ' of ' + data.total + ' (newest first) ',
      offset + n < data.total ? (offset + limit <= maxWorkflowsOffset ? el('a', { href: page(offset + limit), rel: 'next' }, 'older →')
        : el('span', { class: 'muted' }, 'no pages past ' + maxWorkflowsOffset + ' workflows')) : '');
    show('workflows', el('h1', {}, 'Workflows'),
      table(['Workflow', 'Name', 'State', 'Progress', 'Started', 'Age'], data.workflows.map(workflowRow), { id: 'workflows' }),
      pager,
      el('p', { class: 'muted' }, 'Job graphs: each step runs once, after every step it depends on succeeded. Progress counts steps in a final state.'));
    schedule(10000);
  }

  async function historyPage(my, params) {
    const win = params.get('window') === '24h' ? '24h' : '1h';
    const queue = params.get('queue') || '';
    const [data, ov] = await Promise.all([
      api('api/series?window=' + win + (queue ? '&queue=' + enc(queue) : '')),
      api('api/overview'),
    ]);
    if (my !== seq) return;
    const href = (p) => '#/history?' + new URLSearchParams(Object.assign({ window: win }, queue ? { queue } : {}, p)).toString();
    const tabs = el('p', { class: 'tabs', id: 'history-tabs' },
      el('a', { href: href({ window: '1h' }), class: win === '1h' ? 'active' : '' }, 'Last hour'), ' · ',
      el('a', { href: href({ window: '24h' }), class: win === '24h' ? 'active' : '' }, 'Last day'), ' · queue: ',
      el('a', { href: '#/history?window=' + win, class: queue ? '' : 'active' }, 'all'),
      ov.queues.map((q) => [' ', el('a', { href: '#/history?' + new URLSearchParams({ window: win, queue: q.name }).toString(), class: queue === q.name ? 'active' : '' }, q.name)]));
    show('history', el('h1', {}, 'History ', el('small', { class: 'muted' }, (queue ? 'queue ' + queue : 'every queue') + ', one bar per ' + fmtDuration(data.step_seconds * 1000))),
      tabs, charts(data),
      el('p', { class: 'muted' }, 'Exact counts per bar, kept per minute by the queue\'s own scripts in Redis for a day (every job counts, whether or not a maintenance leader ran; they survive restarts of the dashboard and the pools); the current minute is included and the page refreshes itself. "Now" is the jobs in that state at this moment.'));
    schedule(win === '1h' ? 5000 : 30000);
  }

  async function stuckPage(my) {
    const data = await api('api/stuck');
    if (my !== seq) return;
    const rows = data.jobs.map((j) => el('tr', {},
      el('td', { class: 'mono' }, j.queue),
      el('td', {}, jobLink(j.queue, j.id)),
      el('td', {}, j.kind),
      el('td', { class: 'mono' }, j.token),
      el('td', { class: 'nowrap' }, fmtTime(j.deadline)),
      el('td', { class: j.overdue_ms >= 0 ? 'warn' : '' },
        j.overdue_ms >= 0 ? fmtDuration(j.overdue_ms) + ' overdue' : 'due in ' + fmtDuration(j.overdue_ms))));
    const ck = data.clock || { pools: [] };
    const offsets = ck.pools.map((p) => p.offset_ms);
    const clockLine = el('p', { class: 'muted', id: 'stuck-clock' },
      'Clock: deadlines and "overdue" are by the namespace\'s time (Redis\'s clock plus the offset that carries it across a failover or a clock stepped back: ' +
        fmtOffset(ck.namespace_offset_ms || 0) + '). ',
      'The namespace\'s time minus this dashboard\'s clock: ' + fmtOffset(ck.dashboard_offset_ms),
      offsets.length ? '; minus the pools\': ' + fmtOffset(Math.min(...offsets)) + (offsets.length > 1 ? ' to ' + fmtOffset(Math.max(...offsets)) : '') : '',
      '. Pools stop an attempt by their own clock, a safety margin before its deadline.');
    show('stuck',
      el('h1', {}, 'Stuck jobs'),
      ck.warning ? el('p', { class: 'warn', id: 'stuck-clock-warning' }, ck.warning) : '',
      el('p', { class: 'muted' }, 'Running jobs whose lease deadline has passed or is within ' + fmtDuration(data.margin_ms) +
        ' (namespace time ' + fmtTime(data.server_time) + '). A live attempt renews its lease well before that; the maintenance leader moves an expired one to uncertain.'),
      clockLine,
      data.more ? el('p', { class: 'warn', id: 'stuck-more' }, 'More jobs are due than the ' + data.jobs.length +
        ' listed here, which are those due first.') : '',
      table(['Queue', 'Job', 'Kind', 'Token', 'Lease deadline', 'Status'], rows, { id: 'stuck' }));
    schedule(5000);
  }

  function attentionCard(j) {
    return el('article', { class: 'card', 'data-job': j.id },
      el('h3', {}, badge(j.state), ' ', jobLink(j.queue, j.id)),
      dl([
        ['Queue', j.queue], ['Kind', j.kind], ['Operation', j.operation_id],
        ['Uncertain since', j.uncertain_since ? fmtTime(j.uncertain_since) + ' (' + ago(j.uncertain_since) + ')' : ''],
        ['Reason', j.reason], ['Error', j.error ? el('pre', { class: 'error-text' }, j.error) : ''],
        ['Attempts', String(j.attempts)], ['Reconcile tries', String(j.reconcile_tries)],
      ]),
      el('details', {}, el('summary', {}, 'History (latest ' + (j.history || []).length + ')'), historyTable(j.history)),
      resolveForm(j, j.state === 'review' || j.state === 'uncertain' ? ['succeeded', 'rerun', 'dead'] : []));
  }

  async function attentionPage(my) {
    const [review, uncertain] = await Promise.all([
      api('api/jobs?state=review&history=1&limit=100'),
      api('api/jobs?state=uncertain&history=1&limit=100'),
    ]);
    if (my !== seq) return;
    const section = (title, id, data, empty) => el('section', { id },
      el('h2', {}, title + ' (' + data.total + ')'),
      data.jobs.length ? data.jobs.map(attentionCard) : el('p', { class: 'muted' }, empty),
      data.total > data.jobs.length ? el('p', { class: 'muted' }, 'Showing the ' + data.jobs.length + ' oldest; see each queue for the rest.') : '');
    show('attention',
      el('h1', {}, 'Uncertain & review'),
      el('p', { class: 'muted' }, 'Uncertain jobs may or may not have applied their side effect; the maintenance leader reconciles them by asking their worker. Jobs it cannot decide wait here for an operator.'),
      section('Waiting for an operator', 'review', review, 'No job waits for review.'),
      section('Uncertain', 'uncertain', uncertain, 'No uncertain job.'));
  }

  // dedupCause says why an event's job was deduplicated, by its stage: a
  // finished job found due again, a unique key another job held (the
  // operation id given, if any, names no job), or an operation id known.
  function dedupCause(e) {
    if (e.stage === 'execute') return 'due again after it finished';
    if (e.stage === 'unique') return 'unique key held' + (e.op ? ' (operation ' + e.op + ')' : '');
    return 'operation ' + (e.op || '?');
  }

  async function eventsPage(my, type) {
    const t = type === 'fenced' || type === 'operator' ? type : 'deduplicated';
    const data = await api('api/events?type=' + t + '&limit=200');
    if (my !== seq) return;
    const rows = data.events.map((e) => el('tr', {},
      el('td', { class: 'nowrap' }, fmtTime(e.at)),
      el('td', { class: 'mono' }, e.queue),
      el('td', {}, t !== 'operator' ? e.stage : e.type === 'resolve' ? 'resolve: ' + (e.decision || '?') : e.type),
      el('td', {}, e.job ? jobLink(e.queue, e.job) : '—'),
      t === 'deduplicated'
        ? el('td', { class: 'mono' }, dedupCause(e))
        : t === 'fenced'
          ? el('td', { class: 'mono' }, 'token ' + (e.token || '?') + ' < current ' + (e.current || '?'))
          : el('td', {}, (e.actor || '') + (e.note ? ': ' + e.note : ''))));
    const tabs = el('p', { class: 'tabs' },
      el('a', { href: '#/events/deduplicated', class: t === 'deduplicated' ? 'active' : '' }, 'Deduplicated'), ' · ',
      el('a', { href: '#/events/fenced', class: t === 'fenced' ? 'active' : '' }, 'Fenced rejections'), ' · ',
      el('a', { href: '#/events/operator', class: t === 'operator' ? 'active' : '' }, 'Operator actions'));
    const titles = { deduplicated: 'Deduplicated deliveries', fenced: 'Fenced rejections', operator: 'Operator actions' };
    const intros = {
      deduplicated: 'Enqueues of an operation id already known or of a unique job whose key another job holds (the caller got the original job), and jobs found due again after they finished (their handler did not run). Each links to the original job.',
      fenced: 'Writes refused because they carried a token older than the job\'s current one.',
      operator: 'Cancellations, resolutions (re-run, marked succeeded or dead), pauses, resumptions and scheduled jobs run now, with who and why.',
    };
    const last = { deduplicated: 'Duplicate', fenced: 'Tokens', operator: 'By' };
    show('events', el('h1', {}, titles[t]), tabs,
      el('p', { class: 'muted' }, intros[t]),
      table(['Time', 'Queue', t === 'operator' ? 'Action' : 'Stage', t === 'operator' ? 'Job' : 'Original job', last[t]], rows, { id: 'events' }));
  }

  async function jobPage(my, queue, id) {
    const d = await api('api/jobs/' + enc(queue) + '/' + enc(id));
    if (my !== seq) return;
    const j = d.job;
    const attempts = table(['#', 'Token', 'Fence', 'Started', 'Ended', 'Outcome', 'Error / reason'], d.attempts.map((a) => el('tr', {},
      el('td', { class: 'num' }, String(a.attempt)),
      el('td', { class: 'mono' }, a.token),
      el('td', { class: 'mono' }, a.fence || ''),
      el('td', { class: 'nowrap' }, fmtTime(a.started)),
      el('td', { class: 'nowrap' }, fmtTime(a.ended)),
      el('td', {}, badge(a.outcome)),
      el('td', {},
        a.error ? el('pre', { class: 'error-text' }, a.error) : '',
        a.reason ? el('div', {}, a.reason) : '',
        (a.fenced || []).map((f) => el('div', { class: 'warn' }, 'fenced ' + f.stage + ' at ' + fmtTime(f.at) + (f.outcome ? ' (wanted ' + f.outcome + ')' : '')))))), { id: 'attempts' });
    let args;
    try { args = JSON.stringify(j.args, null, 2); } catch (_) { args = String(j.args); }
    // Times are on the namespace's time: count down against it (nowMs).
    const runAt = new Date(j.run_at).getTime();
    let overdue = '';
    if (d.overdue && j.state === 'running') {
      overdue = el('span', { class: 'warn', id: 'job-overdue' }, 'overdue: ' + (d.overdue_ms >= 0
        ? 'its lease deadline passed ' + fmtDuration(d.overdue_ms) + ' ago; the maintenance leader moves it to uncertain'
        : 'its lease ends in ' + fmtDuration(d.overdue_ms) + ' and was not renewed'));
    } else if (d.overdue && j.state === 'pending') {
      overdue = el('span', { class: 'warn', id: 'job-overdue' }, 'overdue: due ' + fmtDuration(d.overdue_ms) + ' ago and not started' +
        (d.queue_paused ? ' (queue ' + j.queue + ' is paused by ' + d.queue_paused.actor + ')' : ' (is a pool serving queue ' + j.queue + '?)'));
    }
    const lease = j.state === 'running' ? el('span', { id: 'job-lease', class: 'nowrap' }) : '';
    let deadline = new Date(j.deadline).getTime();
    const progress = el('span', { id: 'job-progress' });
    const showProgress = (p, attempts) => {
      if (!p) { progress.replaceChildren(el('span', { class: 'muted' }, 'none reported')); return; }
      const pct = p.total > 0 ? Math.floor(100 * p.done / p.total) : null;
      progress.replaceChildren(
        pct !== null ? el('progress', { max: String(p.total), value: String(p.done) }) : '',
        ' ', el('span', { id: 'job-progress-text' }, p.total > 0 ? p.done + ' of ' + p.total + ' (' + pct + '%)' : String(p.done)),
        p.note ? ' · ' : '', p.note ? el('span', { id: 'job-progress-note' }, p.note) : '',
        el('span', { class: 'muted' }, ' · attempt ' + p.attempt + (p.attempt !== attempts ? ' (an earlier attempt)' : '') + ', ' + ago(p.at)));
    };
    showProgress(j.progress, j.attempts);
    if (j.state === 'running') {
      // Follow the running attempt: its progress and lease deadline every
      // 2 s; once it ended, show the job anew, unless the operator is
      // busy on the page (a confirmation open, typing in a form).
      const follow = async () => {
        if (my !== seq) return;
        try {
          const n = await api('api/jobs/' + enc(queue) + '/' + enc(id));
          if (my !== seq) return;
          if ((n.job.state !== 'running' || n.job.token !== j.token) && !busy()) { render(true); return; }
          showProgress(n.job.progress, n.job.attempts);
          if (n.job.deadline) deadline = new Date(n.job.deadline).getTime();
        } catch (_) { /* try again at the next step */ }
        if (my === seq) timer = setTimeout(follow, 2000);
      };
      timer = setTimeout(follow, 2000);
    }
    if (lease) {
      const tick = () => {
        const left = deadline - nowMs();
        lease.textContent = fmtTime(deadline) + (left >= 0 ? ' (in ' + fmtDuration(left) + ')' : ' (passed ' + fmtDuration(left) + ' ago)');
        lease.classList.toggle('warn', left < 0);
      };
      tick();
      ticker = setInterval(tick, 1000);
    }
    let runAtText = '';
    if (j.run_at && j.state === 'pending') {
      const left = runAt - new Date(d.server_time).getTime();
      runAtText = el('span', { id: 'job-run-at' }, fmtTime(j.run_at) + (left > 0 ? ' (in ' + fmtDuration(left) + ')' : ' (due)'));
    } else if (j.run_at) {
      runAtText = el('span', { id: 'job-run-at' }, fmtTime(j.run_at));
    }
    let cancel = null;
    if (d.cancellable) {
      cancel = actionBlocker('cancel this job') || el('div', { class: 'job-actions' }, actionButton({
        name: 'cancel', target: j.id, noteRequired: true,
        label: j.state === 'running' ? 'Ask the attempt to stop' : 'Cancel job',
        question: j.state === 'running'
          ? 'Ask the running attempt to stop? Its outcome is still committed by its token; a retry it asks for becomes cancelled.'
          : 'Cancel this ' + (j.state === 'waiting' ? 'waiting step' : runAt > new Date(d.server_time).getTime() ? 'scheduled job' : 'pending job') +
            '? It becomes cancelled (it can be re-run).',
        run: async (note) => {
          const res = await post(jobPath(j.queue, j.id) + '/cancel', { note, state: j.state, token: j.token || '', runs: j.runs || 0 });
          return res.stop_requested ? 'The attempt is asked to stop.' : 'The job is now ' + res.job.state + '.';
        },
      }));
    }
    let runNow = null;
    if (d.runnable_now) {
      runNow = actionBlocker('run this job now') || el('div', { class: 'job-actions' }, actionButton({
        name: 'run-now', target: j.id, noteRequired: false,
        label: 'Run now',
        question: d.queue_paused ? 'Make this scheduled job due now? Its queue is paused: it starts once the queue is resumed.'
          : 'Make this scheduled job due now? Pools start it at once.',
        run: async (note) => {
          const res = await post(jobPath(j.queue, j.id) + '/run-now', { note, state: j.state, token: j.token || '', runs: j.runs || 0 });
          if (res.queue_paused) return 'The job is due now, but its queue is paused: it starts once the queue is resumed.';
          return 'The job is due now (' + res.job.state + ').';
        },
      }));
    }
    show('job',
      el('h1', {}, 'Job ', el('span', { class: 'mono', id: 'job-id' }, j.id), ' ', badge(j.state),
        d.overdue ? [' ', el('span', { class: 'badge overdue' }, 'overdue')] : ''),
      dl([
        ['Queue', j.bridge ? [j.queue, ' ', el('span', { class: 'badge', id: 'job-bridge', title: 'delivered by ' + j.bridge + ' through the bridge; fenced by this ledger' }, j.bridge)] : j.queue],
        ['Kind', j.kind], ['Operation id', el('span', { class: 'mono' }, j.operation_id)],
        ['Resource', j.resource], ['Token', j.token],
        ['Unique key', j.unique_key ? el('span', { class: 'mono', id: 'job-unique', title: 'held while the job is ' + (j.unique_states || []).join(', ') }, j.unique_key) : ''],
        ['Fence', j.fence ? el('span', { class: 'mono', title: 'the resource lease\'s token its side effects carried' }, j.fence) : ''],
        ['Limit', j.limit ? el('span', { class: 'mono', id: 'job-limit' }, j.limit) : ''],
        ['Rate', j.rate ? el('span', { class: 'mono', id: 'job-rate' }, j.rate) : ''],
        ['Group', j.group ? el('span', { class: 'mono', id: 'job-group' }, j.group) : ''],
        ['Headers', j.headers ? el('span', { class: 'mono', id: 'job-headers' },
          Object.keys(j.headers).sort().map((k) => pair(k, j.headers[k])).join(', ')) : ''],
        ['Waiting for', j.waiting_for ? el('span', { class: 'warn', id: 'job-waiting' }, j.waiting_for) : ''],
        ['Cancel requested', j.cancel_requested_by ? el('span', { class: 'warn', id: 'job-cancel' },
          'by ' + j.cancel_requested_by + (j.state === 'running' ? ': the attempt is asked to stop; its outcome is still committed by its token' : '')) : ''],
        ['Run at', runAtText],
        ['Overdue', overdue],
        ['Queue paused', d.queue_paused ? 'by ' + d.queue_paused.actor + (d.queue_paused.note ? ': ' + d.queue_paused.note : '') + ' (' + ago(d.queue_paused.at) + ')' : ''],
        ['Lease deadline', lease],
        ['Progress', j.progress || j.state === 'running' ? progress : ''],
        ['Attempts', String(j.attempts) + ' (max retries ' + j.max_retries + ', runs ' + j.runs + ')'],
        ['Created', fmtTime(j.created)], ['Updated', fmtTime(j.updated)], ['Finished', j.finished ? fmtTime(j.finished) : ''],
        ['Uncertain since', j.uncertain_since ? fmtTime(j.uncertain_since) : ''],
        ['Reconcile tries', j.reconcile_tries ? String(j.reconcile_tries) : ''],
        ['Reason', j.reason ? el('span', { id: 'job-reason' }, j.reason) : ''],
        ['Error', j.error ? el('pre', { class: 'error-text', id: 'job-error' }, j.error) : ''],
        ['Workflow', j.workflow ? el('span', { id: 'job-workflow' }, 'step ' + j.step + ' of ' + j.workflow) : ''],
      ]),
      runNow,
      cancel,
      resolveForm(j, d.decisions),
      el('h2', {}, 'Args ', el('small', { class: 'muted' }, '(sensitive fields redacted)')),
      el('pre', { class: 'args', id: 'job-args' }, args),
      j.output !== undefined ? el('h2', {}, 'Output ', el('small', { class: 'muted' }, '(sensitive fields redacted)')) : '',
      j.output !== undefined ? el('pre', { class: 'args', id: 'job-output' }, JSON.stringify(j.output, null, 2)) : '',
      el('h2', {}, 'Attempts'), attempts,
      el('h2', {}, 'History'), historyTable(d.history));
  }

  const byLabels = { job_id: 'job id', operation_id: 'operation id', job_id_prefix: 'job id prefix', operation_id_prefix: 'operation id prefix' };

  async function searchPage(my, text) {
    document.getElementById('search-q').value = text;
    if (!text) {
      show('search', el('h1', {}, 'Search'), el('p', { class: 'muted' }, 'Enter a job id or an operation id, or the start of one, above.'));
      return;
    }
    const data = await api('api/search?q=' + enc(text));
    if (my !== seq) return;
    const rows = data.matches.map((m) => el('tr', {},
      el('td', {}, byLabels[m.by] || m.by),
      el('td', {}, jobLink(m.job.queue, m.job.id)),
      el('td', { class: 'mono' }, m.job.queue),
      el('td', {}, m.job.kind),
      el('td', {}, badge(m.job.state))));
    show('search', el('h1', {}, 'Search: ', el('span', { class: 'mono' }, text)),
      data.matches.length ? table(['Matched by', 'Job', 'Queue', 'Kind', 'State'], rows, { id: 'results' })
        : el('p', { class: 'muted', id: 'no-results' }, 'No job has that id or operation id, or one starting with it (finished jobs are kept for the retention period).'),
      data.partial ? el('p', { class: 'muted' }, 'Only part of the keyspace was searched for prefixes (it is large, or many matched); type more of the id.') : '');
  }

  // ---- routing -----------------------------------------------------------

  // rerender shows an action's result after ms, unless the operator has
  // moved on to another page (or this one re-rendered) since the action
  // started: my is the view's seq then. An action answered after a move
  // must not re-render the page moved to, throwing away what is open there.
  function rerender(ms, my) {
    setTimeout(() => { if (my === seq) render(true); }, ms);
  }

  // busy says the operator is in the middle of something a refresh would
  // throw away: an action's confirmation is open, or they are typing in
  // a form of the page.
  function busy() {
    if (main.querySelector('.confirm-box')) return true;
    const a = document.activeElement;
    return main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName);
  }

  // schedule refreshes the page after ms, later while it is hidden or the
  // operator is busy on it.
  function schedule(ms) {
    clearTimeout(timer);
    const my = seq;
    timer = setTimeout(() => { if (my === seq && !document.hidden && !busy()) render(true); else if (my === seq) schedule(ms); }, ms);
  }

  // The pages that refresh themselves, and so try again after any error
  // (the others try again after one of the ledger or the network).
  const selfRefreshing = new Set(['', 'stuck', 'pools', 'limits', 'schedules', 'workflows', 'history']);

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query] = raw.split('?');
    let parts;
    try { parts = path.split('/').map(decodeURIComponent); } catch (_) { parts = ['?']; }
    const params = new URLSearchParams(query || '');
    return { parts, params };
  }

  async function render(refresh) {
    clearTimeout(timer);
    clearInterval(ticker);
    const my = ++seq;
    const { parts, params } = parseRoute();
    const name = parts[0] || '';
    document.querySelectorAll('nav a').forEach((a) => {
      a.classList.toggle('active', a.dataset.nav === (name || 'overview'));
    });
    if (!refresh) main.dataset.ready = '0';
    loadBanner();
    try {
      switch (name) {
        case '': await overviewPage(my); break;
        case 'stuck': await stuckPage(my); break;
        case 'attention': await attentionPage(my); break;
        case 'events': await eventsPage(my, parts[1]); break;
        case 'jobs':
          if (parts[1]) { params.set('queue', parts[1]); params.set('state', parts[2] || ''); } // the old #/jobs/<queue>/<state>
          await jobsPage(my, params); break;
        case 'pools': await poolsPage(my); break;
        case 'schedules': await schedulesPage(my, parts[1] || ''); break;
        case 'workflows': await workflowsPage(my, parts[1] || '', params); break;
        case 'limits': await limitsPage(my); break;
        case 'history': await historyPage(my, params); break;
        case 'job': await jobPage(my, parts[1] || '', parts[2] || ''); break;
        case 'search': await searchPage(my, parts.slice(1).join('/')); break;
        default: show('notfound', el('h1', {}, 'Not found'), el('p', {}, el('a', { href: '#/' }, 'Back to the overview')));
      }
    } catch (err) {
      if (my === seq) {
        // A page that refreshes itself tries again, as does any page that
        // could not be read (the ledger unavailable, 5xx, or no answer),
        // not one refused for what it asked (4xx): it comes back by itself
        // once Redis answers (after a failover, say).
        const retry = selfRefreshing.has(name) || err.status === 0 || err.status >= 500;
        showError(err, retry);
        if (retry) schedule(5000);
      }
    }
  }

  document.getElementById('search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = document.getElementById('search-q').value.trim();
    location.hash = '#/search/' + enc(q);
  });
  window.addEventListener('hashchange', () => render(false));
  document.addEventListener('visibilitychange', () => { if (!document.hidden && !busy() && (parseRoute().parts[0] || '') === '') render(true); });

  loadSession().finally(() => render(false));
})();
