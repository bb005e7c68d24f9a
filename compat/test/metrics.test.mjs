// GET /metrics after known traffic: the official SDK and REST make N writes, a refused write
// and a listener; the exposition text is parsed by a Prometheus text-format parser
// (parse-prometheus-text-format) and the counts are compared before and after. Also who may
// scrape (admins on the main port), /healthz and /readyz, and --metrics-listen.

import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { onValue, ref, set } from 'firebase/database';
import parsePrometheus from 'parse-prometheus-text-format';
import { useHearth, T } from '../lib/harness.mjs';
import { HearthServer, REPO_DIR, freePort } from '../lib/server.mjs';
import { expectDenied, putRules } from '../lib/rules.mjs';
import { deferred, withTimeout } from '../lib/util.mjs';
import { SseStream } from './rest/rest-client.mjs';

const OWNER = { authorization: 'Bearer owner' };

/** Scrapes `url` and parses the answer: metric name -> the parser's family. */
async function scrape(url, headers = OWNER) {
  const res = await fetch(url, { headers });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const families = new Map(parsePrometheus(text).map((family) => [family.name, family]));
  return { text, families };
}

/** The value of the series of `name` whose labels include `labels` (0 when absent). */
function value(scraped, name, labels = {}) {
  const family = scraped.families.get(name);
  if (!family) return 0;
  const series = family.metrics.find((m) =>
    Object.entries(labels).every(([k, v]) => (m.labels ?? {})[k] === v),
  );
  if (!series) return 0;
  return Number(series.value ?? series.count);
}

function delta(before, after, name, labels) {
  return value(after, name, labels) - value(before, name, labels);
}

