#!/usr/bin/env bash
# bench/run-apply-waits.sh: what a reconcile plan's waits cost PostgreSQL.
#
#   BUILD=build BASE=build-main N=20000 REPS=3 bench/run-apply-waits.sh [REPORT.md]
#
# Each arriving job brings one 'wait' op to the next pass (its first
# reason), so with jobs arriving by the thousand a second most of a plan
# is waits.  For each build (BUILD, then BASE if given, alternating REPS
# times), a fresh database of a throwaway PostgreSQL (tests/lib/
# pg_cluster.sh) migrated by that build's tarmac, N queued jobs, and one
# plan of N waits shaped as controller/reconcile/schedule.c writes them
# (op, reason, job, inputs.policy) applied by tarmac_apply; printed: the
# CPU time (user + system) of the PostgreSQL backend that applied it, per
# wait, and the wall time.  CPU time is what a machine shared with other
# work skews least.  Not a ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
abs() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
BUILD=$(abs "${BUILD:-build}")
BASE=${BASE:+$(abs "$BASE")}
N=${N:-20000}
REPS=${REPS:-3}
OUT=${1:-$ROOT/bench/results/apply-waits-$(date -u +%Y-%m-%d).md}
for b in "$BUILD" ${BASE:+"$BASE"}; do
    [ -x "$b/tarmac" ] || { echo "run-apply-waits: $b/tarmac is missing" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/tarmac-bench-waits.XXXXXX)
chmod 755 "$WORK"
trap '"$ROOT/tests/lib/pg_cluster.sh" stop "$WORK/pg" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$ROOT/tests/lib/pg_cluster.sh" start "$WORK/pg" >/dev/null
# shellcheck disable=SC1091
. "$WORK/pg/pg.env"
TICK=$(getconf CLK_TCK)

# One run: prints "cpu_us_per_wait wall_ms applied".
run_one() {
    local build=$1 db=$2
    psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
    cat >"$WORK/c.yaml" <<YAML
database:
  url: "$TM_PG_BASE/$db"
cluster: bench
providers:
  - name: sim
    kind: sim
    region: sim-1
    instance_types:
      - name: sim.8x
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1000000
        on_demand_price: "32.77"
pools:
  - name: od
    provider: sim
    zones: [sim-1a]
    instance_types: [sim.8x]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: 0
YAML
    TARMAC_DATABASE_URL=$TM_PG_BASE/$db "$build/tarmac" migrate --config "$WORK/c.yaml" >"$WORK/migrate.log" 2>&1 \
        || { cat "$WORK/migrate.log" >&2; exit 1; }
    psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$TM_PG_BASE/$db" <<SQL
UPDATE leader SET epoch = 1 WHERE id = 1;
INSERT INTO jobs (team, name, command, gpus, gpu_milli, submitted_ms)
SELECT 'bench', 'p', '', 1, 1000, g FROM generate_series(1, $N) g;
CREATE TEMP TABLE plan AS
SELECT jsonb_build_object('actions', jsonb_agg(jsonb_build_object(
           'op', 'wait', 'reason', 'no_match: no node of an acceptable model and size exists',
           'job', id, 'inputs', jsonb_build_object('policy', 'fifo')) ORDER BY id)) AS p
  FROM jobs;
VACUUM ANALYZE jobs;
SELECT pg_backend_pid() AS pid \gset
\setenv PID :pid
\! awk '{ print \$14 + \$15 }' /proc/\$PID/stat >"$WORK/cpu0"
SELECT extract(epoch FROM clock_timestamp()) * 1000 AS t0 \gset
SELECT (tarmac_apply(1, 1000, p) ->> 'applied') AS applied FROM plan \gset
SELECT round(extract(epoch FROM clock_timestamp()) * 1000 - :t0) AS wall \gset
\setenv WALL :wall
\setenv APPLIED :applied
\! awk -v n=$N -v hz=$TICK -v wall=\$WALL -v applied=\$APPLIED '{ getline c0 <"$WORK/cpu0"; printf "%.1f %d %d\n", (\$14 + \$15 - c0) * 1000000 / hz / n, wall, applied }' /proc/\$PID/stat
SQL
}

RESULTS=()
NB=1
[ -n "$BASE" ] && NB=2
for r in $(seq 1 "$REPS"); do
    for b in "$BUILD" ${BASE:+"$BASE"}; do
        RESULTS+=("$b $(run_one "$b" "w_${r}_$(basename "$b" | tr -c 'a-zA-Z0-9\n' '_')")")
    done
done

{
    echo "# A plan's waits applied by tarmac_apply"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr)"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: BUILD=$BUILD${BASE:+ BASE=$BASE} N=$N REPS=$REPS bench/run-apply-waits.sh"
    echo "- PostgreSQL $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/postgres" --version | awk '{print $3}') from tests/lib/pg_cluster.sh; $N queued jobs, one plan of $N waits"
    echo
    echo "| build | run | PostgreSQL CPU us per wait | wall ms | waits applied |"
    echo "|---|---:|---:|---:|---:|"
    i=0
    for line in "${RESULTS[@]}"; do
        read -r b cpu wall applied <<<"$line"
        echo "| $b | $((i / NB + 1)) | $cpu | $wall | $applied |"
        i=$((i + 1))
    done
    echo
    for b in "$BUILD" ${BASE:+"$BASE"}; do
        med=$(for line in "${RESULTS[@]}"; do read -r x cpu _ <<<"$line"; if [ "$x" = "$b" ]; then echo "$cpu"; fi; done | sort -n \
              | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
        echo "median CPU us per wait, $b: $med"
        echo
    done
} | tee "$OUT"
