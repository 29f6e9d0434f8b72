#!/usr/bin/env bash
# A provider's fitted spot hazard table (spot_hazards) in the live
# controller, end to end on the sim cloud with its clock 20 times faster
# than real time.  The spot pool's own hazard is 60 interruptions per
# node-hour in both its zones; the table says sim-1a is as bad as that and
# sim-1b is never interrupted.  Every spot node then goes to sim-1b (not in
# turn over the two zones), the sim draws its fate from the table's 0, and
# the plain preemptible jobs each finish at their first attempt, where with
# the pool's hazard each attempt would outlive its node with probability
# exp(-1) = 0.37.  Each launch's decision names the hazard that chose it.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_spot_zone_hazards)
cat >"$WORK/hazards.yaml" <<YAML
hazards:
  - {type: sim.8x, zone: sim-1a, hazard_per_hour: 60}
  - {type: sim.8x, zone: sim-1b, hazard_per_hour: 0}
YAML
cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: itest-zones
listen: "127.0.0.1:0"
tick_interval: 200ms
time_scale: 20
log_level: info
scheduler:
  policy: fifo
providers:
  - name: sim
    kind: sim
    region: sim-1
    boot_delay: 5s
    spot_hazard: 0
    spot_notice: 120s
    shutdown_delay: 5s
    seed: 11
    spot_hazards: "$WORK/hazards.yaml"
    instance_types:
      - name: sim.8x
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1000000
        on_demand_price: "32.77"
        spot_price: "9.83"
pools:
  - name: spot
    provider: sim
    zones: [sim-1a, sim-1b]
    instance_types: [sim.8x]
    capacity_type: spot
    min_nodes: 0
    max_nodes: 8
    idle_grace: 20s
    spot_hazard: 60
    spot_notice: 20s
  # A zone the table does not name: serve warns at start that it fits none
  # of this pool's cells (it launches nothing: max_nodes 0).
  - name: spot-elsewhere
    provider: sim
    zones: [sim-1c]
    instance_types: [sim.8x]
    capacity_type: spot
    min_nodes: 0
    max_nodes: 0
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null || fail "migrate"

# Six plain preemptible jobs of a whole node each, 60 s of simulated work.
psql_q "INSERT INTO jobs (team, name, gpus, gpu_milli, pool, preemptible, checkpointable,
                          sim_runtime_ms, runtime_estimate_ms, submitted_ms)
        SELECT 'a', 'plain', 8, 1000, 'spot', true, false, 60000, 60000,
               (extract(epoch FROM clock_timestamp()) * 1000)::bigint + g
          FROM generate_series(1, 6) g"
jobs=$(psql_q 'SELECT count(*) FROM jobs')

timeout 100 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 90s --output json \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"
echo "serve: $(tr -d '\n' <"$WORK/serve.out")"
grep -q 'fits none of the pool.*pool=spot-elsewhere' "$WORK/serve.log" \
    || fail "no warning for the pool the table does not fit: $(grep -i 'spot hazard' "$WORK/serve.log")"
! grep -q 'fits none of the pool.*pool=spot ' "$WORK/serve.log" || fail "a warning for the fitted pool"

[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND attempts = 1")" = "$jobs" ] \
    || fail "not every job finished at its first attempt: $(psql_q "SELECT id, state, attempts FROM jobs")"
zones=$(psql_q "SELECT string_agg(DISTINCT zone, ',') FROM nodes WHERE pool = 'spot'")
[ "$zones" = "sim-1b" ] || fail "spot nodes in zones $zones, not only sim-1b"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE notice_ms IS NOT NULL OR state = 'interrupted'")" = 0 ] \
    || fail "a node in sim-1b was interrupted: $(psql_q "SELECT id, zone, state, notice_ms FROM nodes")"
launches=$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch'")
[ "$launches" -ge 1 ] || fail "no launch decisions"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch'
               AND inputs ->> 'spot_hazard_from' = 'spot_hazards'
               AND (inputs ->> 'spot_hazard_per_hour')::float8 = 0
               AND reason LIKE '%zone sim-1b: lowest spot hazard%'")" = "$launches" ] \
    || fail "launch decisions without their hazard: $(psql_q "SELECT reason, inputs FROM decisions WHERE kind = 'launch' LIMIT 2")"
echo "spot nodes: $(psql_q "SELECT count(*) FROM nodes WHERE pool = 'spot'") in $zones; launches: $launches"
echo "1 passed, 0 failed"
