#!/bin/sh
# bench/run-burst.sh: the elastic replay with an owned fleet on the whole
# Philly job file: owned first, the clouds for the overflow.  Prints one
# markdown report and writes it to bench/results/burst-<date>.md (or to
# REPORT.md when given).
#
#   bench/run-burst.sh [REPORT.md]
#
# Environment: BUILD (build folder, default build-burst), TRACES (the shared
# traces folder, default ../shared/traces beside the source tree),
# OWNED_COST (dollars per owned GPU-hour, default 1.00: an 8-GPU server
# amortised over three years plus power; reported apart from cloud_usd and
# equal for every policy of a size), WAITS (constant-wait's waits searched,
# seconds).  Needs python3 (the table).
#
# Setup: owned fleets of 0.5x, 1.0x and 1.5x the file's mean demand (978,078
# GPU-hours over 2,614 hours: 374 GPUs), rounded to 8-GPU nodes: 192, 376
# and 560 GPUs.  The cloud type is p4d.24xlarge (8 x A100-40GB) at the AWS
# on-demand price of config/prices-aws-gpu.yaml; spot off (Philly's jobs
# are not preemptible).  Boot 180 s, tick 30 s, idle grace 600 s,
# starvation bound 48 h (the scheduler's default).  constant-wait is
# reported at the longest wait of WAITS whose mean completion time is
# within 1.05x zero-wait's (the Targets' point of comparison).  tarmac runs
# with its default value of waiting (burst.h) and, as a sensitivity, at a
# quarter, four and eight times it; each of those points is compared with
# the constant-wait point of the nearest completion time no lower than its.
# The day-long wait among WAITS shows what waiting far past the JCT target
# buys.  The
# report ends with the file's no-wait GPU demand per week (each job running
# from its submission), which bounds what waiting can move onto owned
# capacity.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-burst}
TRACES=${TRACES:-$ROOT/../shared/traces}
OUT=${1:-$ROOT/bench/results/burst-$(date -u +%Y-%m-%d).md}
PODS="$TRACES/philly-pollux/philly.csv"
OWNED_COST=${OWNED_COST:-1.00}
WAITS=${WAITS:-"300 600 900 1200 1800 2400 3600 5400 7200 86400"}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 tarmac >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run() { "$BUILD/tarmac" replay --elastic --pods "$PODS" --prices "$ROOT/config/prices-aws-gpu.yaml" \
            --cloud-type p4d.24xlarge --owned-cost "$OWNED_COST" --json "$@"; }

T0=$(date +%s)
for g in 192 376 560; do
    run --owned-gpus $g --policy owned-only,zero-wait,tarmac >"$TMP/main-$g.json"
    for w in $WAITS; do
        run --owned-gpus $g --policy constant-wait --burst-wait $w >"$TMP/cw-$g-$w.json"
    done
    # default value of waiting: one GPU-hour on demand, $21.957642 / 8
    for x in 0.25 4 8; do
        v=$(python3 -c "print(21.957642 / 8 * $x)")
        run --owned-gpus $g --policy tarmac --wait-value "$v" >"$TMP/tv-$g-$x.json"
    done
done
T1=$(date +%s)

python3 - "$TMP" "$OUT" "$WAITS" "$((T1 - T0))" "$OWNED_COST" "$PODS" <<'PY'
import json, sys
tmp, out, waits, secs, owned_cost = sys.argv[1], sys.argv[2], sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]
pods = sys.argv[6]
def load(p):
    return json.load(open(p))["results"]
cols = ["policy", "cloud_usd", "owned_utilisation", "jct_mean_s", "jct_p95_s", "wait_mean_s",
        "burst_jobs", "starved"]
lines = ["# Owned fleet and cloud bursting on Philly (bench/run-burst.sh)", "",
         "Whole file (82,247 jobs; gangs over 8 GPUs placed whole on 8-GPU nodes), "
         "cloud p4d.24xlarge on demand ($21.957642/h), owned cost $%s per GPU-hour "
         "(owned_usd, apart from cloud_usd). All runs: %d s of wall time on this machine." % (owned_cost, secs), ""]
