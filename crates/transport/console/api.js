// The console's calls to the server: every one carries the admin token as a bearer
// credential, and every endpoint it calls refuses requests without it.

const TOKEN_KEY = 'hearth-console-token';

/** The admin credential a server started with --dev accepts (the emulator's). */
export const DEV_TOKEN = 'owner';

export const savedToken = () => sessionStorage.getItem(TOKEN_KEY);
export const saveToken = (token) => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

/** An answer other than 2xx, with the server's error message. */
export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * A conditional write refused with 412: the value at the path is no longer the one the
 * write was based on. `current` is the value there now (JSON text), `etag` its ETag.
 */
export class StaleError extends Error {
  constructor(path, current, etag) {
    super(`${path} changed since you read it`);
    this.status = 412;
    this.path = path;
    this.current = current;
    this.etag = etag;
  }
}

/** The ETag of an empty location: a write conditional on it only creates. */
export const NULL_ETAG = 'null_etag';

/** `{"error": "..."}` bodies carry the message; anything else is shown as it is. */
function errorMessage(status, text) {
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed.error === 'string') return parsed.error;
  } catch {
    // not JSON
  }
  return text.trim() || `HTTP ${status}`;
}

/** A data path as REST wants it: `/a/b` -> `/a/b.json`, each segment escaped. */
export function restPath(path) {
  const segments = path.split('/').filter(Boolean).map(encodeURIComponent);
  return `/${segments.join('/')}.json`;
}

