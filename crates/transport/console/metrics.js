// Reading `/metrics` (Prometheus text, or OpenMetrics): samples, and what the charts plot
// from two scrapes in a row: gauges as they are, counters as rates, histograms as quantiles
// of the interval's observations.

/** One scrape: `name -> [{labels, value}]`. */
export function parsePrometheus(text) {
  const samples = new Map();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const parsed = parseLine(line);
    if (!parsed) continue;
    if (!samples.has(parsed.name)) samples.set(parsed.name, []);
    samples.get(parsed.name).push({ labels: parsed.labels, value: parsed.value });
  }
  return samples;
}

/** `name{a="x",b="y"} value [timestamp]`, label values with `\\`, `\"` and `\n` escapes. */
function parseLine(line) {
  const nameEnd = line.search(/[{\s]/);
  if (nameEnd <= 0) return null;
  const name = line.slice(0, nameEnd);
  const labels = {};
  let i = nameEnd;
  if (line[i] === '{') {
    i += 1;
    while (i < line.length && line[i] !== '}') {
      const eq = line.indexOf('=', i);
      if (eq < 0 || line[eq + 1] !== '"') return null;
      const key = line.slice(i, eq).trim();
      let value = '';
      let j = eq + 2;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === '\\' && j + 1 < line.length) {
          j += 1;
          value += line[j] === 'n' ? '\n' : line[j];
        } else {
          value += line[j];
        }
      }
      labels[key] = value;
      i = j + 1;
      if (line[i] === ',') i += 1;
    }
    i += 1;
  }
  const fields = line.slice(i).trim().split(/\s+/);
  const value = parseValue(fields[0]);
  return Number.isNaN(value) && fields[0] !== 'NaN' ? null : { name, labels, value };
}

function parseValue(text) {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  return Number(text);
}

/**
 * The sum of a metric over its label sets (those with the labels `only`, when given), or
 * null when the scrape has none.
 */
export function total(scrape, name, only = null) {
  let found = scrape.get(name);
  if (found && only) {
    found = found.filter((sample) => Object.entries(only).every(([key, value]) => sample.labels[key] === value));
  }
  return found && found.length ? found.reduce((sum, sample) => sum + sample.value, 0) : null;
}

/** Per second between two scrapes `seconds` apart; null across a restart or a gap. */
export function rate(before, after, name, seconds, only = null) {
  if (!before || seconds <= 0) return null;
  const a = total(before, name, only);
  const b = total(after, name, only);
  if (a === null || b === null || b < a) return null;
  return (b - a) / seconds;
}

/** Cumulative bucket counts by upper bound, summed over the other labels. */
function buckets(scrape, name) {
  const found = scrape.get(`${name}_bucket`);
  if (!found) return null;
  const byBound = new Map();
  for (const { labels, value } of found) {
    const bound = parseValue(labels.le);
    byBound.set(bound, (byBound.get(bound) || 0) + value);
  }
  return [...byBound.entries()].sort((x, y) => x[0] - y[0]);
}

/**
 * The q-quantile of the observations a histogram took between two scrapes, interpolated
 * within its bucket as Prometheus's `histogram_quantile` does; null when there were none.
 */
export function intervalQuantile(before, after, name, q) {
  if (!before) return null;
  const now = buckets(after, name);
  const then = buckets(before, name);
  if (!now || !then) return null;
  const earlier = new Map(then);
  const counts = now.map(([bound, count]) => [bound, count - (earlier.get(bound) || 0)]);
  const all = counts.length ? counts[counts.length - 1][1] : 0;
  if (!(all > 0)) return null;
  const rank = q * all;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, count] of counts) {
    if (count >= rank) {
      if (bound === Infinity) return lowerBound;
      const inBucket = count - lowerCount;
      return inBucket > 0 ? lowerBound + ((bound - lowerBound) * (rank - lowerCount)) / inBucket : bound;
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound;
}
