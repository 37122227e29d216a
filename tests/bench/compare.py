#!/usr/bin/python3
"""Compare alternated runs of scripts/bench: a base and a change (scripts/bench-ab
makes them; any set of bench JSON files will do).

A single full run cannot tell a change apart on this machine: the burst and the
pool-empty figures move by a third between runs of the same code
(tests/bench/FINDINGS.md).  Runs taken in turn, base and change, face the same
noise alike.  For each target of the bench (its ratio in each run) and each
kind of sample (the median of each run, and all runs' samples pooled) this
prints both sides, the change in percent, and how many pairs of runs (the
base's i-th run against the change's i-th) favour the change.  A side is
called better or worse only when the pairs say so beyond chance (a two-sided
sign test, p <= 0.05: at least 6 pairs, all alike, or 8 of 9, ...); anything
else is "within the noise", whatever its medians.  Each row is its own
test: up to one row in 20 (one in 32 with 6 pairs) is called better or
worse by chance alone, about one of a full run's 30-odd rows, so a verdict
counts for the row a change was meant to move, named before the runs.

    compare.py --base B1.json B2.json ... --change C1.json C2.json ... [--json OUT]

Standard library only (with bench.py beside it), so that any Debian python3 runs it.
"""

import argparse
import json
import math
import sys

from bench import median, summary  # bench.py beside this file: the same statistics as its report

ALPHA = 0.05


def load(paths):
    runs = []
    for p in paths:
        try:
            with open(p) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit("compare.py: %s: %s" % (p, e))
        if not isinstance(doc, dict) or not isinstance(doc.get("samples"), dict):
            raise SystemExit("compare.py: %s: not a scripts/bench result (no samples)" % p)
        runs.append(doc)
    return runs


