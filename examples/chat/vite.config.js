import { defineConfig } from 'vite';

// @firebase/util's browser build imports './postinstall.mjs', a file its npm postinstall
// script writes (it bakes FIREBASE_WEBAPP_CONFIG into the bundle). Install scripts may be
// disabled, and this app passes its config explicitly, so supply the "no defaults" module.
function firebasePostinstallShim() {
  const id = '\0firebase-postinstall-shim';
  return {
    name: 'firebase-postinstall-shim',
    enforce: 'pre',
    resolveId(source, importer) {
      if (source === './postinstall.mjs' && importer && /[\\/]@firebase[\\/]util[\\/]/.test(importer)) return id;
      return null;
    },
    load(source) {
      return source === id ? 'export const getDefaultsFromPostinstall = () => undefined;\n' : null;
    },
  };
}

export default defineConfig({
  base: './',
  plugins: [firebasePostinstallShim()],
  optimizeDeps: {
    esbuildOptions: {
      plugins: [
        {
          name: 'firebase-postinstall-shim',
          setup(build) {
            build.onResolve({ filter: /^\.\/postinstall\.mjs$/ }, (args) =>
              /[\\/]@firebase[\\/]util[\\/]/.test(args.importer) ? { path: 'shim', namespace: 'fb-shim' } : undefined,
            );
            build.onLoad({ filter: /.*/, namespace: 'fb-shim' }, () => ({
              contents: 'export const getDefaultsFromPostinstall = () => undefined;\n',
            }));
          },
        },
      ],
    },
  },
  server: { host: '127.0.0.1' },
  preview: { host: '127.0.0.1' },
  build: { outDir: 'dist', sourcemap: true },
});
