// Attack: query strings and paths the server and a client read differently. One parser
// decodes every query string (routing, WebSocket, REST): a repeated name counts with its
// first value everywhere, and only `%` followed by two hex digits is an escape.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { useHearth, T } from '../../lib/harness.mjs';
import { SseStream, baseURL, nsOnShard, rest } from '../rest/rest-client.mjs';

describe('attack: query strings read two ways', () => {
  // The harness starts two shards.
  const h = useHearth();

  it('`%+1` is three characters, not the byte 0x01, in a path', T, async () => {
    const ns = h.ns('pct');
    const put = await rest(`${baseURL(h.server)}/x%+1y.json?ns=${ns}`, { method: 'PUT', body: 1 });
    assert.equal(put.status, 200);
    const read = await rest(`${baseURL(h.server)}/.json?ns=${ns}`);
    assert.deepEqual(read.json, { 'x%+1y': 1 });
  });

  it('`%+1` is three characters, not the byte 0x01, in a query value', T, async () => {
    const read = await rest(`${baseURL(h.server)}/.json?ns=a%+1b`);
    assert.equal(read.status, 404);
    assert.deepEqual(read.json, {
      error: `namespace names are 1 to 128 characters of a-z, A-Z, 0-9, '-' and '_'; got "a%+1b"`,
    });
  });

  it('a repeated ns names the first database, for plain requests and for routing', T, async () => {
    const first = nsOnShard('first', 0);
    const second = nsOnShard('second', 1);
    await rest(`${baseURL(h.server)}/v.json?ns=${first}`, { method: 'PUT', body: 'first' });
    await rest(`${baseURL(h.server)}/v.json?ns=${second}`, { method: 'PUT', body: 'second' });
    const both = `${baseURL(h.server)}/v.json?ns=${first}&ns=${second}`;
    assert.equal((await rest(both)).json, 'first');
    // An event stream is served where the router sent it, not redirected to itself.
    const stream = new SseStream(both);
    h.defer(() => stream.close());
    await stream.opened.promise;
    assert.equal(stream.status, 200);
    await stream.untilData(1);
    assert.deepEqual(stream.dataEvents[0].data, { path: '/', data: 'first' });
  });
});
