#!/usr/bin/env python3
"""What tarmac saved on this run: the same jobs priced under the elastic
replay's two baselines, beside what tarmac spent.

    demo_compare.py --config FILE --tarmac BIN   (TARMAC_DATABASE_URL set)

Reads the finished jobs of the run from PostgreSQL (psql), writes them as a
pod list (the trace format `tarmac replay --elastic` reads), writes a price
table from the configuration's instance types, and replays them under a
static fleet sized for the peak and under a reactive autoscaler (docs/measuring.md,
"Baselines"), with the run's boot delay, idle grace, tick and spot hazard.
tarmac's own figures come from the run's ledger and nodes (`tarmac db
summary`). Idle GPU-hours are paid GPU-hours less those that finished jobs
used: boot, empty nodes and free GPUs on busy ones.

A job's run time is what the simulated node ran it for (sim_runtime_ms) or,
for real work, its finish less its start; a gang of N nodes becomes N
one-node jobs (the replay has no gangs).
"""
import argparse
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

UNITS_MS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}


def duration_ms(text, what):
    """The configuration's duration grammar: "90s", "3m", "1h30m"."""
    text = str(text).strip()
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        sys.exit("demo_compare: %s: cannot read duration %r" % (what, text))
    return int(sum(float(n) * UNITS_MS[u] for n, u in parts))


def psql():
    found = shutil.which("psql") or sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))[-1:]
    if not found:
        sys.exit("demo_compare: psql not found (run bash scripts/setup.sh)")
    return found if isinstance(found, str) else found[0]


def psql_csv(url, sql):
    out = subprocess.run([psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c",
                          "COPY (%s) TO STDOUT WITH (FORMAT csv, HEADER)" % sql],
                         check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(out.splitlines()))


JOBS_SQL = """
SELECT regexp_replace(left(coalesce(nullif(name, ''), 'job'), 20), '[^A-Za-z0-9._-]', '_', 'g')
         || '-' || id || '-' || k AS name,
       cpu_milli, memory_mib,
       CASE WHEN gpus > 0 THEN gpus ELSE 1 END AS num_gpu,
       CASE WHEN gpus > 0 THEN 1000 ELSE gpu_milli END AS gpu_milli,
       coalesce(gpu_model, '') AS gpu_spec,
       CASE WHEN preemptible THEN 'BE' ELSE 'LS' END AS qos,
       checkpointable,
       'Succeeded' AS pod_phase,
       submitted_ms / 1000 AS creation_time,
       submitted_ms / 1000 AS scheduled_time,
       submitted_ms / 1000 + ceil(coalesce(sim_runtime_ms, finished_ms - started_ms) / 1000.0)::bigint
         AS deletion_time
  FROM jobs, generate_series(1, nodes) AS k
 WHERE state IN ('succeeded', 'failed') AND coalesce(sim_runtime_ms, finished_ms - started_ms) > 0
 ORDER BY submitted_ms, id, k
"""

POD_COLUMNS = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos",
               "pod_phase", "creation_time", "deletion_time", "scheduled_time"]


