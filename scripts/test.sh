#!/usr/bin/env bash
# The whole test suite: install what is missing, build with -Wall -Wextra
# -Werror, run every ctest test, then build again with AddressSanitizer and
# UndefinedBehaviorSanitizer and run the suite under them.  First of all,
# scripts/check-includes.sh checks the layering rule of docs/architecture.md and
# scripts/check-banned.sh the banned calls.
#
#   scripts/test.sh
#
# Each ctest run starts its own throwaway PostgreSQL cluster (tests/lib/pg_cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

echo "== include check"
sh scripts/check-includes.sh
echo "== banned-call check"
sh scripts/check-banned.sh

bash scripts/setup.sh --asan
cores=$(nproc 2>/dev/null || echo 2)
# Up to twice as many tests as cores: most integration tests spend their
# time waiting on ticks, graces and timeouts, not on a CPU.  ctest starts a
# test only while load average + 1 <= twice the cores, so when the
# CPU-bound ones (the replays, everything under ASan) pile up it waits.
jobs="$(( cores * 2 )) --test-load $(( cores * 2 ))"

echo "== ctest (build/)"
ctest --test-dir build --output-on-failure -j $jobs

echo "== ctest under ASan+UBSan (build-asan/)"
# Tests labelled slow ran above and are left out here: the reference
# clients and the OpenAPI lint (npm, little of tarmac's C), the demo's
# cluster setup, the GCP and Azure kill soaks (the AWS one, on the same
# reconcile code, stays), the asynchronous failover and the failovers under
# Patroni (the synchronous pg_ctl one, on the same tarmac code, stays);
# every other test runs again under the sanitizers.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j $jobs -LE slow

echo "test: all passed in $(( $(date +%s) - start )) s"
