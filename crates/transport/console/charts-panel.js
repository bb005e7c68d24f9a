// The metrics tab: `/metrics` scraped every two seconds while signed in (so the charts have
// a history when the tab opens), and a chart per question an operator asks first. Most of
// `/metrics` counts the whole server, and those charts say `server-wide`; the open database
// has its own numbers only in the lists of the busiest databases
// (`hearth_top_database_*`), charted under its name when it is on them.

import { LineChart } from './charts.js';
import { intervalQuantile, parsePrometheus, rate, total } from './metrics.js';
import { HttpError } from './api.js';

/** Time between scrapes. */
const SCRAPE_EVERY_MS = 2000;

/** Time between attempts while the server serves no `/metrics` on this port. */
const RETRY_EVERY_MS = 15000;

const ms = (seconds) => (seconds === null ? null : seconds * 1000);

/** A chart of a counter's rate between scrapes. */
function perSecond(id, title, counter) {
  return {
    id,
    title,
    unit: 'per second',
    series: [id],
    values: (then, now, seconds) => [rate(then, now, counter, seconds)],
  };
}

/** A chart of a latency histogram's p50 and p99 over each interval, in milliseconds. */
function latency(id, title, histogram) {
  return {
    id,
    title,
    unit: 'ms',
    series: ['p50', 'p99'],
    values: (then, now) => [0.5, 0.99].map((q) => ms(intervalQuantile(then, now, histogram, q))),
  };
}

/** What the server-wide charts are labelled with. */
export const SERVER_WIDE = 'server-wide';

/** How many databases each `hearth_top_database_*` list holds (docs/metrics.md). */
const TOP_DATABASES = 10;

/** Each server-wide chart: its series from the previous scrape, this one, and the seconds between. */
const CHARTS = [
  {
    id: 'connections',
    title: 'Open connections',
    unit: 'now',
    series: ['WebSocket', 'event streams'],
    values: (_, now) => [total(now, 'hearth_websocket_connections'), total(now, 'hearth_event_streams')],
  },
  perSecond('writes', 'Writes', 'hearth_writes_total'),
  latency('ack', 'Write to acknowledgement', 'hearth_write_ack_seconds'),
  perSecond('pushes', 'Pushes', 'hearth_pushes_total'),
  latency('sync', 'Log sync', 'hearth_log_sync_seconds'),
];

/** The charts of the open database, from the lists of the busiest databases. */
const DATABASE_CHARTS = [
  {
    id: 'database-clients',
    title: 'Open clients',
    unit: 'now',
    series: ['clients'],
    metric: 'hearth_top_database_clients',
    values: (_, now, __, ns) => [total(now, 'hearth_top_database_clients', { database: ns })],
  },
  {
    id: 'database-writes',
    title: 'Writes',
    unit: 'per second',
    series: ['writes'],
    metric: 'hearth_top_database_writes_total',
    values: (then, now, seconds, ns) => [rate(then, now, 'hearth_top_database_writes_total', seconds, { database: ns })],
  },
];

export class MetricsPanel {
  /**
   * @param {HTMLElement} element where the charts go
   * @param {HTMLElement} note where problems are told
   * @param {HTMLElement} scope where what the charts count is told
   * @param {{api: () => import('./api.js').Api, ns: () => string | null}} context
   */
  constructor(element, note, scope, context) {
    this.note = note;
    this.scope = scope;
    this.context = context;
    this.charts = CHARTS.map((spec) => ({ spec, chart: new LineChart(element, spec, SERVER_WIDE) }));
    this.databaseCharts = DATABASE_CHARTS.map((spec) => ({ spec, chart: new LineChart(element, spec, '') }));
    this.ns = undefined; // the database the database charts count
    this.timer = 0;
    this.previous = null;
    this.running = false;
    this.follow();
  }

  start() {
    this.stop();
    this.running = true;
    this.scrape();
  }

  stop() {
    this.running = false;
    clearTimeout(this.timer);
    this.previous = null;
  }

  /** Canvases drawn while hidden have no size; draw again once shown. */
  setVisible(visible) {
    this.follow();
    if (visible) for (const { chart } of [...this.charts, ...this.databaseCharts]) chart.draw();
  }

  /** Points the database charts at the open database (their history was another's). */
  follow() {
    const ns = this.context.ns();
    if (ns === this.ns) return;
    this.ns = ns;
    for (const { chart } of this.databaseCharts) {
      chart.figure.hidden = !ns;
      chart.setScope(ns ? `database ${ns}` : '');
      chart.setNote('');
      chart.clear();
    }
    this.scope.textContent = ns
      ? `Charts marked server-wide count every database of this server, not ${ns} alone; ` +
        `the charts marked database ${ns} count it alone, while it is among the ${TOP_DATABASES} ` +
        'busiest databases /metrics lists.'
      : 'Every chart is server-wide: it counts every database of this server. Open a database to chart it alone too.';
  }

  async scrape() {
    let wait = SCRAPE_EVERY_MS;
    try {
      const text = await this.context.api().metrics();
      const now = { at: performance.now(), samples: parsePrometheus(text) };
      const then = this.previous;
      const seconds = then ? (now.at - then.at) / 1000 : 0;
      const at = Date.now();
      for (const { spec, chart } of this.charts) {
        chart.push(spec.values(then && then.samples, now.samples, seconds), at);
      }
      this.follow();
      if (this.ns) {
        for (const { spec, chart } of this.databaseCharts) {
          const values = spec.values(then && then.samples, now.samples, seconds, this.ns);
          chart.push(values, at);
          const listed = total(now.samples, spec.metric, { database: this.ns }) !== null;
          chart.setNote(
            listed ? '' : `${this.ns} is not among the ${TOP_DATABASES} busiest databases in ${spec.metric} now: no number for it.`,
          );
        }
      }
      this.previous = now;
      this.note.textContent = '';
    } catch (error) {
      this.previous = null;
      if (error instanceof HttpError && error.status === 404) {
        this.note.textContent =
          'This server does not serve /metrics on this port (it may use --metrics-listen).';
        wait = RETRY_EVERY_MS;
      } else {
        this.note.textContent = `/metrics could not be read: ${error.message}`;
      }
    }
    if (this.running) this.timer = setTimeout(() => this.scrape(), wait);
  }
}
