#!/usr/bin/python3
"""tests/bench/compare.py (what scripts/bench-ab prints), as TAP, on bench
results made up here: which side a target's or a sample's pairs of runs
favour, for targets where less is better and where more is, and when a
difference is called better, worse or within the noise (a two-sided sign
test over the pairs at p <= 0.05).

make check runs it with MCP_TEST_SRCDIR set (tests/unit/local.am).
"""

import io
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.join(os.environ.get("MCP_TEST_SRCDIR", "."), "tests", "bench"))

import compare  # noqa: E402
from tap import done, ok  # noqa: E402  (tests/unit/tap.py, beside this file)


def run_doc(burst, tput, warm_ratio, first_cold=None):
    """One bench result: the burst samples (ms), the throughput (calls/s,
    a rate by its unit in the summary, as bench.py writes it) and the warm
    call's target ratio."""
    samples = {"burst": burst, "tput_service": [tput]}
    if first_cold is not None:
        samples["first_cold"] = first_cold
    units = {kind: {"unit": "per_s" if kind == "tput_service" else "ms"} for kind in samples}
    return {"samples": samples, "summary": units, "targets": [
        {"name": "warm_vs_host", "value": warm_ratio, "bound": 2.5, "op": "<=", "description": "warm / host"},
        {"name": "tput_vs_host", "value": tput / 40.0, "bound": 0.5, "op": ">=", "description": "calls/s / host"},
    ]}


def by(rows, key, name):
    return next(r for r in rows if r[key] == name)


def main():
    # The sign test itself.
    ok(abs(compare.sign_p(6, 0) - 0.03125) < 1e-9, "6 pairs of 6 alike: p = 2/64")
    ok(abs(compare.sign_p(5, 0) - 0.0625) < 1e-9, "5 of 5: p = 2/32, not enough")
    ok(abs(compare.sign_p(8, 1) - 0.0390625) < 1e-9, "8 of 9: p = 20/512")
    ok(compare.sign_p(3, 3) == 1.0 and compare.sign_p(0, 0) == 1.0, "an even split, or no pairs: p = 1")

    # Six pairs: the change's burst is faster in every pair, its throughput
    # higher in every pair, its warm ratio higher (worse) in 4 of 6.
    base = [run_doc([300 + i, 320 + i, 340 + i], 10.0 + i * 0.1, 0.9 + 0.01 * i) for i in range(6)]
    warm = [0.95, 0.85, 0.97, 0.88, 0.99, 0.96]
    change = [run_doc([250 + i, 270 + i, 290 + i], 11.0 + i * 0.1, warm[i]) for i in range(6)]
    res = compare.compare(base, change)
    ok(res["pairs"] == 6, "6 pairs compared")
    burst = by(res["samples"], "kind", "burst")
    ok(burst["favour_change"] == 6 and burst["verdict"] == "better", "a burst faster in all 6 pairs: better")
    ok(burst["base_pooled"]["n"] == 18 and burst["base_pooled"]["median"] == 322.5,
       "the burst's samples pooled over the runs (18; median 322.5)")
    ok(abs(burst["change_pct"] - 100.0 * (272.5 - 322.5) / 322.5) < 1e-9, "the change in percent of the pooled medians")
    tput = by(res["samples"], "kind", "tput_service")
    ok(tput["rate"] and tput["verdict"] == "better", "a rate: more calls/s in all 6 pairs is better")
    t = by(res["targets"], "name", "tput_vs_host")
    ok(t["op"] == ">=" and t["verdict"] == "better", "a target bounded from below: a higher ratio is better")
    t = by(res["targets"], "name", "warm_vs_host")
    ok((t["favour_change"], t["favour_base"]) == (2, 4), "the warm ratio: 2 pairs for the change, 4 for the base")
    ok(t["verdict"] == "within the noise" and t["p"] == 0.6875, "4 of 6 is within the noise (p = 44/64)")
    ok(t["base"][0] == 0.9 and t["change"][0] == 0.95, "each run's ratio is kept, in run order")

    # The same, reversed: worse.
    res = compare.compare(change, base)
    ok(by(res["samples"], "kind", "burst")["verdict"] == "worse", "a burst slower in all 6 pairs: worse")
    ok(by(res["targets"], "name", "tput_vs_host")["verdict"] == "worse", "a lower ratio bounded from below: worse")

    # A kind only one side has, unequal run counts, ties.
    base = [run_doc([100], 10.0, 1.0, first_cold=[1200.0]) for _ in range(3)]
    change = [run_doc([100], 10.0, 1.0) for _ in range(4)]
    res = compare.compare(base, change)
    ok(res["pairs"] == 3, "unequal run counts: only the whole pairs")
    fc = by(res["samples"], "kind", "first_cold")
    ok(fc["change_pooled"]["n"] == 0 and fc["pairs"] == 0 and fc["verdict"] == "within the noise",
       "a kind missing on one side decides nothing")
    b = by(res["samples"], "kind", "burst")
    ok(b["ties"] == 3 and b["verdict"] == "within the noise", "equal figures are ties")

    # The command: files in, a report and JSON out; a file that is not a
    # bench result is a clear error.
    with tempfile.TemporaryDirectory() as d:
        paths = {}
        for side, docs in (("base", [run_doc([300], 10.0, 0.9)] * 6), ("change", [run_doc([200], 10.0, 0.9)] * 6)):
            paths[side] = []
            for i, doc in enumerate(docs):
                p = os.path.join(d, "%s-%d.json" % (side, i + 1))
                with open(p, "w") as f:
                    json.dump(doc, f)
                paths[side].append(p)
        out = io.StringIO()
        old, sys.stdout = sys.stdout, out
        try:
            rc = compare.main(["--base"] + paths["base"] + ["--change"] + paths["change"] + ["--json",
                                                                                              os.path.join(d, "c.json")])
        finally:
            sys.stdout = old
        text = out.getvalue()
        ok(rc == 0 and "6 pair(s) of runs" in text, "the command compares 6 pairs")
        line = next((l for l in text.splitlines() if l.strip().startswith("burst")), "")
        ok("better" in line and "6:0" in line, "its burst line: 6:0, better")
        with open(os.path.join(d, "c.json")) as f:
            ok(by(json.load(f)["samples"], "kind", "burst")["verdict"] == "better", "and the same in its JSON")
        bad = os.path.join(d, "bad.json")
        with open(bad, "w") as f:
            f.write('{"not": "a bench result"}')
        try:
            compare.main(["--base", bad, "--change", bad])
            ok(False, "a file without samples is refused")
        except SystemExit as e:
            ok("not a scripts/bench result" in str(e), "a file without samples is refused, by name")

    return done()


if __name__ == "__main__":
    sys.exit(main())
