// Run by test/tls.test.mjs in a child process started with NODE_EXTRA_CA_CERTS (Node reads it
// only at startup), so that the official SDK trusts the test's certificate authority.
//
//   node tls-sdk-child.mjs DATABASE_URL PATH
//
// Two apps of the web SDK on DATABASE_URL (https://…?ns=…): one listens at PATH, the other
// sets a value there; prints {"seen": value} once the listener has it, and exits.

import { initializeApp, deleteApp, setLogLevel } from 'firebase/app';
import { getDatabase, ref, set, onValue } from 'firebase/database';

const [databaseURL, at] = process.argv.slice(2);
setLogLevel('silent');
const timer = setTimeout(() => {
  process.stderr.write('no round trip within 15 s\n');
  process.exit(2);
}, 15_000);
const options = { databaseURL, projectId: 'demo-hearth', apiKey: 'fake-api-key' };
const reader = initializeApp(options, 'reader');
const writer = initializeApp(options, 'writer');
const value = { text: 'over wss', n: 42 };
const seen = new Promise((resolve) => {
  onValue(ref(getDatabase(reader), at), (snapshot) => {
    if (snapshot.val()?.n === 42) resolve(snapshot.val());
  });
});
await set(ref(getDatabase(writer), at), value);
const got = await seen;
process.stdout.write(`${JSON.stringify({ seen: got })}\n`);
clearTimeout(timer);
await Promise.all([deleteApp(reader), deleteApp(writer)]);
process.exit(0);
