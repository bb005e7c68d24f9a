// A line diff of two texts, for the ruleset history: the longest common subsequence of their
// lines, found by the textbook table. The lines both texts share at the start and at the end
// are set aside first, so the table covers only the part that differs; a table past
// MAX_CELLS is not built (the texts are too different to compare here), which keeps a
// comparison of two large rules documents from holding the page.

/** The most lines × lines the table may have: 2,000 changed lines on each side. */
export const MAX_CELLS = 2000 * 2000;

/** Unchanged lines kept on each side of a change when runs of them are folded. */
export const CONTEXT = 3;

const lines = (text) => (text === '' ? [] : text.replace(/\r\n/g, '\n').split('\n'));

/**
 * The lines of `before` turned into those of `after`, in order: `{op, text}` with `op` one of
 * ' ' (in both), '-' (only in `before`) and '+' (only in `after`). `null` when the parts that
 * differ are too large to compare.
 */
export function lineDiff(before, after) {
  const a = lines(before);
  const b = lines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const n = endA - start;
  const m = endB - start;
  if (n * m > MAX_CELLS) return null;

  // common[i][j]: the length of the longest common subsequence of a[start + i..endA] and
  // b[start + j..endB]. It never exceeds the shorter side, at most 2,000 under MAX_CELLS.
  const width = m + 1;
  const common = new Uint16Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      common[i * width + j] =
        a[start + i] === b[start + j]
          ? common[(i + 1) * width + j + 1] + 1
          : Math.max(common[(i + 1) * width + j], common[i * width + j + 1]);
    }
  }

  const out = [];
  for (let k = 0; k < start; k++) out.push({ op: ' ', text: a[k] });
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[start + i] === b[start + j]) {
      out.push({ op: ' ', text: a[start + i] });
      i++;
      j++;
    } else if (common[(i + 1) * width + j] >= common[i * width + j + 1]) {
      out.push({ op: '-', text: a[start + i] });
      i++;
    } else {
      out.push({ op: '+', text: b[start + j] });
      j++;
    }
  }
  for (; i < n; i++) out.push({ op: '-', text: a[start + i] });
  for (; j < m; j++) out.push({ op: '+', text: b[start + j] });
  for (let k = endA; k < a.length; k++) out.push({ op: ' ', text: a[k] });
  return out;
}

/**
 * The diff with each run of unchanged lines longer than 2 × `context` + 1 folded to its first
 * and last `context` lines around `{op: '…', count}` (the lines left out).
 */
export function fold(diff, context = CONTEXT) {
  const out = [];
  let k = 0;
  while (k < diff.length) {
    if (diff[k].op !== ' ') {
      out.push(diff[k++]);
      continue;
    }
    let end = k;
    while (end < diff.length && diff[end].op === ' ') end++;
    const keepBefore = k === 0 ? 0 : context;
    const keepAfter = end === diff.length ? 0 : context;
    if (end - k > keepBefore + keepAfter + 1) {
      out.push(...diff.slice(k, k + keepBefore));
      out.push({ op: '…', count: end - k - keepBefore - keepAfter });
      out.push(...diff.slice(end - keepAfter, end));
    } else {
      out.push(...diff.slice(k, end));
    }
    k = end;
  }
  return out;
}

/** How many lines were added and removed. */
export function counts(diff) {
  let added = 0;
  let removed = 0;
  for (const line of diff) {
    if (line.op === '+') added++;
    else if (line.op === '-') removed++;
  }
  return { added, removed };
}
