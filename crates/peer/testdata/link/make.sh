#!/bin/sh
# Regenerates the node link's test certificates (`peer/link_tls.rs` tests): a cluster CA with
# node certificates n1, n2 and n_3 (an underscore, which DNS names in certificates allow), and
# another CA with its own certificate for n2. Valid for 100 years: no test depends on a date.
set -eu
cd "$(dirname "$0")"
ca() {
  openssl ecparam -name prime256v1 -genkey -noout -out "$1-key.pem"
  openssl req -x509 -new -key "$1-key.pem" -subj "/CN=Hearth test $1" -days 36500 \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign -out "$1.pem"
}
node() { # CA, node id, file name
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$3-key.pem"
  openssl req -new -key "$3-key.pem" -subj "/CN=$2" -out "$3.csr"
  printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' "$2" > "$3.ext"
  openssl x509 -req -in "$3.csr" -CA "$1.pem" -CAkey "$1-key.pem" -CAcreateserial -days 36500 \
    -extfile "$3.ext" -out "$3.pem"
  rm "$3.csr" "$3.ext"
}
ca ca
ca other-ca
node ca n1 n1
node ca n2 n2
node ca n_3 n_3
node other-ca n2 other-n2
rm -f ca.srl other-ca.srl ca-key.pem other-ca-key.pem
