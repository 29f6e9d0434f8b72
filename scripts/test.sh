#!/usr/bin/env bash
# The whole test suite: install what is missing, build with -Wall -Wextra
# -Werror and again with AddressSanitizer and UndefinedBehaviorSanitizer,
# and run every ctest test in both builds, side by side.  First of all,
# scripts/check-includes.sh checks the layering rule of README.md.
#
#   scripts/test.sh
#
# Each ctest run starts its own throwaway PostgreSQL cluster (tests/lib/pg_cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

echo "== include check"
sh scripts/check-includes.sh

bash scripts/setup.sh --asan
cores=$(nproc 2>/dev/null || echo 2)
# Up to twice as many tests as cores: most integration tests spend their
# time waiting on ticks, graces and timeouts, not on a CPU.  ctest starts a
# test only while load average + 1 <= twice the cores, so when the
# CPU-bound ones (the replays, everything under ASan) pile up it waits.
#
# The plain pass and the pass under ASan+UBSan run side by side, each in
# its own build folder with its own PostgreSQL cluster: run one after the
# other, each left the CPUs half idle while its last tests waited on
# timers.  Each pass writes its own log (build*/ctest.log), printed whole
# once both have ended.
jobs="$(( cores * 2 )) --test-load $(( cores * 2 ))"

# Tests labelled slow run in the plain pass only: the reference clients and
# the OpenAPI lint (npm, little of tarmac's C), the demo's cluster setup,
# the GCP and Azure kill soaks (the AWS one, on the same reconcile code,
# stays), the asynchronous failover (the synchronous one stays) and the
# chaos soak's short form; every other test runs under the sanitizers too.
echo "== ctest (build/) and ctest under ASan+UBSan (build-asan/), side by side"
ctest --test-dir build --output-on-failure -j $jobs >build/ctest.log 2>&1 &
plain=$!
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j $jobs -LE slow >build-asan/ctest.log 2>&1 &
asan=$!
plain_rc=0
asan_rc=0
wait "$plain" || plain_rc=$?
wait "$asan" || asan_rc=$?
echo "== ctest (build/): exit $plain_rc"
cat build/ctest.log
echo "== ctest under ASan+UBSan (build-asan/): exit $asan_rc"
cat build-asan/ctest.log
if [ "$plain_rc" != 0 ] || [ "$asan_rc" != 0 ]; then
    echo "test: FAILED (plain pass exit $plain_rc, ASan pass exit $asan_rc) after $(( $(date +%s) - start )) s"
    exit 1
fi

echo "test: all passed in $(( $(date +%s) - start )) s"
