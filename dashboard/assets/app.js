// fencedq dashboard. Plain JavaScript, no dependencies, no build step.
//
// Every value that comes from the API (job ids, args, error texts, notes)
// enters the page through textContent or a text attribute, never as markup.
// Every URL is relative, so the dashboard works under any path prefix.
'use strict';

(() => {
  const main = document.getElementById('main');
  const sessionEl = document.getElementById('session');
  const states = ['pending', 'running', 'uncertain', 'review', 'succeeded', 'dead', 'cancelled'];
  const decisionLabels = { succeeded: 'Mark succeeded', rerun: 'Re-run', dead: 'Mark dead' };
  let session = { actions_enabled: false, authenticated: false, basic_auth: false };
  let csrfToken = null;
  let timer = null;
  let seq = 0; // bumps on every navigation; stale responses are dropped

  // ---- DOM helpers -------------------------------------------------------

  // safeHref allows only in-page routes and the dashboard's own endpoints.
  function safeHref(h) {
    return typeof h === 'string' && (h.startsWith('#/') || h === 'api/login') ? h : '#/';
  }

  // el builds an element. Attribute values are set as text; children that
  // are not nodes become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'href') e.setAttribute('href', safeHref(v));
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
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
    if (a < 3600000) return Math.floor(a / 60000) + 'm' + Math.floor((a % 60000) / 1000) + 's';
    return Math.floor(a / 3600000) + 'h' + Math.floor((a % 3600000) / 60000) + 'm';
  }

  function ago(s) {
    if (!s) return '';
    const t = new Date(s).getTime();
    if (isNaN(t) || t <= 0) return '';
    return fmtDuration(Date.now() - t) + ' ago';
  }

  function fmtRate(v) {
    if (v === null || v === undefined) return '—';
    return v >= 10 ? v.toFixed(0) + '/s' : v.toFixed(2) + '/s';
  }

  const badge = (state) => el('span', { class: 'badge state-' + (states.includes(state) ? state : 'other') }, state);

  function table(headers, rows, attrs) {
    return el('table', attrs || {},
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
      el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: headers.length, class: 'muted' }, 'none'))));
  }

  function dl(pairs) {
    return el('dl', {}, pairs.filter((p) => p && p[1] !== undefined && p[1] !== null && p[1] !== '')
      .map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  function show(view, ...nodes) {
    main.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false && n !== ''));
    main.dataset.view = view;
    main.dataset.ready = '1';
  }

  function showError(err) {
    const box = el('p', { class: 'error', role: 'alert' }, 'Error: ' + (err && err.message ? err.message : String(err)));
    main.replaceChildren(box);
    main.dataset.ready = '1';
  }

  // ---- API ---------------------------------------------------------------

  async function api(path, opts) {
    const o = opts || {};
    const res = await fetch(path, {
      method: o.method || 'GET',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: Object.assign({ Accept: 'application/json' }, o.headers || {}),
      body: o.body,
    });
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    if (!res.ok) {
      const err = new Error((data && data.error) || ('HTTP ' + res.status));
      err.status = res.status;
      err.code = data && data.code;
      throw err;
    }
    return data;
  }

  async function resolve(queue, id, decision, note) {
    for (let i = 0; i < 2; i++) {
      if (!csrfToken) csrfToken = (await api('api/csrf')).token;
      try {
        return await api('api/jobs/' + enc(queue) + '/' + enc(id) + '/resolve', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrfToken },
          body: JSON.stringify({ decision, note }),
        });
      } catch (err) {
        if (err.code === 'csrf' && i === 0) { csrfToken = null; continue; }
        throw err;
      }
    }
    throw new Error('CSRF token refused');
  }

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
        try {
          const res = await resolve(job.queue, job.id, d, note.value);
          status.textContent = 'Resolved: job is now ' + res.job.state + '.';
          setTimeout(render, 300);
        } catch (err) {
          status.textContent = 'Failed: ' + err.message;
          buttons.forEach((b) => { b.disabled = false; });
        }
      },
    }, decisionLabels[d] || d));
    return el('div', { class: 'resolve', 'data-resolve': job.id }, note, buttons, status);
  }

  function historyDetails(e) {
    const skip = new Set(['event', 'at']);
    return Object.entries(e).filter(([k, v]) => !skip.has(k) && v !== '' && v !== 0 && v !== null && v !== undefined)
      .map(([k, v]) => k + '=' + v).join('  ');
  }

  function historyTable(history) {
    return table(['Time', 'Event', 'Details'], (history || []).map((e) => el('tr', {},
      el('td', { class: 'nowrap' }, fmtTime(e.at)),
      el('td', {}, e.event),
      el('td', { class: 'details' }, historyDetails(e)))), { class: 'history' });
  }

  // ---- pages -------------------------------------------------------------

  async function overviewPage(my) {
    const ov = await api('api/overview');
    if (my !== seq) return;
    const rc = ov.reconciler || {};
    let recNode;
    const lastScan = rc.last_scan ? fmtTime(rc.last_scan) + ' (' + fmtDuration(rc.last_scan_age_ms || 0) + ' ago)' : 'never';
    if (rc.present) {
      const stale = rc.last_scan_age_ms === undefined || rc.last_scan_age_ms > 60000;
      recNode = el('p', { class: stale ? 'warn' : '', id: 'reconciler' },
        'Reconciler leader ', el('strong', { class: 'mono' }, rc.leader),
        ' (token ', el('span', { class: 'mono' }, rc.token || '—'), ') · last scan ', lastScan,
        ' · expired ', String(rc.expired), ', resolved ', String(rc.resolved),
        stale ? ' · no recent scan: is the leader healthy?' : '');
    } else {
      recNode = el('p', { class: 'warn', id: 'reconciler' },
        'Reconciler: no leader. Expired leases are not detected and uncertain jobs are not reconciled.',
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
      return el('tr', { 'data-queue': q.name },
        el('th', { scope: 'row', class: 'mono' }, q.name, paused ? ' ' : '', paused),
        states.map((s) => {
          const n = (q.counts || {})[s] || 0;
          const cls = 'count' + (n > 0 && (s === 'uncertain' || s === 'review' || s === 'dead') ? ' warn' : '');
          return el('td', { class: cls, 'data-queue': q.name, 'data-state': s },
            el('a', { href: '#/jobs/' + enc(q.name) + '/' + s }, String(n)));
        }),
        el('td', { class: 'num', title: tp ? 'over the last ' + tp.window_seconds.toFixed(0) + 's' : 'measuring' },
          fmtRate(tp && tp.succeeded_per_sec)),
        el('td', { class: 'num' }, fmtRate(tp && tp.attempted_per_sec)),
        el('td', { class: 'num' + (q.fenced_rejections > 0 ? ' warn' : ''), title: fencedTitle },
          el('a', { href: '#/events/fenced' }, String(q.fenced_rejections))),
        el('td', { class: 'num', title: dedupTitle },
          el('a', { href: '#/events/deduplicated' }, String(q.deduplicated))));
    });
    const totals = el('p', { class: 'totals' }, states.map((s) => [badge(s), ' ', String((ov.totals || {})[s] || 0), '  ']));
    const pausedQueues = ov.queues.filter((q) => q.paused);
    const pausedNode = pausedQueues.length ? el('p', { class: 'warn', id: 'paused' },
      'Paused (no new attempts start; running ones finish; enqueues are accepted): ',
      pausedQueues.map((q, i) => [i ? '; ' : '', el('strong', { class: 'mono' }, q.name),
        ' by ' + q.paused.actor + ' ' + ago(q.paused.at) + (q.paused.note ? ' (' + q.paused.note + ')' : '')])) : '';
    show('overview',
      el('h1', {}, 'Overview ', el('small', { class: 'muted' }, 'namespace ', ov.namespace, ' · Redis time ', fmtTime(ov.server_time))),
      recNode,
      pausedNode,
      totals,
      table(['Queue', ...states, 'succeeded/s', 'attempts/s', 'fenced', 'deduplicated'], rows, { id: 'queues' }),
      el('p', { class: 'muted' }, 'Counts are the ledger\'s state indexes; rates are measured by this dashboard between refreshes; fenced and deduplicated are totals since the queue was created.'));
    schedule(5000);
  }

  async function jobsPage(my, queue, state, offset) {
    const limit = 50;
    const data = await api('api/jobs?queue=' + enc(queue) + '&state=' + enc(state) + '&offset=' + offset + '&limit=' + limit);
    if (my !== seq) return;
    const rows = data.jobs.map((j) => el('tr', {},
      el('td', {}, jobLink(j.queue, j.id)),
      el('td', {}, j.kind),
      el('td', { class: 'mono' }, j.operation_id),
      el('td', { class: 'num' }, String(j.attempts)),
      el('td', { class: 'nowrap' }, fmtTime(j.updated)),
      el('td', {}, j.reason || ''),
      el('td', { class: 'error-text' }, j.error || '')));
    const pager = el('p', { class: 'pager' },
      offset > 0 ? el('a', { href: '#/jobs/' + enc(queue) + '/' + enc(state) + '?offset=' + Math.max(0, offset - limit) }, '← newer') : '',
      ' ', String(offset + 1) + '–' + String(offset + data.jobs.length) + ' of ' + data.total, ' ',
      offset + data.jobs.length < data.total ? el('a', { href: '#/jobs/' + enc(queue) + '/' + enc(state) + '?offset=' + (offset + limit) }, 'older →') : '');
    show('jobs', el('h1', {}, badge(state), ' jobs in ', el('span', { class: 'mono' }, queue)),
      table(['Job', 'Kind', 'Operation', 'Attempts', 'Updated', 'Reason', 'Error'], rows, { id: 'jobs' }), pager);
  }

  async function stuckPage(my) {
    const data = await api('api/stuck');
    if (my !== seq) return;
    const rows = data.jobs.map((j) => el('tr', {},
      el('td', { class: 'mono' }, j.queue),
      el('td', {}, jobLink(j.queue, j.id)),
      el('td', {}, j.kind),
      el('td', { class: 'mono' }, j.owner || ''),
      el('td', { class: 'mono' }, j.token),
      el('td', { class: 'nowrap' }, fmtTime(j.deadline)),
      el('td', { class: j.overdue_ms >= 0 ? 'warn' : '' },
        j.overdue_ms >= 0 ? fmtDuration(j.overdue_ms) + ' overdue' : 'due in ' + fmtDuration(j.overdue_ms))));
    show('stuck',
      el('h1', {}, 'Stuck jobs'),
      el('p', { class: 'muted' }, 'Running jobs whose lease deadline has passed or is within ' + fmtDuration(data.margin_ms) +
        ' (Redis time ' + fmtTime(data.server_time) + '). A live attempt renews its lease well before that; the reconciler moves an expired one to uncertain.'),
      table(['Queue', 'Job', 'Kind', 'Owner', 'Token', 'Lease deadline', 'Status'], rows, { id: 'stuck' }));
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
      el('p', { class: 'muted' }, 'Uncertain jobs may or may not have applied their side effect; the reconciler asks their worker. Jobs it cannot decide wait here for an operator.'),
      section('Waiting for an operator', 'review', review, 'No job waits for review.'),
      section('Uncertain', 'uncertain', uncertain, 'No uncertain job.'));
  }

  async function eventsPage(my, type) {
    const t = type === 'fenced' || type === 'operator' ? type : 'deduplicated';
    const data = await api('api/events?type=' + t + '&limit=200');
    if (my !== seq) return;
    const rows = data.events.map((e) => el('tr', {},
      el('td', { class: 'nowrap' }, fmtTime(e.at)),
      el('td', { class: 'mono' }, e.queue),
      el('td', {}, t === 'operator' ? e.type : e.stage),
      el('td', {}, e.job ? jobLink(e.queue, e.job) : '—'),
      t === 'deduplicated'
        ? el('td', { class: 'mono' }, e.op ? 'operation ' + e.op : 'due again after it finished')
        : t === 'fenced'
          ? el('td', { class: 'mono' }, 'token ' + (e.token || '?') + ' < current ' + (e.current || '?'))
          : el('td', {}, (e.actor || '') + (e.note ? ': ' + e.note : ''))));
    const tabs = el('p', { class: 'tabs' },
      el('a', { href: '#/events/deduplicated', class: t === 'deduplicated' ? 'active' : '' }, 'Deduplicated'), ' · ',
      el('a', { href: '#/events/fenced', class: t === 'fenced' ? 'active' : '' }, 'Fenced rejections'), ' · ',
      el('a', { href: '#/events/operator', class: t === 'operator' ? 'active' : '' }, 'Operator actions'));
    const titles = { deduplicated: 'Deduplicated deliveries', fenced: 'Fenced rejections', operator: 'Operator actions' };
    const intros = {
      deduplicated: 'Enqueues of an operation id already known (the caller got the original job) and jobs found due again after they finished (their handler did not run). Each links to the original job.',
      fenced: 'Writes refused because they carried a token older than the job\'s current one.',
      operator: 'Cancellations, pauses and resumptions, with who and why (a cancellation\'s note is in the job\'s history).',
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
    const attempts = table(['#', 'Token', 'Fence', 'Owner', 'Started', 'Ended', 'Outcome', 'Error / reason'], d.attempts.map((a) => el('tr', {},
      el('td', { class: 'num' }, String(a.attempt)),
      el('td', { class: 'mono' }, a.token),
      el('td', { class: 'mono' }, a.fence || ''),
      el('td', { class: 'mono' }, a.owner || ''),
      el('td', { class: 'nowrap' }, fmtTime(a.started)),
      el('td', { class: 'nowrap' }, fmtTime(a.ended)),
      el('td', {}, badge(a.outcome)),
      el('td', {},
        a.error ? el('pre', { class: 'error-text' }, a.error) : '',
        a.reason ? el('div', {}, a.reason) : '',
        (a.fenced || []).map((f) => el('div', { class: 'warn' }, 'fenced ' + f.stage + ' at ' + fmtTime(f.at) + (f.outcome ? ' (wanted ' + f.outcome + ')' : '')))))), { id: 'attempts' });
    let args;
    try { args = JSON.stringify(j.args, null, 2); } catch (_) { args = String(j.args); }
    show('job',
      el('h1', {}, 'Job ', el('span', { class: 'mono', id: 'job-id' }, j.id), ' ', badge(j.state)),
      dl([
        ['Queue', j.queue], ['Kind', j.kind], ['Operation id', el('span', { class: 'mono' }, j.operation_id)],
        ['Resource', j.resource], ['Token', j.token],
        ['Fence', j.fence ? el('span', { class: 'mono', title: 'the resource lease\'s token its side effects carried' }, j.fence) : ''],
        ['Cancel requested', j.cancel_requested_by ? el('span', { class: 'warn', id: 'job-cancel' },
          'by ' + j.cancel_requested_by + (j.state === 'running' ? ': the attempt is asked to stop; its outcome is still committed by its token' : '')) : ''],
        [j.state === 'running' ? 'Owner' : 'Last owner', j.owner],
        ['Lease deadline', j.state === 'running' ? fmtTime(j.deadline) : ''],
        ['Attempts', String(j.attempts) + ' (max retries ' + j.max_retries + ', runs ' + j.runs + ')'],
        ['Created', fmtTime(j.created)], ['Updated', fmtTime(j.updated)], ['Finished', j.finished ? fmtTime(j.finished) : ''],
        ['Uncertain since', j.uncertain_since ? fmtTime(j.uncertain_since) : ''],
        ['Reconcile tries', j.reconcile_tries ? String(j.reconcile_tries) : ''],
        ['Reason', j.reason ? el('span', { id: 'job-reason' }, j.reason) : ''],
        ['Error', j.error ? el('pre', { class: 'error-text', id: 'job-error' }, j.error) : ''],
      ]),
      resolveForm(j, d.decisions),
      el('h2', {}, 'Args ', el('small', { class: 'muted' }, '(sensitive fields redacted)')),
      el('pre', { class: 'args', id: 'job-args' }, args),
      el('h2', {}, 'Attempts'), attempts,
      el('h2', {}, 'History'), historyTable(d.history));
  }

  async function searchPage(my, text) {
    document.getElementById('search-q').value = text;
    if (!text) {
      show('search', el('h1', {}, 'Search'), el('p', { class: 'muted' }, 'Enter a job id or an operation id above.'));
      return;
    }
    const data = await api('api/search?q=' + enc(text));
    if (my !== seq) return;
    const rows = data.matches.map((m) => el('tr', {},
      el('td', {}, m.by === 'job_id' ? 'job id' : 'operation id'),
      el('td', {}, jobLink(m.job.queue, m.job.id)),
      el('td', { class: 'mono' }, m.job.queue),
      el('td', {}, m.job.kind),
      el('td', {}, badge(m.job.state))));
    show('search', el('h1', {}, 'Search: ', el('span', { class: 'mono' }, text)),
      data.matches.length ? table(['Matched by', 'Job', 'Queue', 'Kind', 'State'], rows, { id: 'results' })
        : el('p', { class: 'muted', id: 'no-results' }, 'No job has that id or operation id (finished jobs are kept for the retention period).'));
  }

  // ---- routing -----------------------------------------------------------

  function schedule(ms) {
    clearTimeout(timer);
    const my = seq;
    timer = setTimeout(() => { if (my === seq && !document.hidden) render(true); else if (my === seq) schedule(ms); }, ms);
  }

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
    const my = ++seq;
    const { parts, params } = parseRoute();
    const name = parts[0] || '';
    document.querySelectorAll('nav a').forEach((a) => {
      a.classList.toggle('active', a.dataset.nav === (name || 'overview'));
    });
    if (!refresh) main.dataset.ready = '0';
    try {
      switch (name) {
        case '': await overviewPage(my); break;
        case 'stuck': await stuckPage(my); break;
        case 'attention': await attentionPage(my); break;
        case 'events': await eventsPage(my, parts[1]); break;
        case 'jobs': await jobsPage(my, parts[1] || '', parts[2] || '', Math.max(0, parseInt(params.get('offset') || '0', 10) || 0)); break;
        case 'job': await jobPage(my, parts[1] || '', parts[2] || ''); break;
        case 'search': await searchPage(my, parts.slice(1).join('/')); break;
        default: show('notfound', el('h1', {}, 'Not found'), el('p', {}, el('a', { href: '#/' }, 'Back to the overview')));
      }
    } catch (err) {
      if (my === seq) {
        showError(err);
        if (name === '' || name === 'stuck') schedule(10000);
      }
    }
  }

  document.getElementById('search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = document.getElementById('search-q').value.trim();
    location.hash = '#/search/' + enc(q);
  });
  window.addEventListener('hashchange', () => render(false));
  document.addEventListener('visibilitychange', () => { if (!document.hidden && (parseRoute().parts[0] || '') === '') render(true); });

  loadSession().finally(() => render(false));
})();
