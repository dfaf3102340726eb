// The server's API as the dashboard calls it: the token (session storage only), JSON requests
// with `Authorization: Bearer`, and the event stream read with fetch() (EventSource cannot send
// the header), resumed from the last event seen after a break.

const KEY = 'arbiter.token';

export function token() {
  return sessionStorage.getItem(KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, field, message, retryAfter = false) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfter = retryAfter;  // the server said when to ask again (503 with Retry-After)
  }
}

// How long a read waits, in all, for a server that is not serving yet (503 with Retry-After: it
// is still recovering its state from the store, or is a standby without a leader) or cannot be
// reached, before it gives up.
const READ_RETRY_MS = 60000;

// One call; resolves to the parsed JSON (or text for `text`), rejects with an ApiError carrying
// the server's message. A read (GET) is tried again while the server is not serving, waiting
// longer after each try (at most 5 s, READ_RETRY_MS in all); a change is never repeated, nor a
// 503 without Retry-After (an agent that did not answer for a log: the user sees it at once).
export async function api(method, path, body, options = {}) {
  const end = Date.now() + READ_RETRY_MS;
  for (let wait = 250; ; wait = Math.min(2 * wait, 5000)) {
    try {
      return await apiOnce(method, path, body, options);
    } catch (e) {
      const unavailable = e instanceof ApiError && (e.retryAfter || e.status === 0);
      if (method !== 'GET' || !unavailable || Date.now() + wait > end) throw e;
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}

async function apiOnce(method, path, body, { text = false } = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unavailable', '', `the server cannot be reached (${e.message})`);
  }
  const raw = await res.text();
  if (!res.ok) {
    let err = {};
    try {
      err = JSON.parse(raw).error || {};
    } catch (_) {
      err = { message: raw.slice(0, 200) };
    }
    throw new ApiError(res.status, err.code || String(res.status), err.field || '',
                       err.message || `HTTP ${res.status}`,
                       res.status === 503 && res.headers.has('Retry-After'));
  }
  if (text) return raw;
  return raw ? JSON.parse(raw) : {};
}

// Reads GET /v1/events/stream from `cursor` until stopped, calling onEvent({seq, kind, data})
// for each event and onState('live' | 'reconnecting' | 'offline', why) as the connection goes.
// Reconnects with the last event's seq (?cursor=), waiting longer after each failure (at most
// 10 s). Returns a function that stops it.
export function streamEvents(cursor, onEvent, onState) {
  let stopped = false;
  let controller = null;
  let delay = 500;
  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      try {
        const res = await fetch(`/v1/events/stream?cursor=${cursor}`, {
          headers: { Authorization: `Bearer ${token()}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          credentials: 'omit',
          signal: controller.signal,
        });
        if (res.status === 401) {
          onState('offline', 'the token was refused');
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onState('live', '');
        delay = 500;
        const reader = res.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = parseFrame(frame);
            if (!event) continue;
            if (event.kind === 'dropped') {
              // Too slow for the server's window: go on from the cursor it names.
              if (event.data && typeof event.data.cursor === 'number') cursor = event.data.cursor;
              continue;
            }
            if (event.seq) cursor = event.seq;
            onEvent(event);
          }
        }
      } catch (e) {
        if (stopped) return;
        onState('reconnecting', e.message);
      }
      if (stopped) return;
      onState('reconnecting', 'the stream ended');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  };
  run();
  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}

function parseFrame(frame) {
  let seq = 0;
  let kind = 'message';
  const data = [];
  for (const line of frame.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const at = line.indexOf(':');
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? '' : line.slice(at + 1).replace(/^ /, '');
    if (field === 'id') seq = Number(value);
    else if (field === 'event') kind = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  let parsed = null;
  try {
    parsed = JSON.parse(data.join('\n'));
  } catch (_) {
    return null;
  }
  return { seq, kind, data: parsed };
}

// Every event of one job (GET /v1/events?job=N, page after page).
export async function jobEvents(id) {
  const out = [];
  let cursor = 0;
  for (let page = 0; page < 50; ++page) {
    const r = await api('GET', `/v1/events?job=${id}&cursor=${cursor}&limit=1000`);
    out.push(...r.events);
    if (r.cursor === cursor || r.events.length === 0) break;
    cursor = r.cursor;
  }
  return out;
}
