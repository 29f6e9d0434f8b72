#!/bin/sh
# Rewrite tests/costs.txt from a finished ctest run's cost data: each test's
# average seconds, the costliest first.  ctest starts tests in descending
# COST (tests/CMakeLists.txt), so a clean clone starts its long integration
# tests first instead of leaving them to run alone at the end.
#
#   scripts/test-costs.sh [BUILD_DIR]     (default build)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${1:-$ROOT/build}/Testing/Temporary/CTestCostData.txt
[ -f "$DATA" ] || { echo "test-costs: no $DATA (run ctest first)" >&2; exit 1; }
{
    echo "# name seconds: ctest's average per test (scripts/test-costs.sh), for the COST property"
    # CTestCostData.txt: "name runs average" lines, then "---" and the failed ones.
    awk '$0 == "---" { exit } NF == 3 { printf "%s %.1f\n", $1, $3 }' "$DATA" | sort -k2,2 -rn
} >"$ROOT/tests/costs.txt"
echo "test-costs: $(grep -vc '^#' "$ROOT/tests/costs.txt") tests in tests/costs.txt"
