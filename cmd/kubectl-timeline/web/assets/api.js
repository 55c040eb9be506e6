// The page's calls to the plugin's local server. Every path is relative:
// the page's URL begins with its token, so each call carries it.

// ApiError carries a Kubernetes Status: the cluster's own answer (a 403
// names the user, the verb and the resource), or the plugin's.
export class ApiError extends Error {
  constructor(status) {
    super(status.message || `HTTP ${status.code}`);
    this.status = status;
  }
}

function statusOf(code, body, fallback) {
  if (body && body.kind === 'Status') return body;
  return { kind: 'Status', code, reason: '', message: fallback };
}

export async function getJSON(path, params = {}) {
  const res = await fetch(`${path}?${new URLSearchParams(params)}`, { headers: { Accept: 'application/json' } });
  let body = null;
  try {
    body = await res.json();
  } catch {
    // Not JSON: the plain 403 of a missing token, or a dropped server.
  }
  if (!res.ok) throw new ApiError(statusOf(res.status, body, `${res.status} ${res.statusText}`));
  return body;
}

// follow opens the story's watch (server-sent events). onRecord gets each
// new Event version; onEnd(status) is called once when the watch ends, with
// the Status of its failure, or null when the connection dropped. The
// caller reloads the story then, so nothing between is lost: the browser's
// own reconnect would resume from the first cursor, not the last.
export function follow(params, { onOpen, onRecord, onEnd }) {
  const source = new EventSource(`api/watch?${new URLSearchParams(params)}`);
  let ended = false;
  const end = (status) => {
    if (ended) return;
    ended = true;
    source.close();
    onEnd(status);
  };
  source.onopen = () => onOpen();
  source.addEventListener('record', (e) => onRecord(JSON.parse(e.data)));
  source.addEventListener('failure', (e) => end(JSON.parse(e.data)));
  source.onerror = () => end(null);
  return () => {
    ended = true;
    source.close();
  };
}