def sign_p(wins, losses):
    """Two-sided exact sign test (ties left out): the chance of a split at
    least this uneven between wins and losses if neither side were better."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def compare_pairs(base, change, lower_better):
    """base, change: one figure per run (None: missing in that run).  The
    pairs (i-th with i-th) that have both figures decide."""
    wins = losses = ties = 0
    for b, c in zip(base, change):
        if b is None or c is None:
            continue
        if c == b:
            ties += 1
        elif (c < b) == lower_better:
            wins += 1
        else:
            losses += 1
    p = sign_p(wins, losses)
    if p <= ALPHA:
        verdict = "better" if wins > losses else "worse"
    else:
        verdict = "within the noise"
    return {"pairs": wins + losses + ties, "favour_change": wins, "favour_base": losses, "ties": ties,
            "p": round(p, 4), "verdict": verdict}


def pct(b, c):
    if b is None or c is None or b == 0:
        return None
    return 100.0 * (c - b) / b


def median_of(values):
    return median([x for x in values if x is not None])


def targets(runs):
    """name -> (op, description, [value of each run or None])"""
    out = {}
    for i, doc in enumerate(runs):
        for t in doc.get("targets") or []:
            if not isinstance(t, dict) or not isinstance(t.get("value"), (int, float)):
                continue
            name = t.get("name")
            entry = out.setdefault(name, (t.get("op"), t.get("description", ""), [None] * len(runs)))
            entry[2][i] = float(t["value"])
    return out


def samples(runs):
    """kind -> [list of samples of each run or None], and the kinds that
    are rates (the unit the bench gives them, "per_s": more is better;
    every other kind is a time or a CPU figure)."""
    out, rates = {}, set()
    for i, doc in enumerate(runs):
        for kind, vals in doc["samples"].items():
            nums = [float(x) for x in vals if isinstance(x, (int, float))] if isinstance(vals, list) else []
            if not nums:
                continue
            out.setdefault(kind, [None] * len(runs))[i] = nums
        for kind, summ in (doc.get("summary") or {}).items():
            if isinstance(summ, dict) and summ.get("unit") == "per_s":
                rates.add(kind)
    return out, rates


def compare(base_runs, change_runs):
    n = min(len(base_runs), len(change_runs))
    base_runs, change_runs = base_runs[:n], change_runs[:n]
    res = {"pairs": n, "targets": [], "samples": []}
    tb, tc = targets(base_runs), targets(change_runs)
    for name in list(tb) + [k for k in tc if k not in tb]:
        op, desc, bv = tb.get(name, (None, "", [None] * n))
        op2, desc2, cv = tc.get(name, (None, "", [None] * n))
        op = op or op2
        row = {"name": name, "description": desc or desc2, "op": op, "base": bv, "change": cv,
               "base_median": median_of(bv), "change_median": median_of(cv)}
        row["change_pct"] = pct(row["base_median"], row["change_median"])
        row.update(compare_pairs(bv, cv, lower_better=(op != ">=")))
        res["targets"].append(row)
    (sb, rb), (sc, rc) = samples(base_runs), samples(change_runs)
    rates = rb | rc
    for kind in list(sb) + [k for k in sc if k not in sb]:
        bl, cl = sb.get(kind, [None] * n), sc.get(kind, [None] * n)
        bm = [median(x) if x else None for x in bl]
        cm = [median(x) if x else None for x in cl]
        row = {"kind": kind, "rate": kind in rates, "base_run_medians": bm, "change_run_medians": cm,
               "base_pooled": summary([v for x in bl if x for v in x]),
               "change_pooled": summary([v for x in cl if x for v in x])}
        row["change_pct"] = pct(row["base_pooled"]["median"], row["change_pooled"]["median"])
        row.update(compare_pairs(bm, cm, lower_better=kind not in rates))
        res["samples"].append(row)
    return res


def fmt(x, digits=1):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "%.0f" % x
    return ("%." + str(digits) + "f") % x


def fmt_pct(x):
    return "-" if x is None else "%+.1f%%" % x


def report(res, base_label, change_label, out=None):
    n = res["pairs"]
    w = (out or sys.stdout).write
    w("%d pair(s) of runs: base %s, change %s\n" % (n, base_label, change_label))
    w("A verdict needs a two-sided sign test over the pairs at p <= %.2f; otherwise \"within the noise\".\n"
      "Each row is tested alone: up to 1 row in %d may be called better or worse by chance alone.\n"
      % (ALPHA, round(1 / ALPHA)))
    w("\nTargets (each run's ratio; median of the runs' ratios):\n")
    w("  %-22s %-2s %9s %9s %8s  %-9s %s\n" % ("target", "op", "base", "change", "change", "pairs", "verdict"))
    for r in res["targets"]:
        w("  %-22s %-2s %9s %9s %8s  %-9s %s\n" % (
            r["name"], r["op"] or "", fmt(r["base_median"], 2), fmt(r["change_median"], 2),
            fmt_pct(r["change_pct"]), "%d:%d" % (r["favour_change"], r["favour_base"]), r["verdict"]))
        w("  %-22s    runs: %s | %s\n" % ("", " ".join(fmt(v, 2) for v in r["base"]),
                                          " ".join(fmt(v, 2) for v in r["change"])))
    w("\nSamples (all runs pooled: median and p90, n; pairs compare each run's median):\n")
    w("  %-32s %19s %19s %8s  %-9s %s\n" % ("kind (ms unless a rate)", "base med/p90 (n)", "change med/p90 (n)",
                                          "change", "pairs", "verdict"))
    for r in res["samples"]:
        b, c = r["base_pooled"], r["change_pooled"]
        w("  %-32s %19s %19s %8s  %-9s %s\n" % (
            r["kind"] + (" (rate)" if r["rate"] else ""),
            "%s/%s (%d)" % (fmt(b["median"]), fmt(b["p90"]), b["n"]),
            "%s/%s (%d)" % (fmt(c["median"]), fmt(c["p90"]), c["n"]),
            fmt_pct(r["change_pct"]), "%d:%d" % (r["favour_change"], r["favour_base"]), r["verdict"]))
    w("\n(pairs: favour change : favour base)\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare alternated runs of scripts/bench.")
    ap.add_argument("--base", nargs="+", required=True, help="the base's bench JSON files, in run order")
    ap.add_argument("--change", nargs="+", required=True, help="the change's bench JSON files, in run order")
    ap.add_argument("--base-label", default="base")
    ap.add_argument("--change-label", default="change")
    ap.add_argument("--json", help="also write the comparison as JSON here")
    a = ap.parse_args(argv)
    if len(a.base) != len(a.change):
        print("compare.py: %d base run(s) and %d change run(s): only the first %d pair(s) are compared"
              % (len(a.base), len(a.change), min(len(a.base), len(a.change))), file=sys.stderr)
    res = compare(load(a.base), load(a.change))
    report(res, a.base_label, a.change_label)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
