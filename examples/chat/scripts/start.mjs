// `npm start`: hearth serve --dev on 127.0.0.1:9000 (or HEARTH_PORT) with database.rules.json
// for namespace "chat" (or CHAT_NS), and dist/ served on 127.0.0.1:5173 (or CHAT_PORT).
// Ctrl-C stops both.
import { putRules, startHearth, startStatic } from './local.mjs';

const hearthPort = Number(process.env.HEARTH_PORT || 9000);
const webPort = Number(process.env.CHAT_PORT || 5173);
const ns = process.env.CHAT_NS || 'chat';

const hearth = await startHearth({ port: hearthPort, stdio: 'inherit' });
await putRules(hearth.port, ns);
const web = await startStatic({ port: webPort });
const page = (user) => `${web.url}?port=${hearth.port}&ns=${ns}&user=${user}&room=general`;
console.log(`\nHearth on 127.0.0.1:${hearth.port}, rules from database.rules.json set for ns=${ns}.`);
console.log(`Open, in two windows:\n  ${page('alice')}\n  ${page('bob')}\n(Ctrl-C to stop)`);

let stopping = false;
const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  await web.close();
  await hearth.stop();
  process.exit(0);
};
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
hearth.proc.once('exit', (code, signal) => {
  if (!stopping) {
    console.error(`hearth exited (code=${code} signal=${signal})`);
    web.close().then(() => process.exit(1));
  }
});
