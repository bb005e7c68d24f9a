#!/usr/bin/env bash
# Hearth alone at the probe's load, with its log-sync histogram scraped after each run.
# Run 2026-11-30 about 18:05 UTC, build 30741f6, the machine otherwise quiet; its output: output.txt.
set -u
cd "$(dirname "$0")/../../../.."   # the repository; needs target/release/hearth and hearth-load
for run in 1 2 3 4; do
  d=$(mktemp -d)
  target/release/hearth serve --dev --durability strict --threads 2 --listen 127.0.0.1:47001 --metrics-listen 127.0.0.1:47002 --data-dir $d/data > $d/server.log 2>&1 &
  pid=$!
  sleep 1.5
  timeout 100 target/release/hearth-load crates/load/scenarios/chat-rooms20.json --target hearth=ws://127.0.0.1:47001 --server-pid $pid --connections 2000 --warmup 5 --duration 20 --processes 2 --out $d/load.json > $d/load.txt 2>&1
  echo "== run $run"; grep -A2 "^target" $d/load.txt | head -3
  curl -s 127.0.0.1:47002/metrics | grep -E "^hearth_log_sync_seconds_(bucket\{le=\"0.0005\"|bucket\{le=\"0.001\"|bucket\{le=\"0.0025\"|bucket\{le=\"0.005\"|count)"
  kill $pid; wait $pid 2>/dev/null; rm -rf $d
done
