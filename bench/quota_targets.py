"""bench/quota_targets.py: the table of `tarmac replay --quotas ... --json`
per policy and per team, and the targets of bench/run-quotas.sh beside
their figures.  Usage: quota_targets.py RESULTS.json BORROWERS"""
import json
import statistics
import sys

doc = json.load(open(sys.argv[1]))
borrowers = sys.argv[2] if len(sys.argv) > 2 else "checkpointable"
res = {r["policy"]: r for r in doc["results"]}
order = [p for p in ("strict-quota", "shared", "fairshare", "tarmac") if p in res]


def num(v, fmt="%.0f"):
    return "n/a" if v is None else fmt % v


print(f"- borrowers: every job may be reclaimed while it borrows; {borrowers}")
print()
print("| policy | utilisation | wait mean / p95 s | JCT mean s | starved | unfinished | GPU-hours "
      "| redone GPU-h | reclaims | guarantee met |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for p in order:
    r = res[p]
    print(f"| {p} | {100 * r['utilisation']:.2f}% | {num(r['wait_mean_s'])} / {num(r['wait_p95_s'])} "
          f"| {num(r['jct_mean_s'])} | {r['starved']:.0f} | {r['unfinished']:.0f} | {r['gpu_hours']:.0f} "
          f"| {r['redone_gpu_hours']:.1f} | {r['reclaims']:.0f} | {r['guarantee_met']:.4f} |")
print()
teams = {p: {t["team"]: t for t in res[p]["teams"]} for p in order}
names = sorted(teams["strict-quota"], key=lambda n: -teams["strict-quota"][n]["jobs"])
print("| team | quota GPUs | jobs (strict) | " + " | ".join(f"{p}: JCT s / ratio / met" for p in order) + " |")
print("|---|---:|---:|" + "---|" * len(order))
for n in names:
    cells = []
    for p in order:
        t = teams[p].get(n, {})
        cells.append(f"{num(t.get('jct_mean_s'))} / {num(t.get('sharing_ratio'), '%.2f')} / "
                     f"{num(t.get('guarantee_met'), '%.3f')}")
    print(f"| {n} | {teams['strict-quota'][n]['quota_gpus']:.0f} | {teams['strict-quota'][n]['jobs']:.0f} | "
          + " | ".join(cells) + " |")
print()

if "tarmac" not in res:
    sys.exit(0)
big = [n for n in names if teams["tarmac"].get(n, {}).get("jobs", 0) >= 100]
ratios = [teams["tarmac"][n]["sharing_ratio"] for n in big]
known = [x for x in ratios if x is not None]
t = res["tarmac"]
rows = []
worst = max(known) if known else None
rows.append(("every team with >= 100 jobs: sharing ratio <= 1.0",
             f"worst {num(worst, '%.2f')} over {len(big)} teams"
             + ("" if len(known) == len(ratios) else f" ({len(ratios) - len(known)} with no strict figure)"),
             worst is not None and worst <= 1.0 and len(known) == len(ratios)))
med = statistics.median(known) if known else None
rows.append(("median team's sharing ratio <= 0.8", num(med, "%.2f"), med is not None and med <= 0.8))
if "shared" in res:
    d = 100 * (t["utilisation"] - res["shared"]["utilisation"])
    rows.append(("utilisation within 2 pp of shared", f"{100 * t['utilisation']:.2f}% vs "
                 f"{100 * res['shared']['utilisation']:.2f}% ({d:+.2f} pp)", abs(d) <= 2))
rows.append(("within-quota demand met within the bound >= 99% of the time", f"{100 * t['guarantee_met']:.2f}%",
              t["guarantee_met"] >= 0.99))
share = t["redone_gpu_hours"] / t["gpu_hours"] if t["gpu_hours"] else 0
rows.append(("GPU-hours redone <= 2% of GPU-hours", f"{t['redone_gpu_hours']:.1f} ({100 * share:.3f}%)", share <= 0.02))
if "fairshare" in res:
    fw = [teams["fairshare"][n]["sharing_ratio"] for n in big if teams["fairshare"].get(n)]
    fw = max([x for x in fw if x is not None], default=None)
    rows.append(("worst team's ratio <= fairshare's worst", f"{num(worst, '%.2f')} vs {num(fw, '%.2f')}",
                 worst is not None and fw is not None and worst <= fw))
rows.append(("nobody past the starvation bound", f"{t['starved']:.0f} jobs", t["starved"] == 0))
print("| target (tarmac) | figure | met |")
print("|---|---|---|")
for name, fig, ok in rows:
    print(f"| {name} | {fig} | {'yes' if ok else '**no**'} |")
