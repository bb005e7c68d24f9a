// Certificates made by a test with the openssl command (Node's crypto cannot sign them): a
// certificate authority of its own, and server certificates it signs for 127.0.0.1 and
// localhost. Node trusts the authority through `ca` options, or NODE_EXTRA_CA_CERTS in a child.

import { execFileSync } from 'node:child_process';
import { X509Certificate, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

function openssl(args, cwd) {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A fresh authority in `dir`: { dir, cert, key } (paths). */
export function makeCa(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const key = path.join(dir, 'ca-key.pem');
  const cert = path.join(dir, 'ca.pem');
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  openssl([
    'req', '-x509', '-new', '-key', key, '-subj', '/CN=Hearth compat CA', '-days', '2',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign',
    '-out', cert,
  ]);
  return { dir, cert, key };
}

/**
 * A server certificate signed by `ca`, written as `<name>.pem` and `<name>-key.pem` in the
 * authority's directory: { cert, key, fingerprint } (the SHA-256 fingerprint as Node's
 * getPeerCertificate().fingerprint256 shows it).
 */
export function makeServerCert(ca, name) {
  const key = path.join(ca.dir, `${name}-key.pem`);
  const cert = path.join(ca.dir, `${name}.pem`);
  const csr = path.join(ca.dir, `${name}.csr`);
  const ext = path.join(ca.dir, `${name}.ext`);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
  openssl(['req', '-new', '-key', key, '-subj', `/CN=${name}`, '-out', csr]);
  fs.writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  openssl([
    'x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', `0x1${randomBytes(8).toString('hex')}`,
    '-days', '2', '-extfile', ext, '-out', cert,
  ]);
  const fingerprint = new X509Certificate(fs.readFileSync(cert)).fingerprint256;
  return { cert, key, fingerprint };
}

/**
 * A node certificate of the node-to-node link signed by `ca`: its SAN DNS name is the node id,
 * usable as a TLS server and client certificate (docs/cluster-link.md, "Certificates").
 * Written as `<id>.pem` and `<id>-key.pem` in the authority's directory: { cert, key }.
 */
export function makeNodeCert(ca, id) {
  const key = path.join(ca.dir, `${id}-key.pem`);
  const cert = path.join(ca.dir, `${id}.pem`);
  const csr = path.join(ca.dir, `${id}.csr`);
  const ext = path.join(ca.dir, `${id}.ext`);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
  openssl(['req', '-new', '-key', key, '-subj', `/CN=${id}`, '-out', csr]);
  fs.writeFileSync(ext, `subjectAltName=DNS:${id}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n`);
  openssl([
    'x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', `0x1${randomBytes(8).toString('hex')}`,
    '-days', '2', '-extfile', ext, '-out', cert,
  ]);
  return { cert, key };
}
