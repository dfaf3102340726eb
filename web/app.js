// The dashboard: sign-in, the four views (cluster, jobs, queues, timeline) and the event stream
// that keeps them current without a reload.
import { api, ApiError, jobEvents, setToken, streamEvents, token } from './api.js';
import { ClusterView, PALETTE } from './cluster.js';
import { drawUsageChart } from './chart.js';

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    // Through the CSSOM: the Content-Security-Policy refuses style attributes.
    else if (k === 'style') e.style.cssText = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
};

const JOB_KINDS_MOVING = new Set(['started', 'evicted', 'requeued', 'retried', 'completed',
  'failed', 'cancelled', 'eviction_signalled', 'priority_changed', 'checkpointed']);
const STOPPING_KINDS = new Set(['evicted', 'requeued', 'retried', 'completed', 'failed',
  'cancelled']);
const TIMELINE_KINDS = new Set(['evicted', 'eviction_signalled', 'requeued', 'retried', 'failed',
  'node_cordoned', 'node_draining', 'node_lost']);

// Figures the browser tests read (window.__arbiter): render and repaint times, readiness.
const perf = { renders: [], repaints: [], mapBytes: 0, ready: false, events: 0 };
window.__arbiter = perf;

const state = {
  me: null,
  tab: 'cluster',
  cluster: null,
  stopStream: null,
  cursor: 0,
  queues: [],
  usage: null,
  selectedQueue: '',
  selectedJob: 0,
  pinned: null,
  timeline: [],
  jobs: [],
};

// ---------------------------------------------------------------------------------------------
// Sign-in

async function signIn(value) {
  setToken(value);
  try {
    state.me = await api('GET', '/v1/whoami');
  } catch (e) {
    setToken('');
    throw e;
  }
  $('signin').hidden = true;
  $('tabs').hidden = false;
  $('who').hidden = false;
  $('identity').textContent = `${state.me.name} (${state.me.role})`;
  document.body.dataset.role = state.me.role;
  await start();
}

function signOut() {
  if (state.stopStream) state.stopStream();
  state.stopStream = null;
  setToken('');
  location.replace('/ui/');
}

function toast(text, error = false) {
  const t = $('toast');
  t.textContent = text;
  t.className = error ? 'toast error' : 'toast';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 6000);
}

// ---------------------------------------------------------------------------------------------
// Start: the cluster map, the event stream, the other views on demand

async function start() {
  state.cluster = new ClusterView($('cluster-canvas'), $('cluster-scroll'), $('cluster-spacer'));
  state.cluster.perf = perf;
  perf.view = state.cluster;
  perf.palette = PALETTE;
  await loadMap();
  state.stopStream = streamEvents(state.cursor, onEvent, onStreamState);
  await Promise.all([loadQueues(), loadTimeline()]);
  fillFilters();
  showTab(location.hash.slice(1) || 'cluster');
  perf.ready = true;
  // A full map now and then: what no event says (a node's agent lost, health) shows too.
  setInterval(() => { loadMap().catch(() => {}); }, 60000);
  setInterval(() => { if (state.tab === 'queues') loadQueues().catch(() => {}); }, 30000);
}

async function loadMap() {
  const t0 = performance.now();
  const text = await api('GET', '/v1/cluster/map', undefined, { text: true });
  const fetched = performance.now();
  perf.mapBytes = text.length;
  const map = JSON.parse(text);
  const drawMs = state.cluster.load(map);
  perf.lastMap = { fetchMs: fetched - t0, parseAndDrawMs: performance.now() - fetched, drawMs };
  if (!state.cursor) state.cursor = map.cursor;
  updateClusterChrome();
}

function updateClusterChrome() {
  $('cluster-summary').textContent = state.cluster.summary();
  const legend = $('legend');
  legend.replaceChildren(...state.cluster.legend().map(([name, colour]) =>
    el('span', { class: 'key' }, el('i', { style: `background:${colour}` }), name)));
  legend.append(el('span', { class: 'key' }, el('i', { class: 'free' }), 'free'),
                el('span', { class: 'key' }, el('i', { class: 'closed' }), 'cordoned / draining'),
                el('span', { class: 'key' }, el('i', { class: 'down' }), 'unhealthy / lost'));
}

