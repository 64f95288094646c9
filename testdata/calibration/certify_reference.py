#!/usr/bin/env python3
"""Reference numbers for the certified threshold and the agreement figures.

An implementation separate from the Go code, written from the definitions
with SciPy (Debian's python3-scipy) for every distribution: scipy.stats.binom
for the exact test, scipy.stats.beta for Clopper-Pearson bounds,
scipy.stats.norm for the power calculation. The one-sided lower bounds are
the drift rule's (calibration_drift.go). Run once here
(`python3 certify_reference.py` in this directory); its output is
certify_expected.json, which TestCertify_MatchesTheReference
(calibration_certify_test.go) checks the Go estimators against, and
TestVerifierCertificates_MatchTheReference (verifier_pairs_test.go) the
per-verifier certificates of a cascade (set_cascade.csv).
"""

import csv
import json
import math
import random

from scipy.stats import beta, binom, norm

SETS = ["set_small.csv", "set_generated.csv", "set_confident.csv",
        "set_overconfident.csv", "set_empty.csv", "set_mixed.csv", "set_routed_first.csv",
        "set_top_only.csv"]


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


def fine(c):
    """The thousandth of a confidence, as the certificate's grid."""
    return min(max(math.floor(1000 * c + 1e-9), 0), 1000)


def certify(pairs, alpha, conf):
    """Fixed sequence from the top down over every labelled answer.

    The thresholds tested are the lowest labelled confidence of each
    thousandth that holds a label. At each, the labels at or above it are
    split by weight (the sampling stratum: 1 for routed tasks, 1/r for
    audits at rate r); each stratum's errors get a one-sided Clopper-Pearson
    bound at confidence 1 - delta * w / (sum of the weights present), and
    the bound on the error rate is the sum of those weighted by the share of
    answers each stratum stands for (n * w / sum of n * w). A threshold whose
    bound could not be at most alpha even with no error is not tested. The
    sequence starts at the first threshold whose bound with no error is at
    most alpha / 2 (or, when none is, at the first where it is at most
    alpha); the first tested whose bound exceeds alpha stops it.
    """
    delta = 1 - conf
    out = dict(threshold=None, n=0, errors=0, audits=0, routed=0, error_upper=None, floor=None, coverage=None)
    if not pairs:
        return out
    total_w = sum(p["w"] for p in pairs)
    out["floor"] = min(p["c"] for p in pairs)
    candidates = []
    for k in sorted({fine(p["c"]) for p in pairs}, reverse=True):
        t = min(p["c"] for p in pairs if fine(p["c"]) == k)
        above = [p for p in pairs if p["c"] >= t]
        strata = {}
        for p in above:
            strata.setdefault(p["w"], []).append(p)
        weights = sum(strata)
        mass = sum(p["w"] for p in above)
        clean = upper = 0.0
        for w, ps in strata.items():
            errors = sum(1 for p in ps if p["agent"] != p["human"])
            level = 1 - delta * w / weights
            clean += len(ps) * w / mass * cp_upper(0, len(ps), level)
            upper += len(ps) * w / mass * cp_upper(errors, len(ps), level)
        audits = sum(1 for p in above if p["audit"])
        candidates.append(dict(threshold=t, clean=min(clean, 1.0), upper=min(upper, 1.0), n=len(above),
                               errors=sum(1 for p in above if p["agent"] != p["human"]), audits=audits,
                               routed=len(above) - audits, coverage=mass / total_w))
    tested = [c for c in candidates if c["clean"] <= alpha]
    roomy = [i for i, c in enumerate(tested) if c["clean"] <= alpha / 2]
    for c in tested[roomy[0] if roomy else 0:]:
        if c["upper"] > alpha:
            break
        out.update(threshold=c["threshold"], n=c["n"], errors=c["errors"], audits=c["audits"], routed=c["routed"],
                   error_upper=c["upper"], coverage=c["coverage"])
    return out


def write(name, rows):
    with open(name, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["confidence", "agent_verdict", "human_verdict", "audit", "weight"])
        for c, right, audit, weight in rows:
            w.writerow([repr(c), "approve", "approve" if right else "reject", "1" if audit else "0", repr(weight)])


