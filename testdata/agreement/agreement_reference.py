#!/usr/bin/env python3
"""Reference numbers for the reviewers' agreement report (agreement.go).

Written from the definitions, apart from the Go code: Krippendorff's alpha
for nominal data by its pairable-values form (disagreement observed within
units over disagreement expected among all pairable values, Krippendorff
2011, "Computing Krippendorff's Alpha-Reliability"), Gwet's AC1 and
Cohen's kappa of each task's first two votes from two-rater tables, raw
pairwise agreement, and each reviewer's agreement with the consensus and
with the agent.

Run once here (`python3 agreement_reference.py`): it writes the generated
set (set_generated.csv, from a fixed seed) and agreement_expected.json,
which TestTeamAgreement_MatchesTheReference (agreement_test.go) checks.
The set set_krippendorff.csv is the paper's nominal example with missing
values (four observers, twelve units; its alpha is 0.743).
"""

import csv
import itertools
import json
import random
from collections import Counter

SETS = ["set_krippendorff.csv", "set_generated.csv", "set_split.csv"]


def generate(path):
    rng = random.Random(34)
    people = ["ann", "bob", "cat", "dan", "eve"]
    verdicts = ["approve", "reject", "escalate"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["task", "agent", "consensus", "votes"])
        for i in range(200):
            truth = rng.choices(verdicts, weights=[6, 3, 1])[0]
            m = rng.randint(2, 5)
            voters = rng.sample(people, m)
            votes = []
            for p in voters:
                skill = {"ann": 0.9, "bob": 0.8, "cat": 0.7, "dan": 0.85, "eve": 0.6}[p]
                v = truth if rng.random() < skill else rng.choice(verdicts)
                votes.append(p + ":" + v)
            agent = "" if rng.random() < 0.1 else (truth if rng.random() < 0.8 else rng.choice(verdicts))
            consensus = Counter(v.split(":")[1] for v in votes).most_common(1)[0][0]
            w.writerow(["t%03d" % i, agent, consensus, ";".join(votes)])


def read(path):
    tasks = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            votes = [tuple(v.split(":")) for v in r["votes"].split(";") if v]
            tasks.append(dict(agent=r["agent"] or None, consensus=r["consensus"], votes=votes))
    return tasks


def alpha(tasks):
    # Pairable values: units with two values or more.
    units = [[v for _, v in t["votes"]] for t in tasks if len(t["votes"]) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    if n < 2:
        return None
    d_o = 0.0
    for u in units:
        m = len(u)
        d_o += sum(1 for a, b in itertools.permutations(u, 2) if a != b) / (m - 1)
    d_o /= n
    counts = Counter(values)
    d_e = sum(counts[c] * counts[k] for c in counts for k in counts if c != k) / (n * (n - 1))
    if d_e == 0:
        return None
    return 1 - d_o / d_e


def two_raters(pairs):
    n = len(pairs)
    if n == 0:
        return dict(n=0, raw=None, kappa=None, ac1=None)
    cats = sorted({a for a, _ in pairs} | {b for _, b in pairs})
    pa = sum(1 for a, b in pairs if a == b) / n
    r = {c: sum(1 for a, _ in pairs if a == c) / n for c in cats}
    c_ = {c: sum(1 for _, b in pairs if b == c) / n for c in cats}
    pe_k = sum(r[c] * c_[c] for c in cats)
    kappa = None if pe_k == 1 else (pa - pe_k) / (1 - pe_k)
    q = len(cats)
    ac1 = None
    if q >= 2:
        pe = sum(((r[c] + c_[c]) / 2) * (1 - (r[c] + c_[c]) / 2) for c in cats) / (q - 1)
        ac1 = None if pe == 1 else (pa - pe) / (1 - pe)
    elif q == 1:
        ac1 = 1.0
    return dict(n=n, raw=pa, kappa=kappa, ac1=ac1)


def report(tasks):
    multi = [t for t in tasks if len(t["votes"]) >= 2]
    pairs = [(a[1], b[1]) for t in multi for a, b in itertools.combinations(t["votes"], 2)]
    reviewers = {}
    for t in tasks:
        for p, v in t["votes"]:
            e = reviewers.setdefault(p, dict(votes=0, consensus=0, agent_votes=0, agent=0))
            e["votes"] += 1
            e["consensus"] += v == t["consensus"]
            if t["agent"] is not None:
                e["agent_votes"] += 1
                e["agent"] += v == t["agent"]
    return dict(
        tasks=len(multi),
        pairs=len(pairs),
        raw=(sum(1 for a, b in pairs if a == b) / len(pairs)) if pairs else None,
        first_two=two_raters([(t["votes"][0][1], t["votes"][1][1]) for t in multi]),
        alpha=alpha(tasks),
        reviewers=[dict(email=p, votes=e["votes"], with_consensus=e["consensus"] / e["votes"],
                        agent_votes=e["agent_votes"],
                        with_agent=(e["agent"] / e["agent_votes"]) if e["agent_votes"] else None)
                   for p, e in sorted(reviewers.items())],
    )


if __name__ == "__main__":
    generate("set_generated.csv")
    out = {s: report(read(s)) for s in SETS}
    with open("agreement_expected.json", "w") as f:
        json.dump(out, f, indent=2, sort_keys=True)
        f.write("\n")
    print(json.dumps({s: out[s]["alpha"] for s in SETS}))