checks = []
for g in (192, 376, 560):
    main = {r["policy"]: r for r in load("%s/main-%d.json" % (tmp, g))}
    zw = main["zero-wait"]
    cw_all = [(int(w), load("%s/cw-%d-%s.json" % (tmp, g, w))[0]) for w in waits]
    ok = [(w, r) for w, r in cw_all if r["jct_mean_s"] <= 1.05 * zw["jct_mean_s"]]
    cw_w, cw = max(ok, key=lambda x: x[0]) if ok else min(cw_all, key=lambda x: x[1]["jct_mean_s"])
    tm = main["tarmac"]
    rows = [main["owned-only"], zw, dict(cw, policy="constant-wait (%d s)" % cw_w), tm]
    for x in ("0.25", "4", "8"):
        r = load("%s/tv-%d-%s.json" % (tmp, g, x))[0]
        rows.append(dict(r, policy="tarmac, value x%s" % x))
    lines += ["## Owned %d GPUs (%.1fx mean demand), owned_usd %.0f" % (g, g / 374.0, zw["owned_usd"]), "",
              "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| %s | %.0f | %.3f | %.0f | %.0f | %.0f | %d | %d |" % (
            r["policy"], r["cloud_usd"], r["owned_utilisation"], r["jct_mean_s"], r["jct_p95_s"],
            r["wait_mean_s"], r["burst_jobs"], r["starved"]))
    lines += ["", "constant-wait searched: " + ", ".join(
        "%d s: $%.0f, JCT %.3fx" % (w, r["cloud_usd"], r["jct_mean_s"] / zw["jct_mean_s"]) for w, r in cw_all), ""]
    lines.append("tarmac against constant-wait at the nearest completion time no lower than its:")
    for r in rows[3:]:
        c = [(w, q) for w, q in cw_all if q["jct_mean_s"] >= r["jct_mean_s"]]
        if c:
            w, q = min(c, key=lambda x: x[1]["jct_mean_s"])
            lines.append("- %s: $%.0f at JCT %.3fx; constant-wait %d s: $%.0f at JCT %.3fx (tarmac's $ %.3fx of it)" % (
                r["policy"], r["cloud_usd"], r["jct_mean_s"] / zw["jct_mean_s"], w, q["cloud_usd"],
                q["jct_mean_s"] / zw["jct_mean_s"], r["cloud_usd"] / q["cloud_usd"]))
    lines.append("")
    d = tm["cloud_usd"] / zw["cloud_usd"]
    j = tm["jct_mean_s"] / zw["jct_mean_s"]
    if g == 376:
        checks.append("- 1.0x: tarmac cloud $ / zero-wait's = %.3f (target <= 0.40): %s" % (d, "met" if d <= 0.40 else "NOT met"))
        checks.append("- 1.0x: tarmac JCT / zero-wait's = %.3f (target <= 1.05): %s" % (j, "met" if j <= 1.05 else "NOT met"))
        checks.append("- 1.0x: tarmac $ %.0f vs constant-wait (%d s) $ %.0f, JCT %.0f vs %.0f (target: lower $ at JCT no higher): %s" % (
            tm["cloud_usd"], cw_w, cw["cloud_usd"], tm["jct_mean_s"], cw["jct_mean_s"],
            "met" if tm["cloud_usd"] < cw["cloud_usd"] and tm["jct_mean_s"] <= cw["jct_mean_s"] else "NOT met"))
    checks.append("- %d GPUs: tarmac starved %d (target 0): %s; owned utilisation %.3f vs zero-wait's %.3f: %s" % (
        g, tm["starved"], "met" if tm["starved"] == 0 else "NOT met", tm["owned_utilisation"],
        zw["owned_utilisation"], "met" if tm["owned_utilisation"] >= zw["owned_utilisation"] else "NOT met"))
lines += ["## Targets", ""] + checks + [""]
import csv, datetime
ev = []
for x in csv.DictReader(open(pods)):
    t = datetime.datetime.strptime(x["timestamp"], "%Y-%m-%d %H:%M:%S").timestamp()
    ev.append((t, int(x["num_gpus"])))
    ev.append((t + float(x["duration"]), -int(x["num_gpus"])))
ev.sort()
t0, week, acc, cur, prev = ev[0][0], 7 * 86400.0, {}, 0, ev[0][0]
for t, g in ev:
    a = prev
    while a < t:
        k = int((a - t0) // week)
        b = min(t, t0 + (k + 1) * week)
        acc[k] = acc.get(k, 0) + cur * (b - a)
        a = b
    cur, prev = cur + g, t
lines += ["## No-wait GPU demand per week (mean GPUs busy if every job ran from its submission)", "",
          " ".join("w%d:%d" % (k, acc[k] / week) for k in sorted(acc) if k < 20), ""]
text = "\n".join(lines)
print(text)
open(out, "w").write(text)
PY