describe('metrics', () => {
  const h = useHearth();
  const metricsURL = () => `http://127.0.0.1:${h.port}/metrics`;

  it('counts known SDK and REST traffic', T, async () => {
    const N = 5;
    const ns = h.ns('metrics');
    await putRules(h.server, ns, {
      rules: { '.read': true, room: { '.write': true }, rest: { '.write': true } },
    });
    const rest = (path, init = {}) =>
      fetch(`http://127.0.0.1:${h.port}/${path}.json?ns=${ns}`, init);
    const before = await scrape(metricsURL());

    const [listener, writer] = h.clients(2, ns);
    const first = deferred();
    const all = deferred();
    onValue(listener.ref('room'), (snap) => {
      first.resolve();
      if (Object.keys(snap.val() ?? {}).length === N) all.resolve();
    });
    await withTimeout(first.promise, 10_000, 'the listener is listening');
    for (let i = 0; i < N; i++) await set(writer.ref(`room/m${i}`), i);
    await withTimeout(all.promise, 10_000, 'the listener sees every write');
    await expectDenied(set(writer.ref('locked'), 1), 'a write to a locked path');
    assert.equal((await rest('room')).status, 200);
    assert.equal((await rest('rest', { method: 'PUT', body: '1' })).status, 200);
    assert.equal((await rest('locked', { method: 'PUT', body: '1' })).status, 401);

    const after = await scrape(metricsURL());
    const requests = (transport, kind, outcome) =>
      delta(before, after, 'hearth_requests_total', { transport, kind, outcome });
    assert.equal(requests('websocket', 'put', 'ok'), N);
    assert.equal(requests('websocket', 'put', 'denied'), 1);
    assert.equal(requests('websocket', 'listen', 'ok'), 1);
    assert.equal(requests('rest', 'get', 'ok'), 1);
    assert.equal(requests('rest', 'put', 'ok'), 1);
    assert.equal(requests('rest', 'put', 'denied'), 1);
    assert.equal(delta(before, after, 'hearth_writes_total'), N + 1, 'refused writes are not applied');
    // Every write was acknowledged after its log sync (strict durability).
    assert.equal(delta(before, after, 'hearth_write_ack_seconds'), N + 1);
    assert.ok(delta(before, after, 'hearth_log_sync_seconds') >= 1);
    assert.ok(delta(before, after, 'hearth_log_written_bytes_total') > 0);
    // The listener's first value (null, pushed before the listen's ack), then one push per
    // write: the writes waited for that first value.
    assert.equal(delta(before, after, 'hearth_pushes_total', { transport: 'websocket' }), N + 1);
    assert.ok(delta(before, after, 'hearth_sent_bytes_total', { transport: 'websocket' }) > 0);
    assert.equal(delta(before, after, 'hearth_websocket_connections'), 2);
    assert.equal(value(after, 'hearth_ready'), 1);
    assert.equal(value(after, 'hearth_shards'), 2);

    // Histograms: the +Inf bucket holds every observation.
    const ack = after.families.get('hearth_write_ack_seconds');
    assert.equal(ack.type, 'HISTOGRAM');
    assert.equal(ack.metrics[0].buckets['+Inf'], ack.metrics[0].count);
    // The busiest databases name this one.
    assert.equal(value(after, 'hearth_top_database_clients', { database: ns }), 2);
    assert.equal(value(after, 'hearth_top_database_writes_total', { database: ns }), N + 1);
    const busy = after.families.get('hearth_shard_busy_seconds_total');
    assert.deepEqual(busy.metrics.map((m) => m.labels.shard).sort(), ['0', '1']);
  });

  it('counts event streams and their pushes', T, async () => {
    const ns = h.ns('metrics-sse');
    const url = (path) => `http://127.0.0.1:${h.port}/${path}.json?ns=${ns}`;
    const before = await scrape(metricsURL());
    const stream = new SseStream(url('feed'));
    h.defer(() => stream.close());
    await stream.untilData(1);
    assert.equal((await fetch(url('feed'), { method: 'PUT', body: '"hello"' })).status, 200);
    await stream.untilData(2);
    const after = await scrape(metricsURL());
    assert.equal(delta(before, after, 'hearth_event_streams'), 1);
    assert.equal(delta(before, after, 'hearth_event_streams_opened_total'), 1);
    const opened = { transport: 'rest', kind: 'stream', outcome: 'ok' };
    assert.equal(delta(before, after, 'hearth_requests_total', opened), 1);
    // The stream's first value, then the write.
    assert.equal(delta(before, after, 'hearth_pushes_total', { transport: 'http' }), 2);
    assert.ok(delta(before, after, 'hearth_sent_bytes_total', { transport: 'http' }) > 0);
  });

  it('the sample Grafana dashboard asks only for metrics the server exposes', T, async () => {
    const file = path.join(REPO_DIR, 'deploy', 'grafana', 'hearth-dashboard.json');
    const dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));
    const exprs = dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr));
    const names = new Set(exprs.flatMap((expr) => expr.match(/hearth_[a-z_]+/g) ?? []));
    assert.ok(names.size >= 20, `${names.size} metrics`);
    const { text } = await scrape(metricsURL());
    for (const name of names) {
      const family = name.replace(/_bucket$/, '');
      assert.ok(text.includes(`# TYPE ${family} `), `${name} is not exposed`);
    }
  });

  it('is for admins on the main port; health is for anyone', T, async () => {
    const refused = await fetch(metricsURL());
    assert.equal(refused.status, 401);
    assert.equal(refused.headers.get('www-authenticate'), 'Bearer');
    assert.equal((await fetch(metricsURL(), { headers: { authorization: 'Bearer nope' } })).status, 401);
    for (const path of ['healthz', 'readyz']) {
      const res = await fetch(`http://127.0.0.1:${h.port}/${path}`);
      assert.equal(res.status, 200, path);
      assert.deepEqual(await res.json(), { status: 'ok' });
    }
  });
});

describe('metrics: --metrics-listen', () => {
  it('serves metrics and health there, without a credential, and metrics not on the main port', T, async () => {
    const port = await freePort();
    const server = await HearthServer.start({
      extraArgs: ['--metrics-listen', `127.0.0.1:${port}`, '--body-budget-mib', '1'],
    });
    try {
      const before = await scrape(`http://127.0.0.1:${port}/metrics`, {});
      // A body larger than the whole body budget is refused (413) before it is read.
      const big = await fetch(`http://127.0.0.1:${server.port}/big.json?ns=m`, {
        method: 'PUT',
        body: JSON.stringify('x'.repeat(2 * 1024 * 1024)),
      });
      assert.equal(big.status, 413);
      const scraped = await scrape(`http://127.0.0.1:${port}/metrics`, {});
      assert.equal(delta(before, scraped, 'hearth_http_refused_total', { reason: 'body_too_large' }), 1);
      const tooBig = { transport: 'rest', kind: 'put', outcome: 'too_big' };
      assert.equal(delta(before, scraped, 'hearth_requests_total', tooBig), 1);
      assert.equal(value(scraped, 'hearth_ready'), 1);
      assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
      const main = await fetch(`http://127.0.0.1:${server.port}/metrics`, { headers: OWNER });
      assert.equal(main.status, 404);
      assert.equal((await fetch(`http://127.0.0.1:${server.port}/healthz`)).status, 200);
    } finally {
      await server.stop();
    }
  });
});
