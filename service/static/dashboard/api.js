// Calls to the kpca-stream API from the dashboard: the API key, errors in the service's shape, and a
// server-sent events reader built on fetch (EventSource cannot send an Authorization header).

const KEY_STORE = "kpca-api-key";
const keyListeners = [];

export function apiKey() {
  return sessionStorage.getItem(KEY_STORE) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORE, key);
  else sessionStorage.removeItem(KEY_STORE);
}

// fn(error) is called whenever a call answers 401 (the page then asks for a key)
export function onKeyNeeded(fn) {
  keyListeners.push(fn);
}

function headers(extra) {
  const key = apiKey();
  return Object.assign(key ? { Authorization: "Bearer " + key } : {}, extra || {});
}

// An API answer other than 2xx: status, and the service's {"error": {code, message, field}} when it sent one.
export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : "HTTP " + status);
    this.status = status;
    this.code = error ? error.code : null;
    this.field = error ? error.field : null;
  }

  // the error as the service worded it: code, field and message, verbatim
  describe() {
    const parts = ["HTTP " + this.status];
    if (this.code) parts.push(this.code);
    if (this.field) parts.push("field " + this.field);
    return parts.join(", ") + ": " + this.message;
  }
}

async function failure(response) {
  let error = null;
  try {
    const body = await response.json();
    error = body && body.error ? body.error : null;
  } catch (_) {
    error = null;
  }
  const failed = new ApiError(response.status, error);
  if (response.status === 401) keyListeners.forEach((fn) => fn(failed));
  return failed;
}

// fetch(path) with the key; the Response when 2xx, else throws ApiError
export async function call(path, options) {
  options = options || {};
  const response = await fetch(path, Object.assign({}, options, { headers: headers(options.headers) }));
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJson(path) {
  return (await call(path)).json();
}

// POST (or PUT with method) a JSON body; the decoded answer
export async function sendJson(path, body, method) {
  const response = await call(path, {
    method: method || "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body === undefined ? {} : body),
  });
  return response.status === 204 ? null : response.json();
}

// Every page of a paginated list (limit / cursor / next_cursor): the concatenated entries of `field`.
export async function listAll(path, field, limit) {
  const entries = [];
  let cursor = null;
  for (let pages = 0; pages < 100; pages++) {
    const query = "?limit=" + (limit || 200) + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "");
    const page = await getJson(path + query);
    entries.push(...page[field]);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return entries;
}

// Split server-sent events text into {event, data, id}; returns [events, rest not yet complete].
export function parseEvents(text) {
  const events = [];
  const blocks = text.replace(/\r\n?/g, "\n").split("\n\n");
  const rest = blocks.pop();
  for (const block of blocks) {
    const event = { event: "message", data: "", id: null };
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event.event = value;
      else if (field === "data") data.push(value);
      else if (field === "id") event.id = value;
    }
    if (data.length) {
      event.data = data.join("\n");
      events.push(event);
    }
  }
  return [events, rest];
}

// Read `path`'s event stream until an `end` event or until `signal` aborts; onEvent({event, data, id})
// gets data decoded from JSON. A stream cut without `end` is reopened after a second with Last-Event-ID
// (the last pass seen), so no pass is lost or repeated.
export async function streamEvents(path, onEvent, signal) {
  let lastId = null;
  while (!signal.aborted) {
    let ended = false;
    try {
      const extra = { Accept: "text/event-stream" };
      if (lastId !== null) extra["Last-Event-ID"] = lastId;
      const response = await call(path, { headers: extra, signal, cache: "no-store" });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        const [events, rest] = parseEvents(buffer);
        buffer = rest;
        for (const event of events) {
          if (event.id !== null) lastId = event.id;
          let data = event.data;
          try {
            data = JSON.parse(event.data);
          } catch (_) {
            // not JSON: handed over as text
          }
          onEvent({ event: event.event, data, id: event.id });
          if (event.event === "end") ended = true;
        }
        if (ended) {
          reader.cancel().catch(() => {});
          return;
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError) throw error; // 401, 404...: reopening would not help
    }
    if (ended) return;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
