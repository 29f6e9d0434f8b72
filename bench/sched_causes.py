"""bench/sched_causes.py: what a missed wait cell is made of, one rule for
run-sched-targets.sh and run-sched-heldout.sh (both import it).

A cell is one replay's results by policy name (the JSON's "results" rows
for one trace, fleet size, load and seed).  tarmac misses a baseline there
when its mean or p95 wait is above the baseline's.  The miss is, checked
in this order:

  trade      the baseline passed jobs over the starvation bound in that
             cell: the waits starvation-first gives up (docs/measuring.md,
             "Measuring");
  estimates  the oracle (tarmac's own policy told every true runtime) is
             at or below the baseline on mean and p95: what prediction
             costs;
  policy     the oracle misses too.
"""

CAUSES = ("trade", "estimates", "policy")


def above(p, base):
    """Whether p's mean or p95 wait is above base's."""
    return p["wait_mean_s"] > base["wait_mean_s"] or p["wait_p95_s"] > base["wait_p95_s"]


def cause(cell, name):
    """The cause of tarmac's miss against baseline `name` in `cell`, one of CAUSES."""
    base = cell[name]
    if base["starved"] > 0:
        return "trade"
    return "policy" if above(cell["oracle"], base) else "estimates"
