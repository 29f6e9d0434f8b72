#!/usr/bin/env python3
"""Compare the dashboard as headless Chromium rendered it with the API.

    dashboard_check.py --dom DOM.html --before DIR --after DIR

DOM.html: `chromium --dump-dom` of /#token=...  DIR (read just before and
just after Chromium ran): timeseries.json, spend.json, budgets.json,
decisions.json, pools.json, running.json (GET /v1/jobs?state=running) and
metrics.json (prom_parse.py's JSON of /metrics).

Exit 0: every figure on the page is the API's.  Exit 3: a figure that
should hold still (GPUs, jobs, decisions, pools) changed between the two
API reads, so the page cannot be judged; the caller retries.  Exit 1: a
mismatch, each printed.

Counts are compared exactly: they are equal before and after (else exit
3), so the page, read in between, must show that value.  Spend only grows
(an append-only ledger), so the page's figure lies between the two reads;
the projection moves both ways as time passes and is allowed the spread of
the two reads plus 5 cents (sub-cent remainders per node and team are
carried outside the ledger until they make a cent).
"""
import argparse
import json
import os
import sys
from html.parser import HTMLParser

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


class Dom(HTMLParser):
    """Elements by id, plus the rows and chart parts the checks need."""

    def __init__(self):
        super().__init__()
        self.by_id = {}
        self.body = {}
        self.bars = []        # attrs of .bar-row
        self.decisions = []   # data-id of rows of #decisions
        self.pools = {}       # data-pool -> live nodes (data-value)
        self.chart = {}       # chart id -> {"path": n, "rect": n}
        self.stack = []       # open elements: (tag, id)
        self.texts = {}
        self.pool_row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        ids = [i for _, i in self.stack if i]
        if "id" in a:
            self.by_id[a["id"]] = a
            self.texts[a["id"]] = ""
        if "bar-row" in a.get("class", "").split():
            self.bars.append(a)
        if tag == "tr" and "decisions" in ids and "data-id" in a:
            self.decisions.append(int(a["data-id"]))
        if tag == "tr" and "pools" in ids and "data-pool" in a:
            self.pool_row = a["data-pool"]
        if tag == "td" and "pools" in ids and "data-value" in a:
            self.pools[self.pool_row] = int(a["data-value"])
        for cid in ("chart-gpus", "chart-queue", "chart-util"):
            if cid in ids:
                c = self.chart.setdefault(cid, {"path": 0, "rect": 0})
                if tag in c:
                    c[tag] += 1
        if tag not in ("br", "img", "input", "meta", "link", "line", "rect", "path"):
            self.stack.append((tag, a.get("id")))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        for _, i in self.stack:
            if i in self.texts:
                self.texts[i] += data


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def number(text):
    """The page's text of a figure as a number ("1,234", "$5.60", "0.25")."""
    t = text.replace(",", "").replace("$", "").replace("%", "").strip()
    return float(t)


def metric_sum(metrics, family, **labels):
    total = 0.0
    for s in metrics[family]["samples"]:
        if all(s["labels"].get(k) == v for k, v in labels.items()):
            total += s["value"]
    return total


