// The client's pure parts: paths and how pushes change a listener's value.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { applyPush, normalize, setAt } from '../index.js';

it('normalizes paths', () => {
  assert.equal(normalize('/rooms//r1/'), 'rooms/r1');
  assert.equal(normalize(''), '');
});

it('sets and removes nodes without mutating', () => {
  const before = { a: { b: 1, c: 2 } };
  assert.deepEqual(setAt(before, ['a', 'b'], null), { a: { c: 2 } });
  assert.deepEqual(before, { a: { b: 1, c: 2 } });
  assert.equal(setAt({ a: { b: 1 } }, ['a', 'b'], null), null, 'empty objects go');
  assert.deepEqual(setAt(null, ['x', 'y'], 3), { x: { y: 3 } });
});

it('applies value and merge pushes at and below the listened path', () => {
  let { value } = applyPush(null, 'rooms/r1/cursors', 'd', 'rooms/r1/cursors', { a: { x: 1 } });
  assert.deepEqual(value, { a: { x: 1 } });
  ({ value } = applyPush(value, 'rooms/r1/cursors', 'm', '/rooms/r1/cursors', { b: { x: 2 }, a: null }));
  assert.deepEqual(value, { b: { x: 2 } });
  ({ value } = applyPush(value, 'rooms/r1/cursors', 'd', 'rooms/r1/cursors/b/x', 5));
  assert.deepEqual(value, { b: { x: 5 } });
  const other = applyPush(value, 'rooms/r1/cursors', 'd', 'rooms/r2/cursors', 1);
  assert.equal(other.changed, false);
});
