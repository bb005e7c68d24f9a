// Preloaded into the Firebase CLI by firebase-tools.test.mjs (NODE_OPTIONS=--require).
//
// The CLI's ruleset commands reach a database at `<instance>.<FIREBASE_REALTIME_URL's host>`,
// as production's `<instance>.firebaseio.com`. Names under `.localhost` are the loopback
// address (RFC 6761 §6.3), as browsers and systemd-resolved answer, but this machine's
// resolver (glibc reading /etc/hosts) does not know them: this answers them as the RFC says,
// in the CLI's process only, and leaves every other name to the system.
'use strict';
const dns = require('node:dns');

const systemLookup = dns.lookup;
dns.lookup = function lookup(hostname, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = {};
  }
  if (typeof hostname === 'string' && hostname.toLowerCase().endsWith('.localhost')) {
    const all = typeof options === 'object' && options !== null && options.all;
    process.nextTick(() => {
      if (all) callback(null, [{ address: '127.0.0.1', family: 4 }]);
      else callback(null, '127.0.0.1', 4);
    });
    return {};
  }
  return systemLookup.call(this, hostname, options, callback);
};
