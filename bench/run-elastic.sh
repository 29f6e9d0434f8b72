#!/bin/sh
# bench/run-elastic.sh: the elastic replay on openb default and on
# a demand series derived from Helios; prints one markdown report and
# writes it to bench/results/elastic-<date>.md (or to REPORT.md when given).
#
#   bench/run-elastic.sh [REPORT.md]
#
# Environment: BUILD (build folder, default build-elastic), TRACES (the
# shared traces folder, default ../shared/traces beside the source tree).
# Needs python3 (the Helios conversion and the table).  Takes about a minute.
#
# Definitions (docs/measuring.md): the lower
# bound bills each job its runtime at its dominant share (largest of GPU,
# CPU and memory shares) of the cheapest type that holds it; the floor pays
# at every instant for the cheapest set of nodes holding the moment's GPUs,
# CPU and memory.  The oracle is tarmac told every true runtime at arrival.
#
# Configurations (openb default submitted from 9,964,972 s, jobs up to a
# day, boot 180 s, seed 1; every policy on the same input in one process):
#   A  8-GPU nodes, spot on, hazard 0.05/node-hour   (bench/prices/uniform-8gpu.yaml)
#   B  8-GPU nodes, spot off
#   C  sizes 1, 2, 4, 8, spot off                    (bench/prices/uniform-sizes.yaml)
#   D  16 copies (copy k shifted 7k days, wrapped), 8-GPU nodes, spot off
#   E  Helios Earth VC vc6YE, May 2020: the per-minute GPU demand (running +
#      pending) turned into jobs, last in first out: GPUs of jobs of 8 or
#      more GPUs become 8-GPU jobs, the rest 1-GPU jobs; 8-GPU nodes, spot off
#   F  as A, but best-effort (preemptible) jobs can checkpoint (--checkpointable be)
#   G  as B, with --checkpointable be
#   H  as F, but each zone's spot hazard and launch availability fitted from
#      the real AWS V100 traces (--hazards bench/prices/spot-hazards-8gpu-v100.yaml:
#      sim-a <- p3.2xlarge us-east-1c, sim-b <- us-west-2b, from
#      config/spot-hazards-aws.yaml, `tarmac spot-fit`); unnamed cells keep 0.05
#   I  as A (nothing checkpoints) with H's hazards: static and tarmac only.
#      The reactive scaler sends every preemptible job to spot; at 0.3-0.7
#      interruptions per node-hour a day-long job that cannot checkpoint
#      almost never runs through (e^-17 at 0.735/h), so it relaunches until
#      the replay's 400-day stop, which takes hours to simulate.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-elastic}
TRACES=${TRACES:-$ROOT/../shared/traces}
OUT=${1:-$ROOT/bench/results/elastic-$(date -u +%Y-%m-%d).md}
PODS="$TRACES/alibaba-gpu-v2023-openb/openb_pod_list_default.csv"
HELIOS="$TRACES/helios-sensetime/earth_vc_minute_sequences_2020-05/vc6YE_cluster_sequence_vc.csv"

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 tarmac >/dev/null
EL="$BUILD/tarmac replay --elastic"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

python3 - "$HELIOS" "$TMP/helios-pods.csv" <<'PY'
import csv, sys
src, dst = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(src)))
stacks = {8: [], 1: []}
jobs, n, t0 = [], 0, None
def close(st, k, t):
    j = st.pop()
    jobs.append((j[0], k, j[1], t))
