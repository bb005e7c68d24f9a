// The metrics tab: `/metrics` scraped every two seconds while signed in (so the charts have
// a history when the tab opens), and a chart per question an operator asks first.

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

/** Each chart: its series from the previous scrape, this one, and the seconds between. */
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

export class MetricsPanel {
  /**
   * @param {HTMLElement} element where the charts go
   * @param {HTMLElement} note where problems are told
   * @param {{api: () => import('./api.js').Api}} context
   */
  constructor(element, note, context) {
    this.note = note;
    this.context = context;
    this.charts = CHARTS.map((spec) => ({ spec, chart: new LineChart(element, spec) }));
    this.timer = 0;
    this.previous = null;
    this.running = false;
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
    if (visible) for (const { chart } of this.charts) chart.draw();
  }

  async scrape() {
    let wait = SCRAPE_EVERY_MS;
    try {
      const text = await this.context.api().metrics();
      const now = { at: performance.now(), samples: parsePrometheus(text) };
      const then = this.previous;
      const seconds = then ? (now.at - then.at) / 1000 : 0;
      for (const { spec, chart } of this.charts) {
        chart.push(spec.values(then && then.samples, now.samples, seconds));
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