def stable(before, after):
    """The figures that must not move while Chromium reads the page."""
    def view(d):
        return (d["timeseries"]["now"], [x["id"] for x in d["decisions"]["items"]],
                [(p["name"], p["live_nodes"]) for p in d["pools"]["items"]],
                len(d["running"]["items"]))
    return view(before) == view(after)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dom", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    a = ap.parse_args()

    names = ["timeseries", "spend", "budgets", "decisions", "pools", "running", "metrics"]
    before = {n: load(a.before, n + ".json") for n in names}
    after = {n: load(a.after, n + ".json") for n in names}
    if not stable(before, after):
        print("dashboard_check: the fleet changed between the two API reads; retry")
        return 3

    dom = Dom()
    with open(a.dom) as f:
        dom.feed(f.read())
    if dom.body.get("data-state") != "ready":
        fail(f"the page did not finish loading: body data-state={dom.body.get('data-state')!r},"
             f" status {dom.texts.get('status', '')!r}")
        return 1

    def shown(elem_id):
        attrs = dom.by_id.get(elem_id)
        if attrs is None:
            fail(f"#{elem_id} is missing")
            return None, None
        return attrs.get("data-value"), dom.texts.get(elem_id, "").strip()

    # 1. Figures now: the page, the timeseries' "now", and /metrics (an
    # independent statement) agree exactly.
    now = before["timeseries"]["now"]
    m = before["metrics"]
    expect = {
        "gpus-provisioned": (now["gpus_provisioned"], metric_sum(m, "tarmac_gpus", state="provisioned")),
        "gpus-allocated": (now["gpus_allocated"], metric_sum(m, "tarmac_gpus", state="allocated")),
        "gpus-idle": (now["gpus_idle"], metric_sum(m, "tarmac_gpus", state="idle")),
        "jobs-queued": (now["queued_jobs"], metric_sum(m, "tarmac_queue_jobs")),
        "jobs-running": (now["running_jobs"], len(before["running"]["items"])),
    }
    for elem_id, (api_value, other) in expect.items():
        raw, text = shown(elem_id)
        if raw is None:
            continue
        if abs(float(api_value) - float(other)) > 1e-6:
            fail(f"{elem_id}: /v1/timeseries says {api_value}, the other read says {other}")
        if raw == "" or abs(float(raw) - float(api_value)) > 1e-6:
            fail(f"{elem_id}: the page holds {raw!r}, the API says {api_value}")
        try:
            if abs(number(text) - float(api_value)) > 0.005:
                fail(f"{elem_id}: the page shows {text!r}, the API says {api_value}")
        except ValueError:
            fail(f"{elem_id}: the page shows {text!r}, not a number")
    print(f"dashboard_check: now {now}")

    # 2. Spend: between the two reads (the ledger only grows).
    for elem_id, key, slack in (("spend-total", "total_cents", 0), ("spend-idle", "idle_cents", 0),
                                ("spend-projected", "projected_cents", 5)):
        raw, text = shown(elem_id)
        if raw is None:
            continue
        if before["spend"][key] is None or after["spend"][key] is None:
            # Withheld from this token (an engineer's): nothing shown.
            if raw != "" or text != "–":
                fail(f"{elem_id}: the API withholds it, the page shows {text!r} ({raw!r})")
            continue
        lo = min(before["spend"][key], after["spend"][key]) - slack
        hi = max(before["spend"][key], after["spend"][key]) + slack
        if raw == "" or not lo <= int(raw) <= hi:
            fail(f"{elem_id}: the page holds {raw!r} cents, the API {lo + slack}..{hi - slack}")
        elif abs(number(text) * 100 - int(raw)) > 0.5:
            fail(f"{elem_id}: the page shows {text!r} for {raw} cents")

    # 3. Budgets: one bar per budget with its cap, spent between the reads;
    # a bar for each team that spends without a cap.
    bars = {b["data-scope"]: b for b in dom.bars}
    want = {}
    for x in before["budgets"]["items"]:
        want[x["scope_kind"] + ":" + x["scope"]] = x
    capped = set(want)
    for t in before["spend"]["teams"]:
        if "team:" + t["team"] not in capped:
            want["team:" + t["team"]] = None
    for scope, x in want.items():
        b = bars.get(scope)
        if b is None:
            fail(f"no bar for {scope}")
            continue
        if x is not None and b.get("data-cap-cents") != str(x["cap_cents"]):
            fail(f"{scope}: cap {b.get('data-cap-cents')!r} on the page, {x['cap_cents']} in the API")
        if x is not None:
            after_x = next(y for y in after["budgets"]["items"]
                           if y["scope_kind"] + ":" + y["scope"] == scope)
            lo, hi = x["spent_cents"], after_x["spent_cents"]
        else:
            lo = next(t["cents"] for t in before["spend"]["teams"] if "team:" + t["team"] == scope)
            hi = next((t["cents"] for t in after["spend"]["teams"] if "team:" + t["team"] == scope), lo)
        if not lo <= int(b.get("data-spent-cents", "-1")) <= hi:
            fail(f"{scope}: spent {b.get('data-spent-cents')} on the page, the API {lo}..{hi}")
    for scope in set(bars) - set(want):
        fail(f"a bar for {scope}, which the API does not list")
    print(f"dashboard_check: {len(bars)} budget bars")

    # 4. Decisions and pools: the same rows in the same order.
    api_ids = [x["id"] for x in before["decisions"]["items"]]
    if dom.decisions != api_ids:
        fail(f"decisions on the page {dom.decisions}, in the API {api_ids}")
    api_pools = {p["name"]: p["live_nodes"] for p in before["pools"]["items"]}
    if dom.pools != api_pools:
        fail(f"pools on the page {dom.pools}, in the API {api_pools}")

    # 5. Charts: drawn, one hover column per point of the series.
    npoints = len(before["timeseries"]["points"])
    for cid, lines in (("chart-gpus", 3), ("chart-queue", 2)):
        c = dom.chart.get(cid, {"path": 0, "rect": 0})
        if c["path"] < lines:
            fail(f"{cid}: {c['path']} paths drawn, expected at least {lines}")
        if c["rect"] != npoints:
            fail(f"{cid}: {c['rect']} steps drawn, the API gave {npoints} points")

    print(f"dashboard_check: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
