#!/usr/bin/env python3
"""Reference numbers for the certified threshold and the agreement figures.

An implementation separate from the Go code, written from the definitions
with SciPy (Debian's python3-scipy) for every distribution: scipy.stats.binom
for the exact test, scipy.stats.beta for Clopper-Pearson bounds,
scipy.stats.norm for the power calculation. The one-sided lower bounds are
the drift rule's (calibration_drift.go). Run once here
(`python3 certify_reference.py` in this directory); its output is
certify_expected.json, which TestCertify_MatchesTheReference
(calibration_certify_test.go) checks the Go estimators against.
"""

import csv
import json
import math

from scipy.stats import beta, binom, norm

SETS = ["set_small.csv", "set_generated.csv", "set_confident.csv",
        "set_overconfident.csv", "set_empty.csv"]


def bucket(c):
    return min(max(math.floor(100 * c + 1e-9), 0), 100)


def read(path):
    with open(path, newline="") as f:
        return [dict(c=float(r["confidence"]), agent=r["agent_verdict"], human=r["human_verdict"],
                     audit=r["audit"] == "1", w=float(r["weight"])) for r in csv.DictReader(f)]


def cp_upper(k, n, conf):
    if n <= 0 or k >= n:
        return 1.0
    return float(beta.ppf(conf, k + 1, n - k))


def cp_two_sided(k, n, conf):
    if n <= 0:
        return 0.0, 1.0
    tail = (1 - conf) / 2
    lo = 0.0 if k <= 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - tail, k + 1, n - k))
    return lo, hi


def certify(pairs, alpha, conf):
    """Fixed sequence from 1.00 down over the audits alone."""
    delta = 1 - conf
    start = math.ceil(math.log(delta) / math.log(1 - alpha) - 1e-9)
    total_w = sum(p["w"] for p in pairs)
    out = dict(threshold=None, n=0, errors=0, error_upper=None, floor=None, coverage=None)
    routed = [bucket(p["c"]) for p in pairs if not p["audit"]]
    floor = max(routed) + 1 if routed else 0
    if floor <= 100:
        out["floor"] = floor / 100
    for k in range(100, floor - 1, -1):
        above = [p for p in pairs if bucket(p["c"]) >= k]
        audits = [p for p in above if p["audit"]]
        n = len(audits)
        e = sum(1 for p in audits if p["agent"] != p["human"])
        if n < start:
            continue
        if float(binom.cdf(e, n, alpha)) > delta:
            break
        out.update(threshold=k / 100, n=n, errors=e, error_upper=cp_upper(e, n, conf),
                   coverage=sum(p["w"] for p in above) / total_w)
    return out


def bins_cp(pairs):
    out = []
    for i in range(10):
        ps = [p for p in pairs if min(bucket(p["c"]) // 10, 9) == i]
        w = sum(p["w"] for p in ps)
        if not ps or w == 0:
            out.append(None)
            continue
        w2 = sum(p["w"] ** 2 for p in ps)
        acc = sum(p["w"] for p in ps if p["agent"] == p["human"]) / w
        n_eff = w * w / w2
        out.append(list(cp_two_sided(acc * n_eff, n_eff, 0.95)))
    return out


def agreement(pairs):
    n = len(pairs)
    if n == 0:
        return dict(n=0, raw=None, kappa=None, ac1=None)
    cats = sorted({p["agent"] for p in pairs} | {p["human"] for p in pairs})
    pa = sum(1 for p in pairs if p["agent"] == p["human"]) / n
    row = {c: sum(1 for p in pairs if p["agent"] == c) / n for c in cats}
    col = {c: sum(1 for p in pairs if p["human"] == c) / n for c in cats}
    pk = sum(row[c] * col[c] for c in cats)
    kappa = (pa - pk) / (1 - pk) if pk < 1 else None
    ac1 = None
    if len(cats) > 1:
        pe = sum(((row[c] + col[c]) / 2) * (1 - (row[c] + col[c]) / 2) for c in cats) / (len(cats) - 1)
        ac1 = (pa - pe) / (1 - pe) if pe < 1 else None
    return dict(n=n, raw=pa, kappa=kappa, ac1=ac1)


def feasibility(pairs, alpha):
    w = sum(p["w"] for p in pairs)
    if w == 0:
        return dict(agent_error_rate=None, min_human_share=0.0)
    mu = max(1 - sum(p["w"] for p in pairs if p["agent"] == p["human"]) / w, 0)
    return dict(agent_error_rate=mu, min_human_share=max(0.0, (mu - alpha) / (1 - alpha)))


def audits_needed(p, alpha, delta, power):
    if p >= alpha:
        return None
    zd, zp = float(norm.ppf(1 - delta)), float(norm.ppf(power))
    root = (zd * math.sqrt(alpha * (1 - alpha)) + zp * math.sqrt(p * (1 - p))) / (alpha - p)
    floor = math.ceil(math.log(delta) / math.log(1 - alpha) - 1e-9)
    return max(math.ceil(root * root - 1e-9), floor)


def main():
    out = {"sets": {}}
    for name in SETS:
        pairs = read(name)
        out["sets"][name] = {
            "certify": {f"{a}/{c}": certify(pairs, a, c) for a in (0.02, 0.05, 0.1) for c in (0.9, 0.95)},
            "bins_clopper_pearson": bins_cp(pairs),
            "agreement": agreement(pairs),
            "feasibility": {str(a): feasibility(pairs, a) for a in (0.02, 0.1)},
        }
    out["binomial_cdf"] = [dict(k=k, n=n, p=p, cdf=float(binom.cdf(k, n, p)))
                           for k, n, p in [(0, 149, 0.02), (0, 148, 0.02), (3, 400, 0.02), (8, 400, 0.02),
                                           (12, 1000, 0.01), (50, 100, 0.5), (0, 1, 0.3), (7, 30, 0.1)]]
    out["clopper_pearson"] = [dict(k=k, n=n, confidence=c, lower=cp_two_sided(k, n, c)[0],
                                   upper=cp_two_sided(k, n, c)[1], upper_one_sided=cp_upper(k, n, c))
                              for k, n, c in [(0, 10, 0.95), (1, 10, 0.95), (5, 10, 0.95), (10, 10, 0.95),
                                              (3, 400, 0.95), (0, 149, 0.95), (2.5, 7.3, 0.95), (17, 20, 0.9),
                                              (1, 1000, 0.99)]]
    out["lower_one_sided"] = [dict(k=k, n=n, confidence=c, lower=0.0 if k == 0 else float(beta.ppf(1 - c, k, n - k + 1)))
                              for k, n, c in [(0, 20, 0.95), (3, 20, 0.95), (4, 20, 0.95), (11, 200, 0.95),
                                              (5, 5, 0.95), (1, 200, 0.9)]]
    out["audits_needed"] = [dict(p=p, alpha=a, delta=d, power=pw, n=audits_needed(p, a, d, pw))
                            for p, a, d, pw in [(0.0, 0.02, 0.05, 0.8), (0.005, 0.02, 0.05, 0.8),
                                                (0.01, 0.02, 0.05, 0.8), (0.015, 0.02, 0.1, 0.9),
                                                (0.03, 0.05, 0.05, 0.8), (0.02, 0.02, 0.05, 0.8)]]
    with open("certify_expected.json", "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
