// A small line chart drawn on a canvas: a title, the latest value of each series, a y axis
// that grows to fit, and a gap where a series had no value.

/** Points kept per chart (at one scrape every 2 s, five minutes). */
export const MAX_POINTS = 150;

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
   */
  constructor(parent, spec) {
    this.spec = spec;
    this.points = []; // [[value or null per series]]
    const figure = document.createElement('figure');
    figure.className = 'chart';
    figure.dataset.chart = spec.id;
    const caption = document.createElement('figcaption');
    this.title = document.createElement('span');
    this.title.textContent = `${spec.title} (${spec.unit})`;
    this.legend = document.createElement('span');
    this.legend.className = 'legend';
    caption.append(this.title, this.legend);
    this.canvas = document.createElement('canvas');
    this.canvas.width = 360;
    this.canvas.height = 140;
    this.canvas.dataset.points = '0';
    figure.append(caption, this.canvas);
    parent.append(figure);
  }

  push(values) {
    this.points.push(values);
    if (this.points.length > MAX_POINTS) this.points.shift();
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
    const bottom = height - 16;
    let max = 0;
    for (const row of points) for (const value of row) if (value !== null && value > max) max = value;
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
    const x = (index) => right - ((points.length - 1 - index) * (right - left)) / (MAX_POINTS - 1);
    const y = (value) => bottom - ((bottom - top) * value) / ceiling;
    let drawn = 0;
    spec.series.forEach((_, s) => {
      context.strokeStyle = COLORS[s % COLORS.length];
      context.lineWidth = 2;
      context.beginPath();
      let pen = false;
      points.forEach((row, index) => {
        const value = row[s];
        if (value === null || value === undefined) {
          pen = false;
          return;
        }
        drawn += 1;
        if (pen) context.lineTo(x(index), y(value));
        else context.moveTo(x(index), y(value));
        pen = true;
      });
      context.stroke();
    });
    canvas.dataset.points = String(drawn);
    const latest = points[points.length - 1] || [];
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