function onStreamState(s, why) {
  const live = $('live');
  live.textContent = s === 'live' ? 'live' : s;
  live.className = `live ${s === 'live' ? 'on' : 'off'}`;
  live.title = why || 'the server\'s event stream';
  if (s === 'offline') toast(`Event stream stopped: ${why}`, true);
}

// ---------------------------------------------------------------------------------------------
// Events

const jobInfoCache = new Map();
let prefetching = 0;
async function jobInfo(id) {
  if (jobInfoCache.has(id)) return jobInfoCache.get(id);
  const job = await api('GET', `/v1/jobs/${id}`);
  jobInfoCache.set(id, job);
  if (jobInfoCache.size > 5000) jobInfoCache.delete(jobInfoCache.keys().next().value);
  return job;
}

function onEvent(ev) {
  const t0 = performance.now();
  perf.events += 1;
  const e = ev.data;
  state.cursor = Math.max(state.cursor, ev.seq);
  const view = state.cluster;
  const map = view.map;
  const kind = e.kind;
  if (kind === 'submitted' && prefetching < 16) {
    // Its queue, class and user, fetched now: when it starts, its cells take their colour at
    // once, with no request in between.
    prefetching += 1;
    jobInfo(e.job).catch(() => {}).finally(() => { prefetching -= 1; });
  } else if (kind === 'started' && e.allocation) {
    const runs = view.runsOf(e.allocation);
    const job = { id: e.job, queue: -1, cls: -1, user: '', start: e.time_ms, ckpt: e.time_ms,
      stopping: -1, runs };
    const known = (j) => {
      job.queue = map.queues.indexOf(j.spec.queue);
      job.cls = map.priority_classes.indexOf(j.status.priority_class || j.spec.priority_class);
      job.user = j.spec.user || '';
    };
    const done = (fetched) => {
      const ms = performance.now() - t0;
      perf.repaints.push({ job: e.job, kind, ms, fetched });
      perf.lastRepaintMs = ms;
      updateClusterChrome();
    };
    const cached = jobInfoCache.get(e.job);
    if (cached) known(cached);
    // Placed at once (grey until its queue is known, when it was not yet), so the cells change now.
    view.place(job);
    if (cached) {
      done(false);
    } else {
      jobInfo(e.job).then((j) => {
        known(j);
        view.repaintJob(e.job);
        done(true);
      }).catch(() => {});
    }
  } else if (STOPPING_KINDS.has(kind) && e.job) {
    if (kind === 'completed' || kind === 'failed' || kind === 'cancelled') jobInfoCache.delete(e.job);
    if (view.jobs.has(e.job)) {
      view.remove(e.job);
      perf.repaints.push({ job: e.job, kind, ms: performance.now() - t0 });
      updateClusterChrome();
    }
  } else if (kind === 'eviction_signalled' && view.jobs.has(e.job)) {
    view.jobs.get(e.job).stopping = e.stop_at_ms ?? 1;
    view.repaintJob(e.job);
  } else if (kind === 'checkpointed' && view.jobs.has(e.job)) {
    view.jobs.get(e.job).ckpt = e.time_ms;
  } else if (kind === 'priority_changed' && jobInfoCache.has(e.job)) {
    jobInfoCache.get(e.job).status.priority_class = e.priority_class;
  }
  if (kind === 'priority_changed' && view.jobs.has(e.job)) {
    view.jobs.get(e.job).cls = map.priority_classes.indexOf(e.priority_class);
    view.repaintJob(e.job);
  } else if (kind === 'node_cordoned' || kind === 'node_draining' || kind === 'node_uncordoned') {
    view.setNodeAdmin(e.target, kind === 'node_cordoned' ? 1 : kind === 'node_draining' ? 2 : 0);
  } else if (kind === 'node_lost' || kind === 'node_ready') {
    view.setNodeHealth(e.target, kind === 'node_lost' ? 2 : 0);
  }
  if (TIMELINE_KINDS.has(kind)) {
    state.timeline.unshift(e);
    if (state.timeline.length > 2000) state.timeline.pop();
    if (state.tab === 'timeline') renderTimeline();
  }
  if (e.job && e.job === state.selectedJob) debounce('job', () => showJob(state.selectedJob), 300);
  if (state.tab === 'jobs' && (e.job || JOB_KINDS_MOVING.has(kind))) {
    debounce('jobs', loadJobs, 500);
  }
  if (state.tab === 'queues' && e.job) debounce('queues', loadQueues, 1000);
}