for r in rows:
    # "2020-05-01 00:01:00" -> minutes from the first row
    d, h = r["time"].split(" ")
    y, mo, da = map(int, d.split("-"))
    hh, mm, _ = map(int, h.split(":"))
    t = ((da - 1) * 24 + hh) * 60 + mm
    big = int(r["running_gpu_num_noless_8"]) + int(r["pending_gpu_num_noless_8"])
    small = int(r["running_gpu_num_less_8"]) + int(r["pending_gpu_num_less_8"])
    for k, want in ((8, big // 8), (1, small)):
        st = stacks[k]
        while len(st) < want:
            n += 1
            st.append((n, t))
        while len(st) > want:
            close(st, k, t)
end = t + 1
for k, st in stacks.items():
    while st:
        close(st, k, end)
with open(dst, "w") as f:
    f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
    for jid, k, a, b in sorted(jobs, key=lambda x: (x[2], x[0])):
        f.write("helios-%d,%d,%d,%d,1000,,LS,Succeeded,%d,%d,%d\n" % (jid, 4000 * k, 16384 * k, k, a * 60, b * 60, a * 60))
PY

run() { # name, extra args (a --policy among them overrides the default)
    name=$1; shift
    $EL --policy static,reactive,tarmac,oracle --json "$@" >"$TMP/$name.json"
}
# A over seeds 1-10 (the target is the median of tarmac / reactive).
seeds_a() {
    for s in 1 2 3 4 5 6 7 8 9 10; do
        $EL --policy reactive,tarmac,oracle --json --pods "$PODS" --since 9964972 --max-runtime 1d \
            --boot-s 180 --seed "$s" --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot on \
            --hazard 0.05 >"$TMP/A-seed$s.json"
    done
}
COMMON="--since 9964972 --max-runtime 1d --boot-s 180 --seed 1"
run A --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot on --hazard 0.05
run B --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot off
# B again without consolidation by restart: what it buys.
run B0 --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot off \
    --consolidate-restart off --policy tarmac,oracle
run C --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-sizes.yaml" --spot off
run D --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot off --copies 16
run E --pods "$TMP/helios-pods.csv" --max-runtime 1d --boot-s 180 --seed 1 \
    --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot off
run F --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot on --hazard 0.05 \
    --checkpointable be
run G --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot off --checkpointable be
HAZARDS="$ROOT/bench/prices/spot-hazards-8gpu-v100.yaml"
run H --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot on --hazard 0.05 \
    --checkpointable be --hazards "$HAZARDS"
run I --pods "$PODS" $COMMON --prices "$ROOT/bench/prices/uniform-8gpu.yaml" --spot on --hazard 0.05 \
    --hazards "$HAZARDS" --policy static,tarmac,oracle
seeds_a

python3 - "$TMP" "$OUT" "$EL" <<'PY'
import json, sys, os, datetime
tmp, out, el = sys.argv[1], sys.argv[2], sys.argv[3]
names = {
 "A": "openb, 8-GPU nodes, spot on, hazard 0.05",
 "B": "openb, 8-GPU nodes, spot off",
 "C": "openb, sizes 1/2/4/8, spot off",
 "D": "openb x16 copies, 8-GPU nodes, spot off",
 "E": "Helios vc6YE demand, 8-GPU nodes, spot off",
 "F": "openb, 8-GPU nodes, spot on, hazard 0.05, best-effort jobs checkpointable",
 "G": "openb, 8-GPU nodes, spot off, best-effort jobs checkpointable",
 "H": "openb, 8-GPU nodes, spot on, per-zone hazards and availability fitted from AWS V100 traces (sim-a 0.735/h, 47%; sim-b 0.313/h, 83%), best-effort jobs checkpointable",
 "I": "as H, nothing checkpointable (static and tarmac only: see bench/run-elastic.sh)",
}
R = {k: {r["policy"]: r for r in json.load(open(os.path.join(tmp, k + ".json")))["results"]}
     for k in "ABCDEFGHI"}
B0 = {r["policy"]: r for r in json.load(open(os.path.join(tmp, "B0.json")))["results"]}
def yes(ok):
    return "yes" if ok else "**no**"
A, B, C, D, F = R["A"], R["B"], R["C"], R["D"], R["F"]
a_cost = A["tarmac"]["cost_usd"] / A["reactive"]["cost_usd"]
a_lost = A["tarmac"]["lost_gpu_hours"] / A["reactive"]["lost_gpu_hours"] if A["reactive"]["lost_gpu_hours"] else 0
f_cost = F["tarmac"]["cost_usd"] / F["reactive"]["cost_usd"]
over = max(r["budget_overshoot_cents"] for k in R for r in R[k].values())
missed = sum(r["deadlines_missed"] for k in R for r in R[k].values())
L = []
L.append("# Elastic replay, %s\n" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"))
import statistics
seeds = [{r["policy"]: r for r in json.load(open(os.path.join(tmp, "A-seed%d.json" % sd)))["results"]} for sd in range(1, 11)]
a_med = statistics.median(x["tarmac"]["cost_usd"] / x["reactive"]["cost_usd"] for x in seeds)
a_ratios = " ".join("%.3f" % (x["tarmac"]["cost_usd"] / x["reactive"]["cost_usd"]) for x in seeds)
L.append("## Targets (definitions: lower bound and floor count CPU and memory)\n")
L.append("| target | measured | met |")
L.append("|---|---|---|")
L.append("| A: tarmac <= 0.90 x reactive's cost, median over seeds 1-10 | %.3f (seeds: %s) | %s |" % (a_med, a_ratios, yes(a_med <= 0.90)))
L.append("| B: tarmac <= 1.12 x floor | %.3f (reactive %.3f, oracle %.3f; G, checkpointable: %.3f) | %s |" % (B["tarmac"]["floor_ratio"], B["reactive"]["floor_ratio"], B["oracle"]["floor_ratio"], R["G"]["tarmac"]["floor_ratio"], yes(B["tarmac"]["floor_ratio"] <= 1.12)))
L.append("| B: redone GPU-hours reported | tarmac %.1f GPU-h redone by %d restarts of %d jobs (oracle %.1f); without consolidation by restart %.3f x floor | yes |" % (B["tarmac"]["redone_gpu_hours"], B["tarmac"]["restarts"], B["tarmac"]["restarted_jobs"], B["oracle"]["redone_gpu_hours"], B0["tarmac"]["floor_ratio"]))
L.append("| C: tarmac <= 1.25 x lower bound | %.3f (reactive %.3f, oracle %.3f) | %s |" % (C["tarmac"]["cost_ratio"], C["reactive"]["cost_ratio"], C["oracle"]["cost_ratio"], yes(C["tarmac"]["cost_ratio"] <= 1.25)))
L.append("| D: tarmac <= 1.25 x lower bound | %.3f (reactive %.3f, oracle %.3f) | %s |" % (D["tarmac"]["cost_ratio"], D["reactive"]["cost_ratio"], D["oracle"]["cost_ratio"], yes(D["tarmac"]["cost_ratio"] <= 1.25)))
for k in "ABCDEFGHI":
    if "oracle" not in R[k]:
        continue
    ta, orc = R[k]["tarmac"], R[k]["oracle"]
    rel = ta["cost_usd"] / orc["cost_usd"]
    re_ok = "reactive" not in R[k] or ta["cost_usd"] < R[k]["reactive"]["cost_usd"]
    L.append("| %s: tarmac within 3%% of the oracle, cheaper than reactive | tarmac / oracle %.3f; tarmac / reactive %s | %s |" % (
        k, rel, "%.3f" % (ta["cost_usd"] / R[k]["reactive"]["cost_usd"]) if "reactive" in R[k] else "n/a (not run)",
        yes(rel <= 1.03 and re_ok)))
L.append("| zero budget overshoot | %.0f cents, worst run here (no budget in these tables; hard-cap replays in tests/unit/replay/test_elastic.c) | %s |" % (over, yes(over == 0)))
L.append("| zero missed feasible deadlines | %d here (deadline replays in tests/unit/replay/test_elastic.c) | %s |" % (missed, yes(missed == 0)))
L.append("")
L.append("Command: `bench/run-elastic.sh` (driver: `%s`). openb default submitted from 9,964,972 s, "
         "jobs up to a day, boot 180 s, tick 30 s, seed 1. Prices: $4.00/GPU-h on demand, spot 35%% "
         "(bench/prices/). xLB = cost / lower bound, xfloor = cost / floor (docs/measuring.md: both count "
         "CPU and memory; controller/replay/elastic.h). oracle = tarmac told every true runtime at arrival. "
         "util = useful GPU-hours / paid GPU-hours. lost%% = GPU-hours lost to interruptions / GPU-hours of "
         "preemptible work. Paid GPU-hours that did no work: boot (nodes booting), empty (nodes with no job), "
         "free (free GPUs on nodes running jobs).\n" % os.path.basename(el.split()[0]))
for k in "ABCDEFGHI":
    rs = list(R[k].values())
    L.append("\n## %s %s\n" % (k, names[k]))
    L.append("jobs %d, lower bound $%.0f, floor $%.0f (floor/LB %.3f)\n" %
             (rs[0]["jobs"], rs[0]["lower_bound_usd"], rs[0]["floor_usd"], rs[0]["floor_usd"] / rs[0]["lower_bound_usd"]))
    L.append("| policy | cost $ | $/useful GPU-h | xLB | xfloor | util | boot GPU-h | empty GPU-h | free GPU-h | wait mean s | wait p99 s | >boot | interruptions | lost GPU-h | lost % | deadlines missed | overshoot c | launches | drains | moves | substitutions | restarts | redone GPU-h |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        lost = 100 * r["lost_gpu_hours"] / r["be_gpu_hours"] if r["be_gpu_hours"] else 0
        L.append("| %s | %.0f | %.2f | %.3f | %.3f | %.3f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f%% | %d | %.1f | %.1f | %d | %.0f | %d | %d | %d | %d | %d | %.1f |" % (
            r["policy"], r["cost_usd"], r["usd_per_useful_gpu_hour"], r["cost_ratio"], r["floor_ratio"],
            r["paid_utilisation"], r["booting_gpu_hours"], r["empty_gpu_hours"], r["free_on_busy_gpu_hours"],
            r["wait_mean_s"], r["wait_p99_s"], 100 * r["waited_longer_than_boot_share"],
            r["interruptions"], r["lost_gpu_hours"], lost, r["deadlines_missed"], r["budget_overshoot_cents"],
            r["launches"], r["drains"], r["moves"], r["substitutions"], r.get("restarts", 0),
            r.get("redone_gpu_hours", 0)))
    if k in "HI":
        L.append("\nspot launches by zone (sim-a, sim-b), interruptions by zone, spot launches that found no capacity:\n")
        for r in rs:
            L.append("- %s: launches %s, interruptions %s, no capacity %d" % (
                r["policy"], r["spot_launches_by_zone"], r["interruptions_by_zone"], r["spot_shortages"]))
        L.append("")
    if k in "AFH":
        re, ta = R[k]["reactive"], R[k]["tarmac"]
        L.append("\ntarmac / reactive: cost %.3f (target <= 0.90), lost GPU-h %.3f (target <= 0.20), "
                 "mean wait %.0f s vs %.0f s (target <=)\n" % (ta["cost_usd"] / re["cost_usd"],
                 ta["lost_gpu_hours"] / re["lost_gpu_hours"] if re["lost_gpu_hours"] else 0,
                 ta["wait_mean_s"], re["wait_mean_s"]))
text = "\n".join(L) + "\n"
open(out, "w").write(text)
sys.stdout.write(text)
PY
