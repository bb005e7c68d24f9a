// A small line chart drawn on a canvas: a title, what it counts (the whole server or one
// database), the latest value of each series, a y axis that grows to fit, a time axis of
// the last five minutes labelled with the clock, and a gap where a series had no value.

/** Points kept per chart (at one scrape every 2 s, five minutes). */
export const MAX_POINTS = 150;

/** The time the x axis spans, ending at the latest point. */
export const WINDOW_MS = 5 * 60 * 1000;

/** Time between the labels of the x axis. */
const TICK_MS = 60 * 1000;

/** `HH:MM` of the local clock. */
export function clockLabel(at) {
  const date = new Date(at);
  return `${String(date.getHours()).padStart(2, '0')}:${String(date.getMinutes()).padStart(2, '0')}`;
}

const COLORS = ['#2f7de1', '#e8743b', '#19a979', '#945ecf'];

/** 1, 2 or 5 times a power of ten, at least `value`. */
function niceCeiling(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

export function formatNumber(value) {
  if (value === null || value === undefined) return '–';
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${(value / 1e9).toFixed(1)}G`;
  if (abs >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (abs >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  if (abs >= 10 || Number.isInteger(value)) return value.toFixed(0);
  return value.toPrecision(2);
}

export class LineChart {
  /**
   * @param {HTMLElement} parent
   * @param {{id: string, title: string, unit: string, series: string[]}} spec
   * @param {string} scope what the chart counts: `server-wide`, or a database's name
   */
  constructor(parent, spec, scope) {
    this.spec = spec;
    this.points = []; // [{at: ms since the epoch, values: [value or null per series]}]
    const figure = document.createElement('figure');
    figure.className = 'chart';
    figure.dataset.chart = spec.id;
    const caption = document.createElement('figcaption');
    const heading = document.createElement('span');
    this.scope = document.createElement('span');
    this.scope.className = 'scope-tag';
    this.scope.dataset.testid = 'scope';
    this.title = document.createElement('span');
    this.title.textContent = ` · ${spec.title} (${spec.unit})`;
    heading.append(this.scope, this.title);
    this.legend = document.createElement('span');
    this.legend.className = 'legend';
    caption.append(heading, this.legend);
    this.canvas = document.createElement('canvas');
    this.canvas.width = 360;
    this.canvas.height = 140;
    this.canvas.dataset.points = '0';
    this.canvas.dataset.ticks = '';
    this.note = document.createElement('p');
    this.note.className = 'note';
    this.figure = figure;
    figure.append(caption, this.canvas, this.note);
    parent.append(figure);
    this.setScope(scope);
  }

  /** What the chart counts, shown before its title. */
  setScope(scope) {
    this.scope.textContent = scope;
    this.canvas.setAttribute('aria-label', `${this.spec.title}, ${scope}, the last five minutes`);
  }

  setNote(text) {
    this.note.textContent = text;
  }

  /** Forgets the history (what it counted changed). */
  clear() {
    this.points = [];
    this.draw();
  }

  push(values, at = Date.now()) {
    this.points.push({ at, values });
    while (this.points.length > MAX_POINTS || (this.points.length && this.points[0].at < at - WINDOW_MS)) this.points.shift();
    this.draw();
  }

  draw() {
    const { canvas, points, spec } = this;
    const context = canvas.getContext('2d');
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 360;
    const height = canvas.clientHeight || 140;
    if (canvas.width !== Math.round(width * ratio)) {
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
    }
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.clearRect(0, 0, width, height);
    const left = 44;
    const right = width - 8;
    const top = 8;
    const bottom = height - 20;
    let max = 0;
    for (const { values } of points) for (const value of values) if (value !== null && value > max) max = value;
    const ceiling = niceCeiling(max);
    context.font = '11px system-ui, sans-serif';
    context.fillStyle = '#778';
    context.strokeStyle = '#e4e6eb';
    context.lineWidth = 1;
    for (let i = 0; i <= 2; i++) {
      const y = bottom - ((bottom - top) * i) / 2;
      context.beginPath();
      context.moveTo(left, y);
      context.lineTo(right, y);
      context.stroke();
      context.fillText(formatNumber((ceiling * i) / 2), 4, y + 4);
    }
    // The time axis: the five minutes up to the latest point, a label at each whole minute.
    const end = points.length ? points[points.length - 1].at : Date.now();
    const x = (at) => right - ((end - at) * (right - left)) / WINDOW_MS;
    const ticks = [];
    context.textAlign = 'center';
    for (let at = Math.ceil((end - WINDOW_MS) / TICK_MS) * TICK_MS; at <= end; at += TICK_MS) {
      const label = clockLabel(at);
      context.strokeStyle = '#e4e6eb';
      context.beginPath();
      context.moveTo(x(at), bottom);
      context.lineTo(x(at), bottom + 4);
      context.stroke();
      context.fillText(label, Math.min(Math.max(x(at), left + 14), right - 14), height - 4);
      ticks.push(label);
    }
    context.textAlign = 'start';
    canvas.dataset.ticks = ticks.join(',');
    const y = (value) => bottom - ((bottom - top) * value) / ceiling;
    let drawn = 0;
    spec.series.forEach((_, s) => {
      context.strokeStyle = COLORS[s % COLORS.length];
      context.lineWidth = 2;
      context.beginPath();
      let pen = false;
      points.forEach(({ at, values }) => {
        const value = values[s];
        if (value === null || value === undefined) {
          pen = false;
          return;
        }
        drawn += 1;
        if (pen) context.lineTo(x(at), y(value));
        else context.moveTo(x(at), y(value));
        pen = true;
      });
      context.stroke();
    });
    canvas.dataset.points = String(drawn);
    const latest = points.length ? points[points.length - 1].values : [];
    this.legend.replaceChildren(
      ...spec.series.map((name, s) => {
        const item = document.createElement('span');
        item.className = `series s${s % COLORS.length}`;
        item.textContent = `${name} ${formatNumber(latest[s] ?? null)}`;
        return item;
      }),
    );
  }
}