const timers = new Map();
function debounce(key, fn, ms) {
  if (timers.has(key)) return;
  timers.set(key, setTimeout(() => {
    timers.delete(key);
    Promise.resolve(fn()).catch((err) => toast(err.message, true));
  }, ms));
}

// ---------------------------------------------------------------------------------------------
// Tabs

function showTab(tab) {
  if (!['cluster', 'jobs', 'queues', 'timeline'].includes(tab)) tab = 'cluster';
  state.tab = tab;
  for (const b of document.querySelectorAll('#tabs button')) {
    b.classList.toggle('active', b.dataset.tab === tab);
  }
  for (const v of document.querySelectorAll('.view')) v.hidden = v.id !== `view-${tab}`;
  if (location.hash !== `#${tab}`) history.replaceState(null, '', `#${tab}`);
  if (tab === 'cluster' && state.cluster) state.cluster.relayout();
  if (tab === 'jobs') loadJobs().catch((e) => toast(e.message, true));
  if (tab === 'queues') loadQueues().catch((e) => toast(e.message, true));
  if (tab === 'timeline') renderTimeline();
}

// ---------------------------------------------------------------------------------------------
// Cluster: hover and click

function fmtTime(ms) {
  if (ms === undefined || ms === null || ms < 0) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function fmtAgo(ms) {
  if (ms === undefined || ms === null || ms < 0) return '';
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 90) return `${s}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  return `${(s / 3600).toFixed(1)}h ago`;
}

function gpus(milli) {
  return (milli / 1000).toFixed(milli % 1000 ? 2 : 0).replace(/\.?0+$/, (m) => (m.includes('.') ? '' : m));
}

// GPU-seconds as GPU-hours, or GPU-minutes below one hour.
function gpuTime(seconds) {
  if (seconds >= 3600) return `${(seconds / 3600).toFixed(1)} GPU·h`;
  return `${(seconds / 60).toFixed(1)} GPU·min`;
}

function describeDevice(d) {
  const lines = [el('b', {}, d.node), ` ${d.path ? `(${d.path})` : ''}`];
  const flags = [];
  if (d.admin !== 'schedulable') flags.push(d.admin);
  if (d.health !== 'healthy') flags.push(d.health);
  if (flags.length) lines.push(el('span', { class: 'flag' }, ` ${flags.join(', ')}`));
  const out = [el('div', {}, ...lines)];
  if (d.device >= 0) {
    out.push(el('div', {}, `GPU ${d.device}: ${d.type}, NVLink group ${d.nvlink}, ` +
                           `${gpus(d.free_milli)} free`));
    for (const j of d.jobs) {
      out.push(el('div', { class: 'share' },
        el('b', {}, `job ${j.id}`), ` ${gpus(j.milli)} GPU · queue ${j.queue ?? '?'} · class ` +
        `${j.cls ?? '?'} · ${j.user || '?'}`,
        el('br'), `started ${fmtTime(j.start)} (${fmtAgo(j.start)})`,
        el('br'), `last checkpoint ${j.ckpt > j.start ? `${fmtTime(j.ckpt)} (${fmtAgo(j.ckpt)})` : 'none yet'}`,
        j.stopping >= 0 ? el('div', { class: 'flag' }, `evicted: stopping by ${fmtTime(j.stopping)}`) : null));
    }
    if (!d.jobs.length) out.push(el('div', { class: 'free-text' }, 'free'));
  }
  return out;
}

function setupCluster() {
  const canvas = $('cluster-canvas');
  const tip = $('tooltip');
  let pending = null;
  canvas.addEventListener('mousemove', (ev) => {
    pending = ev;
    if (setupCluster.frame) return;
    setupCluster.frame = requestAnimationFrame(() => {
      setupCluster.frame = 0;
      const rect = canvas.getBoundingClientRect();
      const x = pending.clientX - rect.left;
      const y = pending.clientY - rect.top + state.cluster.viewY;
      const hit = state.cluster && state.cluster.hit(x, y);
      if (!hit) {
        tip.hidden = true;
        return;
      }
      tip.replaceChildren(...describeDevice(state.cluster.describe(hit)));
      tip.hidden = false;
      // Beside the pointer, inside the window.
      const left = Math.min(pending.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      const below = pending.clientY + 14 + tip.offsetHeight < window.innerHeight;
      tip.style.left = `${Math.max(4, left)}px`;
      tip.style.top = `${below ? pending.clientY + 14 : Math.max(4, pending.clientY - tip.offsetHeight - 10)}px`;
    });
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  $('cluster-scroll').addEventListener('scroll', () => {
    tip.hidden = true;
    if (setupCluster.scrollFrame) return;
    setupCluster.scrollFrame = requestAnimationFrame(() => {
      setupCluster.scrollFrame = 0;
      if (state.cluster) state.cluster.scrolled();
    });
  }, { passive: true });
  canvas.addEventListener('click', (ev) => {
    const rect = canvas.getBoundingClientRect();
    const hit = state.cluster &&
      state.cluster.hit(ev.clientX - rect.left, ev.clientY - rect.top + state.cluster.viewY);
    if (hit) showDevice(hit);
  });
  $('colour-by').addEventListener('change', (ev) => {
    state.cluster.setColourBy(ev.target.value);
    updateClusterChrome();
  });
}

function showDevice(hit) {
  const d = state.cluster.describe(hit);
  const panel = $('cluster-detail');
  const parts = [el('h3', {}, d.node), ...describeDevice(d)];
  for (const j of d.jobs || []) {
    parts.push(el('button', { type: 'button', onclick: () => { state.selectedJob = j.id; showTab('jobs'); showJob(j.id); } },
                  `Open job ${j.id}`));
  }
  if (state.me.role === 'admin') {
    const actions = el('div', { class: 'actions' });
    const act = (action, label) => el('button', {
      type: 'button', 'data-action': action,
      onclick: async () => {
        try {
          await api('POST', `/v1/nodes/${encodeURIComponent(d.node)}/${action}`, { reason: 'from the dashboard' });
          toast(`${d.node}: ${label}`);
          if (action === 'drain') loadMap();
        } catch (e) { toast(e.message, true); }
      },
    }, label);
    if (d.admin === 'schedulable') actions.append(act('cordon', 'Cordon'), act('drain', 'Drain'));
    else actions.append(act('uncordon', 'Uncordon'), d.admin === 'cordoned' ? act('drain', 'Drain') : '');
    parts.push(el('h4', {}, 'Node'), actions);
  }
  panel.replaceChildren(...parts);
}

// ---------------------------------------------------------------------------------------------
// Jobs

function fillFilters() {
  const q = $('f-queue');
  for (const name of state.cluster.map.queues) q.append(el('option', {}, name));
  const c = $('f-class');
  for (const name of state.cluster.map.priority_classes) c.append(el('option', {}, name));
  for (const id of ['f-queue', 'f-state', 'f-class']) $(id).addEventListener('change', () => loadJobs());
  $('f-user').addEventListener('input', () => debounce('filter', loadJobs, 300));
}

async function loadJobs() {
  const params = new URLSearchParams();
  if ($('f-queue').value) params.set('queue', $('f-queue').value);
  if ($('f-state').value) params.set('state', $('f-state').value);
  if ($('f-user').value.trim()) params.set('user', $('f-user').value.trim());
  params.set('limit', '2000');
  const r = await api('GET', `/v1/jobs?${params}`);
  let jobs = r.jobs;
  const cls = $('f-class').value;
  if (cls) jobs = jobs.filter((j) => (j.status.priority_class || j.spec.priority_class) === cls);
  if (!$('f-state').value) {
    jobs = jobs.filter((j) => ['pending', 'held', 'running'].includes(j.status.state));
  }
  jobs.sort((a, b) => b.id - a.id);
  state.jobs = jobs;
  $('jobs-count').textContent = `${jobs.length} jobs`;
  const rows = jobs.map((j) => {
    const st = j.status.state;
    const where = st === 'running' ? (j.tasks || []).join(' ') : (j.reason || j.status.message || '');
    return el('tr', {
      'data-job': j.id, class: j.id === state.selectedJob ? 'selected' : '',
      onclick: () => showJob(j.id),
    },
    el('td', {}, j.id), el('td', {}, j.spec.name), el('td', {}, j.spec.user || ''),
    el('td', {}, j.spec.queue), el('td', {}, j.status.priority_class || j.spec.priority_class),
    el('td', {}, el('span', { class: `state ${st}` }, st)),
    el('td', { class: 'num' }, gpus(j.gpu_milli || 0)),
    el('td', { class: 'why' }, where));
  });
  $('jobs-table').tBodies[0].replaceChildren(...rows);
}

function mayAct(job, action) {
  const me = state.me;
  if (me.role === 'admin') return true;
  if (me.role !== 'user' || job.spec.user !== me.name) return false;
  return action === 'cancel' || action === 'hold';
}

async function showJob(id) {
  state.selectedJob = id;
  for (const tr of document.querySelectorAll('#jobs-table tr[data-job]')) {
    tr.classList.toggle('selected', Number(tr.dataset.job) === id);
  }
  const panel = $('job-detail');
  let job;
  try {
    job = await api('GET', `/v1/jobs/${id}`);
  } catch (e) {
    panel.replaceChildren(el('p', { class: 'error' }, e.message));
    return;
  }
  const st = job.status.state;
  const parts = [
    el('h3', {}, `Job ${job.id}: ${job.spec.name}`),
    el('p', {}, el('span', { class: `state ${st}` }, st),
       ` · ${job.spec.user || '?'} · queue ${job.spec.queue} · class ` +
       `${job.status.priority_class || job.spec.priority_class} · ${gpus(job.gpu_milli || 0)} GPUs`),
  ];
  if (job.reason) {
    const verdict = job.verdict === 'never'
      ? 'Verdict: never — it cannot run as asked on this cluster; change the request.'
      : job.verdict === 'wait' ? 'Verdict: wait — it runs once the capacity or quota it needs frees.' : '';
    parts.push(el('div', { class: `explain ${job.verdict || ''}`, id: 'job-reason' },
      el('h4', {}, st === 'running' ? 'Stopping' : 'Why it waits (as arbiter explain says)'),
      el('p', {}, job.reason),
      verdict ? el('p', { class: 'verdict' }, verdict) : null,
      job.reserved_start ? el('p', {}, `Reserved to start at ${job.reserved_start}`) : null));
  }
  if (st === 'running') {
    parts.push(el('p', {}, `Running on ${(job.tasks || []).join(', ')} since ${fmtTime(job.status.start_time_ms)}`),
               el('p', {}, `Last checkpoint: ${job.status.last_checkpoint_ms > job.status.start_time_ms ? fmtTime(job.status.last_checkpoint_ms) : 'none yet'}`));
  }
  if (job.status.message) parts.push(el('p', { class: 'why' }, job.status.message));
  const actions = el('div', { class: 'actions' });
  const act = (action, label, method, path) => el('button', {
    type: 'button', 'data-action': action,
    onclick: async () => {
      try {
        await api(method, path);
        toast(`job ${id}: ${label.toLowerCase()} done`);
        showJob(id);
        if (state.tab === 'jobs') loadJobs();
      } catch (e) { toast(e.message, true); }
    },
  }, label);
  const active = ['pending', 'held', 'running'].includes(st);
  if (active && mayAct(job, 'cancel')) actions.append(act('cancel', 'Cancel', 'POST', `/v1/jobs/${id}/cancel`));
  if (st === 'pending' && mayAct(job, 'hold')) actions.append(act('hold', 'Hold', 'POST', `/v1/jobs/${id}/hold`));
  if (st === 'held' && mayAct(job, 'release')) actions.append(act('release', 'Release', 'POST', `/v1/jobs/${id}/release`));
  if (actions.childElementCount) parts.push(actions);
  const events = el('ol', { class: 'events', id: 'job-events' });
  parts.push(el('h4', {}, 'Events'), events);
  const logBox = el('pre', { class: 'log', id: 'job-log', hidden: true });
  parts.push(el('h4', {}, 'Log'), el('button', {
    type: 'button', id: 'job-log-button',
    onclick: async () => {
      logBox.hidden = false;
      logBox.textContent = 'loading…';
      try {
        logBox.textContent = await api('GET', `/v1/jobs/${id}/logs?tail_bytes=65536`, undefined, { text: true }) || '(empty)';
      } catch (e) {
        logBox.textContent = e.message;
      }
    },
  }, 'Show the log (last 64 KiB)'), logBox);
  if (state.selectedJob !== id) return;
  panel.replaceChildren(...parts);
  try {
    const list = await jobEvents(id);
    events.replaceChildren(...list.map((e) => el('li', {},
      el('span', { class: 'time' }, fmtTime(e.time_ms)), ' ', el('b', {}, e.kind.replace('_', ' ')),
      e.actor ? ` by ${e.actor}` : '', e.message ? ` — ${e.message}` : '',
      e.allocation ? ` on ${(e.allocation.tasks || []).map((t) => t.node).filter((v, i, a) => a.indexOf(v) === i).join(', ')}` : '')));
  } catch (e) {
    events.replaceChildren(el('li', { class: 'error' }, e.message));
  }
}

// ---------------------------------------------------------------------------------------------
// Queues

async function loadQueues() {
  const [q, usage, pending] = await Promise.all([
    api('GET', '/v1/queues'),
    api('GET', '/v1/queues/usage'),
    api('GET', '/v1/jobs?state=pending&limit=10000'),
  ]);
  state.queues = q.queues;
  state.usage = usage;
  const pendingGpus = new Map();
  for (const j of pending.jobs) {
    pendingGpus.set(j.spec.queue, (pendingGpus.get(j.spec.queue) || 0) + (j.gpu_milli || 0));
  }
  const byName = new Map(q.queues.map((x) => [x.name, x]));
  const depth = (x) => (x.parent ? depth(byName.get(x.parent)) + 1 : 0);
  // The tree in order: each queue followed by its children.
  const ordered = [];
  const visit = (parent) => {
    for (const x of q.queues.filter((y) => (y.parent || null) === parent)) {
      ordered.push(x);
      visit(x.name);
    }
  };
  visit(null);
  const totalRecent = q.queues.filter((x) => x.leaf).reduce((s, x) => s + (x.recent_gpu_seconds || 0), 0);
  // Lent: what a queue's siblings borrow above their guarantees comes out of the siblings' idle
  // guarantees; each is counted as lending its part, in proportion to its idle guarantee.
  const over = (r) => (r.nominal_milli !== undefined ? Math.max(0, r.usage_milli - r.nominal_milli) : 0);
  const idleOf = (r) => {
    if (r.nominal_milli === undefined) return 0;
    let idle = Math.max(0, r.nominal_milli - r.usage_milli);
    if (r.lending_limit_milli !== undefined && r.lending_limit_milli !== null) idle = Math.min(idle, r.lending_limit_milli);
    return idle;
  };
  const lentOf = (x, r) => {
    const siblings = q.queues.filter((y) => y.parent === x.parent && y.name !== x.name);
    let borrowed = 0;
    let idleAll = idleOf(r);
    for (const y of siblings) {
      const ry = y.resources.find((z) => z.resource === r.resource);
      if (!ry) continue;
      borrowed += over(ry);
      idleAll += idleOf(ry);
    }
    return idleAll ? Math.min(idleOf(r), (borrowed * idleOf(r)) / idleAll) : 0;
  };
  const rows = [];
  for (const x of ordered) {
    const resources = x.resources.length ? x.resources : [{ resource: 'gpu', usage_milli: 0 }];
    const pendingJobs = (x.jobs.pending || 0) + (x.jobs.held || 0);
    resources.forEach((r, k) => {
      const nominal = r.nominal_milli;
      const max = r.max_milli;
      const borrowed = over(r);
      const idle = idleOf(r);
      const lent = x.parent ? lentOf(x, r) : 0;
      const scale = Math.max(r.usage_milli, nominal || 0, max || 0, 1);
      const bar = el('div', { class: 'bar', title: `usage ${gpus(r.usage_milli)}, guarantee ${nominal === undefined ? 'none' : gpus(nominal)}, max ${max === undefined || max === null ? 'none' : gpus(max)}` },
        el('i', { class: borrowed > 0 ? 'use over' : 'use', style: `width:${(100 * r.usage_milli) / scale}%` }),
        nominal !== undefined ? el('b', { class: 'nominal', style: `left:${(100 * nominal) / scale}%` }) : null,
        max !== undefined && max !== null ? el('b', { class: 'max', style: `left:${(100 * max) / scale}%` }) : null);
      rows.push(el('tr', {
        'data-queue': x.name, class: x.name === state.selectedQueue ? 'selected' : '',
        onclick: () => { state.selectedQueue = state.selectedQueue === x.name ? '' : x.name; loadQueues(); },
      },
      el('td', { class: 'qname', style: `padding-left:${0.5 + depth(x) * 1.2}em` }, k === 0 ? x.name : ''),
      el('td', {}, r.resource),
      el('td', {}, bar, el('span', { class: 'figures' },
        `${gpus(r.usage_milli)} / ${nominal === undefined ? '—' : gpus(nominal)} / ${max === undefined || max === null ? '—' : gpus(max)}`)),
      el('td', { class: 'num' }, borrowed ? gpus(borrowed) : ''),
      el('td', { class: 'num', title: 'lent to sibling queues / idle guarantee that may be lent' },
        idle || lent ? `${gpus(Math.round(lent))} / ${gpus(idle)}` : ''),
      el('td', { class: 'num' }, k === 0 && x.leaf ? pendingJobs : ''),
      el('td', { class: 'num' }, k === 0 && x.leaf ? gpus(pendingGpus.get(x.name) || 0) : ''),
      el('td', { class: 'num' }, k === 0 && x.leaf
        ? `${gpuTime(x.recent_gpu_seconds || 0)} (${totalRecent ? Math.round((100 * x.recent_gpu_seconds) / totalRecent) : 0}%)`
        : '')));
    });
  }
  $('queues-table').tBodies[0].replaceChildren(...rows);
  renderChart();
}

function renderChart() {
  const usage = state.usage;
  if (!usage) return;
  const canvas = $('usage-chart');
  const sel = state.selectedQueue;
  let series = [];
  if (sel) {
    const q = usage.queues.find((x) => x.name === sel);
    const info = state.queues.find((x) => x.name === sel);
    $('chart-title').textContent = `${sel}: usage, last hours (GPUs)`;
    Object.entries((q && q.usage_milli) || {}).forEach(([res, values], k) => {
      const colour = PALETTE[k % PALETTE.length];
      series.push({ name: res, colour, values });
      const r = info && info.resources.find((x) => x.resource === res);
      if (r && r.nominal_milli !== undefined) series.push({ name: `${res} guarantee`, colour, dash: [6, 4], flat: r.nominal_milli });
      if (r && r.max_milli !== undefined && r.max_milli !== null) series.push({ name: `${res} max`, colour, dash: [2, 3], flat: r.max_milli });
    });
  } else {
    $('chart-title').textContent = 'Leaf queues: GPUs in use, last hours';
    const leaves = new Set(state.queues.filter((x) => x.leaf).map((x) => x.name));
    usage.queues.filter((x) => leaves.has(x.name)).forEach((q, k) => {
      const i = state.cluster.map.queues.indexOf(q.name);
      series.push({ name: q.name, colour: PALETTE[(i < 0 ? k : i) % PALETTE.length], values: q.usage_milli.gpu || usage.times_ms.map(() => 0) });
    });
  }
  drawUsageChart(canvas, usage.times_ms, series);
  $('chart-legend').replaceChildren(...series.map((s) => el('span', { class: 'key' },
    el('i', { style: `background:${s.colour}`, class: s.dash ? 'dashed' : '' }), s.name)));
}

// ---------------------------------------------------------------------------------------------
// Timeline

async function loadTimeline() {
  const from = Math.max(0, state.cursor - 5000);
  const r = await api('GET', `/v1/events?cursor=${from}&limit=5000`);
  state.timeline = r.events.filter((e) => TIMELINE_KINDS.has(e.kind) && e.seq <= state.cursor).reverse();
}

function renderTimeline() {
  const list = state.timeline;
  const canvas = $('timeline-canvas');
  const width = Math.max(400, canvas.parentElement.clientWidth - 4);
  const dpr = Math.min(2, window.devicePixelRatio || 1);
  canvas.width = width * dpr;
  canvas.height = 90 * dpr;
  canvas.style.width = `${width}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, 90);
  const now = Date.now();
  const oldest = list.length ? Math.min(...list.map((e) => e.time_ms)) : now - 3600e3;
  const span = Math.max(now - oldest, 10 * 60e3);
  const lanes = ['eviction_signalled', 'evicted', 'requeued', 'retried', 'failed', 'node_cordoned', 'node_draining', 'node_lost'];
  const colours = { eviction_signalled: '#f28e2b', evicted: '#e15759', requeued: '#4e79a7', retried: '#9c6ade', failed: '#c92a2a', node_cordoned: '#e08a00', node_draining: '#e08a00', node_lost: '#c92a2a' };
  ctx.font = '10px system-ui, sans-serif';
  ctx.fillStyle = '#667';
  const left = 110;
  lanes.forEach((k, lane) => {
    ctx.fillStyle = colours[k];
    ctx.fillText(k.replace('_', ' '), 4, 11 + lane * 10);
  });
  ctx.fillStyle = '#667';
  ctx.fillText(fmtAgo(now - span) || 'now', left, 88);
  ctx.fillText('now', width - 22, 88);
  ctx.strokeStyle = '#e3e7eb';
  ctx.strokeRect(left - 2.5, 2.5, width - left - 2, 72);
  for (const e of list) {
    const lane = lanes.indexOf(e.kind);
    const x = left + ((e.time_ms - (now - span)) / span) * (width - left - 8);
    ctx.fillStyle = colours[e.kind] || '#333';
    ctx.fillRect(x, 4 + lane * 10, 3, 8);
  }
  const rows = list.slice(0, 500).map((e) => el('tr', { class: `k-${e.kind}` },
    el('td', {}, fmtTime(e.time_ms)), el('td', {}, e.kind.replace('_', ' ')),
    el('td', {}, e.job ? el('a', { href: '#jobs', onclick: () => { state.selectedJob = e.job; setTimeout(() => showJob(e.job)); } }, `job ${e.job}`) : (e.target || '')),
    el('td', {}, e.actor || ''), el('td', {}, e.message || '')));
  $('timeline-table').tBodies[0].replaceChildren(...rows);
}

// ---------------------------------------------------------------------------------------------

function main() {
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const value = $('token').value.trim();
    $('token').value = '';
    $('signin-error').textContent = '';
    try {
      await signIn(value);
    } catch (e) {
      $('signin-error').textContent = e instanceof ApiError && e.status === 401
        ? `Refused: ${e.message}` : e.message;
    }
  });
  $('signout').addEventListener('click', signOut);
  for (const b of document.querySelectorAll('#tabs button')) {
    b.addEventListener('click', () => showTab(b.dataset.tab));
  }
  window.addEventListener('hashchange', () => { if (state.me) showTab(location.hash.slice(1)); });
  setupCluster();
  window.addEventListener('resize', () => debounce('resize', () => {
    if (state.cluster && state.tab === 'cluster') state.cluster.relayout();
  }, 200));
  if (token()) {
    signIn(token()).catch((e) => {
      $('signin-error').textContent = e.message;
    });
  }
}

main();