def make_sets():
    """The data sets of mixed evidence, from fixed seeds."""
    # Routed below a threshold of 0.9, audited above it at 10% for the
    # first half of the time and at 25% for the second: three strata.
    rng = random.Random(41)
    rows = []
    for i in range(6000):
        c = round(0.5 + 0.5 * rng.random(), 3)
        right = rng.random() >= 0.25 * (1 - c)
        rate = 0.1 if i < 3000 else 0.25
        if c < 0.9:
            rows.append((c, right, False, 1.0))
        elif rng.random() < rate:
            rows.append((c, right, True, 1 / rate))
    write("set_mixed.csv", rows)
    # Everything routed to people first (a threshold of 1): 250 answers,
    # 58% of them in [0.99, 1) with one in ten of those wrong, the rest
    # spread below with more errors.
    rng = random.Random(42)
    rows = []
    for _ in range(250):
        if rng.random() < 0.58:
            c = round(0.99 + 0.01 * rng.random(), 4)
            right = rng.random() >= (0.2 if c < 0.995 else 0.02)
        else:
            c = round(0.6 + 0.39 * rng.random(), 3)
            right = rng.random() >= 0.35 * (1 - c) + 0.05
        rows.append((min(c, 1.0), right, False, 1.0))
    write("set_routed_first.csv", rows)
    # Every blind audit at 0.97 and no person's decision yet: the evidence
    # ends at 0.97.
    write("set_top_only.csv", [(0.97, True, True, 10.0)] * 160)


CASCADE = ["rules", "small", "large"]


def make_cascade():
    """A cascade's tasks, from seed 44: rules, then small, then large.

    Rules answer three tasks in ten at confidence 1 and decide them; small
    decides at 0.8, large at 0.7; the rest go to people. A task the
    verifiers decided is audited at 25% (a quarter of them, drawn here).
    One row a task: each verifier's verdict and confidence (empty where it
    was not asked or declined), who decided ("" for people), whether it
    was audited, and the person's verdict (empty when nobody looked).
    """
    rng = random.Random(44)
    thresholds = {"rules": 1.0, "small": 0.8, "large": 0.7}
    rows = []
    for i in range(3000):
        truth = "approve" if rng.random() < 0.6 else "reject"
        other = "reject" if truth == "approve" else "approve"
        hard = rng.random() < 0.3
        row = {"task": f"t{i}", "audit_rate": "0.25", "decided_by": "", "audit": "0", "person": ""}
        for v in CASCADE:
            row[v + "_verdict"] = row[v + "_confidence"] = ""
        for v in CASCADE:
            if v == "rules":
                if hard or rng.random() >= 0.43:
                    continue  # no rule matched: passed on
                c, right = 1.0, rng.random() >= 0.01
            else:
                c = round(0.5 + 0.5 * rng.random(), 3)
                miss = (0.45 if hard else 0.2) * (1 - c) * (2 if v == "small" else 1)
                right = rng.random() >= miss
            row[v + "_verdict"], row[v + "_confidence"] = (truth if right else other), repr(c)
            if c >= thresholds[v]:
                row["decided_by"] = v
                break
        audited = row["decided_by"] != "" and rng.random() < 0.25
        if row["decided_by"] == "" or audited:
            row["person"] = truth
            row["audit"] = "1" if audited else "0"
        rows.append(row)
    with open("set_cascade.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["task", "audit_rate", "decided_by", "audit", "person"] +
                           [v + k for v in CASCADE for k in ("_verdict", "_confidence")], lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def cascade_pairs(path):
    """Each verifier's labelled answers, by the labelling rule.

    A person's decision on a task the verifiers passed on labels every
    verifier that answered it (weight 1); the blind audit of a task a
    verifier decided labels that verifier and those that answered before
    it (weight 1 / the audit rate). Nobody's verdict, no label.
    """
    out = {v: [] for v in CASCADE}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["person"] == "":
                continue
            audit = r["audit"] == "1"
            w = 1 / float(r["audit_rate"]) if audit else 1.0
            for v in CASCADE:
                if r[v + "_verdict"] != "":
                    out[v].append(dict(c=float(r[v + "_confidence"]), agent=r[v + "_verdict"], human=r["person"],
                                       audit=audit, w=w))
                if r["decided_by"] == v:
                    break
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
    make_sets()
    out = {"sets": {}}
    for name in SETS:
        pairs = read(name)
        out["sets"][name] = {
            "certify": {f"{a}/{c}": certify(pairs, a, c) for a in (0.02, 0.05, 0.1, 0.15) for c in (0.9, 0.95)},
            "bins_clopper_pearson": bins_cp(pairs),
            "agreement": agreement(pairs),
            "feasibility": {str(a): feasibility(pairs, a) for a in (0.02, 0.1)},
        }
    make_cascade()
    out["cascade"] = {v: {f"{a}/{c}": certify(pairs, a, c) for a in (0.02, 0.05, 0.1) for c in (0.9, 0.95)}
                      for v, pairs in cascade_pairs("set_cascade.csv").items()}
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