def price_table(cfg):
    """One type per instance type a pool uses; spot prices only where a spot
    pool offers the type."""
    types, zones, spot_types = {}, [], set()
    providers = {p["name"]: p for p in cfg.get("providers", [])}
    for pool in cfg.get("pools", []):
        prov = providers[pool["provider"]]
        known = {t["name"]: t for t in prov.get("instance_types", [])}
        for z in pool.get("zones", []):
            if z not in zones:
                zones.append(z)
        for name in pool.get("instance_types", []):
            if name not in known:
                sys.exit("demo_compare: pool %s: instance type %s has no price in provider %s"
                         % (pool["name"], name, prov["name"]))
            types[name] = known[name]
            if pool.get("capacity_type", "on_demand") != "on_demand":
                spot_types.add(name)
    out = {"currency": "USD", "zones": zones or ["sim-a"], "types": []}
    for name, t in types.items():
        row = {"name": name, "gpus": int(t["gpus"]), "on_demand_per_hour": str(t["on_demand_price"])}
        for key in ("gpu_model", "cpu_milli", "memory_mib"):
            if key in t:
                row[key] = t[key]
        if name in spot_types and t.get("spot_price"):
            row["spot_per_hour"] = str(t["spot_price"])
        out["types"].append(row)
    return out, bool(spot_types)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--tarmac", required=True)
    args = ap.parse_args()
    url = os.environ.get("TARMAC_DATABASE_URL")
    if not url:
        sys.exit("demo_compare: TARMAC_DATABASE_URL is not set")
    cfg = yaml.safe_load(open(args.config))
    prices, spot = price_table(cfg)
    sim = next((p for p in cfg.get("providers", []) if p.get("kind") == "sim"), {})
    pools = cfg.get("pools", [])
    scale = float(cfg.get("time_scale", 1))
    tick_s = duration_ms(cfg.get("tick_interval", "10s"), "tick_interval") * scale / 1000
    grace_s = max(duration_ms(p.get("idle_grace", "10m"), "idle_grace") for p in pools) / 1000
    boot_s = duration_ms(sim.get("boot_delay", "3m"), "boot_delay") / 1000

    jobs = psql_csv(url, JOBS_SQL)
    if not jobs:
        print("demo: no finished jobs to compare")
        return
    be = [j for j in jobs if j["qos"] == "BE"]
    ckpt = "be" if be and all(j["checkpointable"] == "t" for j in be) else "none"
    with tempfile.TemporaryDirectory() as tmp:
        pods, table = os.path.join(tmp, "pods.csv"), os.path.join(tmp, "prices.yaml")
        with open(pods, "w", newline="") as f:
            w = csv.DictWriter(f, POD_COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(jobs)
        with open(table, "w") as f:
            yaml.safe_dump(prices, f, sort_keys=False)
        cmd = [args.tarmac, "replay", "--elastic", "--pods", pods, "--prices", table,
               "--policy", "static,reactive", "--json", "--spot", "on" if spot else "off",
               "--hazard", str(sim.get("spot_hazard", 0)), "--boot-s", "%g" % boot_s,
               "--grace-s", "%g" % grace_s, "--tick-s", "%g" % max(1, tick_s),
               "--checkpointable", ckpt, "--seed", str(sim.get("seed", 1))]
        if "spot_notice" in sim:
            cmd += ["--notice-s", "%g" % (duration_ms(sim["spot_notice"], "spot_notice") / 1000)]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
        replays = {r["policy"]: r for r in json.loads(res.stdout)["results"]}
    summary = json.loads(subprocess.run(
        [args.tarmac, "db", "summary", "--config", args.config, "--output", "json"],
        check=True, capture_output=True, text=True).stdout)
    s = summary[0] if isinstance(summary, list) else summary.get("items", [summary])[0]
    tarmac_usd = float(s["ledger_dollars"])
    rows = [("static fleet sized for the peak", replays["static"]["cost_usd"],
             replays["static"]["paid_gpu_hours"],
             replays["static"]["paid_gpu_hours"] - replays["static"]["useful_gpu_hours"]),
            ("reactive autoscaler", replays["reactive"]["cost_usd"], replays["reactive"]["paid_gpu_hours"],
             replays["reactive"]["paid_gpu_hours"] - replays["reactive"]["useful_gpu_hours"]),
            ("tarmac (this run, its ledger)", tarmac_usd, float(s["paid_gpu_hours"]),
             float(s["paid_gpu_hours"]) - float(s["used_gpu_hours"]))]
    print("demo: the same %d jobs under three fleets (the elastic replay's baselines on this run's"
          " jobs, prices of %s)" % (len(jobs), os.path.basename(args.config)))
    print("  %-31s %10s %10s %10s %12s" % ("fleet", "dollars", "paid GPU-h", "idle GPU-h", "tarmac saves"))
    for name, usd, paid, idle in rows:
        saves = "" if name.startswith("tarmac") else "%.0f%%" % (100 * (1 - tarmac_usd / usd)) if usd else "-"
        print("  %-31s %10.2f %10.1f %10.1f %12s" % (name, usd, paid, idle, saves))


if __name__ == "__main__":
    main()
