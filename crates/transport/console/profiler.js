// The profiler tab: the open database's operations while it runs (the stream of
// `/.settings/profile.json`, docs/profiler.md), summed by operation and path pattern, with
// the queries no `.indexOn` serves and the rule that would.

/** Children of one location past which their keys are shown as one `$key` pattern. */
const COLLAPSE_AFTER = 25;

/** Time between redraws while records arrive. */
const DRAW_EVERY_MS = 500;

/** Records kept (the oldest go): a profiler left running must not grow without bound. */
const MAX_RECORDS = 100_000;

/**
 * Paths as patterns: at each depth, where one location has more than COLLAPSE_AFTER distinct
 * children among the paths, its children are named `$key`.
 */
export function patterns(paths) {
  let current = paths.map((keys) => [...keys]);
  const depth = Math.max(0, ...current.map((keys) => keys.length));
  for (let level = 0; level < depth; level++) {
    const children = new Map();
    for (const keys of current) {
      if (keys.length <= level) continue;
      const parent = keys.slice(0, level).join('/');
      if (!children.has(parent)) children.set(parent, new Set());
      children.get(parent).add(keys[level]);
    }
    current = current.map((keys) => {
      if (keys.length <= level) return keys;
      const many = children.get(keys.slice(0, level).join('/')).size > COLLAPSE_AFTER;
      return many ? [...keys.slice(0, level), '$key', ...keys.slice(level + 1)] : keys;
    });
  }
  return current.map((keys) => `/${keys.join('/')}`);
}

/** The `.indexOn` a query's index needs, as a rules snippet at its path. */
export function indexRule(path, index) {
  const on = index.join('/');
  const rule = { '.indexOn': [on === '.value' ? '.value' : on] };
  const keys = path.split('/').filter(Boolean);
  const nested = keys.reduceRight((inner, key) => ({ [key]: inner }), rule);
  return JSON.stringify({ rules: nested });
}

/** Sums `records` by operation and path pattern, and lists the unindexed queries. */
export function summarize(records) {
  const shapes = patterns(records.map((record) => record.path || []));
  const rows = new Map();
  const unindexed = new Map();
  records.forEach((record, i) => {
    const key = `${record.name} ${shapes[i]}`;
    const row = rows.get(key) || { name: record.name, path: shapes[i], count: 0, millis: 0, bytes: 0, denied: 0 };
    row.count += 1;
    row.millis += record.millis || 0;
    row.bytes += record.bytes || 0;
    if (record.allowed === false) row.denied += 1;
    rows.set(key, row);
    if (record.unIndexed && record.querySet?.[0]?.index?.path) {
      const index = record.querySet[0].index.path;
      const id = `${shapes[i]} ${index.join('/')}`;
      const query = unindexed.get(id) || { path: shapes[i], index: `/${index.join('/')}`, count: 0, rule: indexRule(shapes[i], index) };
      query.count += 1;
      unindexed.set(id, query);
    }
  });
  const byTime = [...rows.values()].sort((a, b) => b.millis - a.millis || b.count - a.count);
  return { rows: byTime, unindexed: [...unindexed.values()] };
}

function cells(row, values) {
  for (const value of values) {
    const cell = document.createElement('td');
    cell.textContent = String(value);
    row.append(cell);
  }
  return row;
}

export class ProfilerPanel {
  /** `elements`: {start, stop, status, rows, unindexed}; `context`: the console's accessors. */
  constructor(elements, context) {
    this.el = elements;
    this.context = context;
    this.records = [];
    this.controller = null;
    this.timer = 0;
    this.el.start.addEventListener('click', () => this.start());
    this.el.stop.addEventListener('click', () => this.stop());
  }

  async start() {
    const ns = this.context.ns();
    const api = this.context.api();
    if (!ns || !api) return;
    this.stop();
    this.records = [];
    this.draw();
    const controller = new AbortController();
    this.controller = controller;
    this.el.start.disabled = true;
    this.el.stop.disabled = false;
    this.el.status.textContent = `profiling ${ns}…`;
    try {
      const response = await fetch(`/.settings/profile.json?ns=${encodeURIComponent(ns)}`, {
        headers: { authorization: `Bearer ${api.token}`, accept: 'text/event-stream' },
        signal: controller.signal,
        cache: 'no-store',
      });
      if (!response.ok) throw new Error(`the profiler answered ${response.status}`);
      this.el.status.dataset.state = 'running';
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = /^data: (.*)$/m.exec(event)?.[1];
          if (!/^event: log$/m.test(event) || !data) continue;
          this.records.push(JSON.parse(data));
          if (this.records.length > MAX_RECORDS) this.records.shift();
        }
        this.scheduleDraw();
      }
    } catch (error) {
      if (!controller.signal.aborted) this.el.status.textContent = `The profiler stopped: ${error.message}`;
    } finally {
      if (this.controller === controller) this.stopped();
    }
  }

  stop() {
    if (this.controller) this.controller.abort();
    this.stopped();
  }

  stopped() {
    this.controller = null;
    this.el.start.disabled = false;
    this.el.stop.disabled = true;
    delete this.el.status.dataset.state;
    if (this.records.length || /^profiling/.test(this.el.status.textContent)) {
      this.el.status.textContent = `${this.records.length} operations recorded`;
    }
    this.draw();
  }

  scheduleDraw() {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.draw();
    }, DRAW_EVERY_MS);
  }

  draw() {
    const { rows, unindexed } = summarize(this.records);
    if (this.controller) this.el.status.textContent = `profiling ${this.context.ns()}: ${this.records.length} operations`;
    this.el.rows.replaceChildren(
      ...rows.map((row) => cells(document.createElement('tr'), [
        row.name, row.path, row.count, `${(row.millis / row.count).toFixed(3)} ms`, row.bytes, row.denied,
      ])),
    );
    this.el.unindexed.replaceChildren(
      ...unindexed.map((query) => cells(document.createElement('tr'), [query.path, query.index, query.count, query.rule])),
    );
  }
}