/** Normalizes a user-typed path to `/a/b` form (`/` for the root). */
export function cleanPath(path) {
  return `/${String(path).split('/').filter(Boolean).join('/')}`;
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  /** The answer's text; `extra` headers are sent too, and `onAnswer` sees the response. */
  async request(method, url, body, contentType = 'application/json', extra = {}, onAnswer = null) {
    const headers = { authorization: `Bearer ${this.token}`, ...extra };
    if (body !== undefined) headers['content-type'] = contentType;
    const response = await fetch(url, { method, headers, body, cache: 'no-store' });
    const text = await response.text();
    if (onAnswer) onAnswer(response, text);
    if (!response.ok) throw new HttpError(response.status, errorMessage(response.status, text));
    return text;
  }

  /** The value at `path` as JSON text, with its ETag: `{text, etag}`. */
  async read(ns, path) {
    let etag = null;
    const text = await this.request(
      'GET',
      `${restPath(path)}?ns=${encodeURIComponent(ns)}`,
      undefined,
      undefined,
      { 'x-firebase-etag': 'true' },
      (response) => {
        etag = response.headers.get('etag');
      },
    );
    return { text, etag };
  }

  /**
   * Writes the JSON text `text` at `path` (`null` deletes) only if the value there still has
   * the ETag `etag`; a changed value throws a StaleError. Answers the new ETag.
   */
  async writeIfUnchanged(ns, path, text, etag) {
    let newEtag = null;
    const method = text === null ? 'DELETE' : 'PUT';
    await this.request(
      method,
      `${restPath(path)}?ns=${encodeURIComponent(ns)}&print=silent`,
      text === null ? undefined : text,
      undefined,
      { 'if-match': etag },
      (response, answer) => {
        newEtag = response.headers.get('etag');
        if (response.status === 412) throw new StaleError(path, answer, newEtag);
      },
    );
    return newEtag;
  }

  /** `[{name, loaded, bytes, clients, shard}]` of every database the server knows. */
  async databases() {
    const text = await this.request('GET', '/.admin/databases');
    return JSON.parse(text).databases;
  }

  /** The value at `path` in export form (priorities kept), as JSON text. */
  exportJson(ns, path) {
    return this.request('GET', `${restPath(path)}?ns=${encodeURIComponent(ns)}&format=export`);
  }

  /** Replaces the value at `path` with the JSON text `text`. */
  importJson(ns, path, text) {
    return this.request('PUT', `${restPath(path)}?ns=${encodeURIComponent(ns)}&print=silent`, text);
  }

  rules(ns) {
    return this.request('GET', `/.settings/rules.json?ns=${encodeURIComponent(ns)}`);
  }

  saveRules(ns, text) {
    return this.request('PUT', `/.settings/rules.json?ns=${encodeURIComponent(ns)}`, text);
  }

  /** `{rulesets: [{id, createdAt, by}], labels: {stable, canary}, releases: [...]}`, oldest first. */
  async rulesets(ns) {
    return JSON.parse(await this.request('GET', `/.settings/rulesets.json?ns=${encodeURIComponent(ns)}`));
  }

  /** One ruleset: `{id, createdAt, by, source}`, the source as it was uploaded. */
  async ruleset(ns, id) {
    const url = `/.settings/rulesets/${encodeURIComponent(id)}.json?ns=${encodeURIComponent(ns)}`;
    return JSON.parse(await this.request('GET', url));
  }

  /** Moves the labels: `{stable, canary}` (canary optional); the stable ruleset is in effect at once. */
  async setRulesetLabels(ns, labels) {
    const url = `/.settings/ruleset_labels.json?ns=${encodeURIComponent(ns)}`;
    return JSON.parse(await this.request('PUT', url, JSON.stringify(labels)));
  }

  /** A setting of the database (`defaultWriteSizeLimit`, `strictTriggerValidation`, `appCheck`, `quotas`, `audit`), as JSON. */
  async setting(ns, name) {
    return JSON.parse(await this.request('GET', `/.settings/${name}.json?ns=${encodeURIComponent(ns)}`));
  }

  /** Sets a setting; answers the value the server now holds. */
  async saveSetting(ns, name, value) {
    const url = `/.settings/${name}.json?ns=${encodeURIComponent(ns)}`;
    return JSON.parse(await this.request('PUT', url, JSON.stringify(value)));
  }

  /**
   * One page of the audit trail, oldest first: `filters` may hold `uid`, `path`, `since` and
   * `until` (ms), `after` (the last seq seen) and `limit`; empty ones are not sent. The
   * server answers JSON lines, one entry each.
   */
  async auditTrail(ns, filters = {}) {
    const query = new URLSearchParams({ ns });
    for (const [name, value] of Object.entries(filters)) {
      if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
    }
    const text = await this.request('GET', `/.settings/auditTrail.json?${query}`);
    return text
      .split('\n')
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line));
  }

  /** Erases every audit entry of `uid`: answers how many went. */
  async eraseAudit(ns, uid) {
    const query = new URLSearchParams({ ns, uid });
    return JSON.parse(await this.request('DELETE', `/.settings/auditTrail.json?${query}`)).erased;
  }

  /**
   * The server's declared triggers (`hearth serve --triggers FILE`), each with its figures and
   * its databases: `[{name, path, event, destination, maxAttempts, taken, delivered, failed,
   * deadLetters, dropped, pending, lagSeconds, databases: [...]}]`; none declared, `[]`.
   */
  async triggers() {
    return JSON.parse(await this.request('GET', '/.admin/triggers')).triggers;
  }

  /** The dead letters of trigger `name`: `[{database, seq, id, attempts, error, deadAt, event}]`. */
  async deadLetters(name) {
    return JSON.parse(await this.request('GET', `/.admin/triggers/${encodeURIComponent(name)}/dead`));
  }

  /** Sends every dead letter of trigger `name` again: `{retried, keptForOtherOwners}`. */
  async retryDeadLetters(name) {
    return JSON.parse(await this.request('POST', `/.admin/triggers/${encodeURIComponent(name)}/retry`));
  }

  /** Drops every dead letter of trigger `name`: answers how many. */
  async dropDeadLetters(name) {
    return JSON.parse(await this.request('DELETE', `/.admin/triggers/${encodeURIComponent(name)}/dead`)).dropped;
  }

  /** The server's triggers declaration, as its triggers file holds it (`{"triggers": {}}` when none). */
  triggersDeclaration() {
    return this.request('GET', '/.admin/triggers/declaration');
  }

  /** Declares the triggers of `text` (a triggers file) in place of the server's: answers how many. */
  async declareTriggers(text) {
    return JSON.parse(await this.request('PUT', '/.admin/triggers/declaration', text)).declared;
  }

  /** Compiles a rules document on the server without installing it. */
  checkRules(text) {
    return this.request('POST', '/_/console/rules-check', text);
  }

  /** The Prometheus text of `/metrics`. */
  metrics() {
    return this.request('GET', '/metrics', undefined);
  }
}
