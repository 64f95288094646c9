#!/usr/bin/env python3
"""Reference numbers for calibration_test.go, computed apart from the Go code.

This script was written from the definitions in docs/calibration.md and
calibration.go's doc comments, not from the Go code, and works pair by pair
(the Go code sums pairs into confidence buckets first). It makes the data
sets (set_*.csv; the generated one from a fixed seed) and writes
expected.json. Run it once, from this directory, with Python 3 and its
standard library alone:

    python3 reference.py

Definitions it follows:
- A pair is (confidence c, agent verdict, human verdict, audit, weight w);
  y = 1 when the verdicts match. Routed pairs weigh 1, audits 1/rate.
- bucket(c) = floor(100c + 1e-9), clipped to 0..100; bin = min(bucket // 10, 9).
- Bin: n, W = sum w, mean confidence = sum(w c)/W, accuracy = sum(w y)/W,
  Wilson 95% interval of the accuracy with n_eff = W^2 / sum(w^2), z = 1.959963984540054.
- ECE = sum over bins of W_bin/W * |accuracy - mean confidence|; MCE = max
  of the same gap over bins with pairs; Brier = sum(w (c - y)^2) / W.
- Risk-coverage at threshold k/100 (k = 0..100): the pairs with bucket >= k;
  coverage = their W / total W; error = 1 - sum(w y)/W; upper = Wilson upper
  end with their n_eff.
- Recommendation for target t: the lowest k whose upper < t. Else, for each k
  (from 100 down) with pairs, need = least n >= 1 with Wilson upper(error, n) < t
  (none when n would pass 1,000,000); more = max(ceil(need - n_eff - 1e-9), 1);
  the least "more" wins, ties to the higher k. No pairs at all: need for error 0.
"""
import csv
import json
import math
import random

Z = 1.959963984540054
MAX_NEED = 1_000_000


def wilson(p, n):
    if n <= 0:
        return 0.0, 1.0
    z2 = Z * Z
    centre = p + z2 / (2 * n)
    spread = Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    den = 1 + z2 / n
    return max(0.0, (centre - spread) / den), min(1.0, (centre + spread) / den)


def bucket(c):
    return min(100, max(0, math.floor(c * 100 + 1e-9)))


def need_for(rate, target):
    # Wilson's upper end falls as n grows (for rates under 1/2): find the
    # first n by doubling, then step back linearly.
    if wilson(rate, MAX_NEED)[1] >= target:
        return None
    n = 1
    while wilson(rate, n)[1] >= target:
        n *= 2
    lo = n // 2
    for m in range(max(lo, 1), n + 1):
        if wilson(rate, m)[1] < target:
            return m
    return n


def region(pairs):
    n = len(pairs)
    w = sum(p["w"] for p in pairs)
    w2 = sum(p["w"] ** 2 for p in pairs)
    wy = sum(p["w"] * p["y"] for p in pairs)
    return n, w, w2, wy


def report(pairs, targets):
    total_w = sum(p["w"] for p in pairs)
    bins = []
    ece, mce = 0.0, 0.0
    for i in range(10):
        inside = [p for p in pairs if min(bucket(p["c"]) // 10, 9) == i]
        n, w, w2, wy = region(inside)
        b = {"n": n, "weight": w}
        if n:
            conf = sum(p["w"] * p["c"] for p in inside) / w
            acc = wy / w
            lo, hi = wilson(acc, w * w / w2)
            b.update(mean_confidence=conf, accuracy=acc, wilson_lower=lo, wilson_upper=hi)
            ece += w / total_w * abs(acc - conf)
            mce = max(mce, abs(acc - conf))
        bins.append(b)
    out = {"n": len(pairs), "bins": bins}
    if pairs:
        out["ece"] = ece
        out["mce"] = mce
        out["brier"] = sum(p["w"] * (p["c"] - p["y"]) ** 2 for p in pairs) / total_w
    curve = []
    for k in range(101):
        above = [p for p in pairs if bucket(p["c"]) >= k]
        n, w, w2, wy = region(above)
        point = {"threshold": k / 100, "n": n}
        if n:
            err = max(1 - wy / w, 0.0)
            point.update(coverage=w / total_w, error_rate=err, error_upper=wilson(err, w * w / w2)[1])
        curve.append(point)
    out["risk_coverage"] = curve
    recs = {}
    for t in targets:
        rec = {}
        ok = [pt for pt in curve if "error_upper" in pt and pt["error_upper"] < t]
        if ok:
            rec["threshold"] = ok[0]["threshold"]
            rec["automation_rate"] = ok[0]["coverage"]
        elif not pairs:
            rec["more_audits_needed"] = need_for(0.0, t)
        else:
            best = None
            for k in range(100, -1, -1):
                pt = curve[k]
                if pt["n"] == 0:
                    continue
                above = [p for p in pairs if bucket(p["c"]) >= k]
                _, w, w2, _ = region(above)
                need = need_for(pt["error_rate"], t)
                if need is None:
                    continue
                more = max(math.ceil(need - w * w / w2 - 1e-9), 1)
                if best is None or more < best[0]:
                    best = (more, k)
            if best:
                rec["more_audits_needed"] = best[0]
                rec["at_threshold"] = best[1] / 100
        recs[str(t)] = rec
    out["recommendations"] = recs
    return out


def read(path):
    pairs = []
    with open(path) as f:
        for row in csv.DictReader(f):
            pairs.append({
                "c": float(row["confidence"]),
                "y": 1 if row["agent_verdict"] == row["human_verdict"] else 0,
                "w": float(row["weight"]),
            })
    return pairs


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["confidence", "agent_verdict", "human_verdict", "audit", "weight"])
        w.writerows(rows)


def generate():
    """A history like the demo's: threshold 0.8, routed pairs below it, audits
    at rate 0.2 (weight 5) above it, the agent wrong a little less often
    than its confidence says (70% of 1 - c)."""
    rng = random.Random(16)
    rows = []
    for _ in range(3000):
        c = round(rng.betavariate(6, 1.2), 2)
        right = rng.random() < 1 - 0.7 * (1 - c)
        agent = rng.choice(["approve", "reject"])
        human = agent if right else ("reject" if agent == "approve" else "approve")
        if c >= 0.8:
            if rng.random() >= 0.2:
                continue  # completed by the agent and not audited: no pair
            rows.append([c, agent, human, 1, 5.0])
        else:
            rows.append([c, agent, human, 0, 1.0])
    write("set_generated.csv", rows)


def main():
    generate()
    sets = {
        "set_small.csv": [0.02, 0.2, 0.5],
        "set_generated.csv": [0.02, 0.05, 0.1, 0.2],
        "set_confident.csv": [0.02, 0.05],
        "set_overconfident.csv": [0.02],
        "set_empty.csv": [0.02, 0.05],
    }
    expected = {name: report(read(name), targets) for name, targets in sets.items()}
    with open("expected.json", "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
