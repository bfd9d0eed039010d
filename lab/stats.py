"""
Statistics for the lab's comparisons: 95% intervals of a mean (Student t) and of a proportion (Wilson), and the paired
difference of every arm to the best one on the same windows. eval.py and the retrieval room both import this room.
"""
import math

import numpy as np

T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df):
    """The 97.5% quantile of Student's t with df degrees of freedom: the usual table up to 30, then the
    Cornish-Fisher expansion around the normal quantile (within 0.01% there)."""
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959964
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2) + \
        (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3)


def mean_ci(x):
    """Mean and 95% t-interval of a 1-D sample (a zero-width interval for a single value)."""
    x = np.asarray(x, dtype=np.float64)
    m = float(x.mean())
    h = 0.0 if len(x) < 2 else t975(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, [m - h, m + h]


def wilson(k, n):
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return [0.0, 1.0]
    z, p = 1.959964, k / n
    c, h = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, c - h), min(1.0, c + h)]


def paired_vs_best(results):
    """Per bucket: the arm with the lowest mean loss, and every arm's paired difference to it (same windows) with
    its 95% interval; an interval that contains 0 is a tie."""
    out = {}
    for label in results[0]['buckets']:
        best = min(results, key=lambda a: a['buckets'][label])
        rows = {}
        for a in results:
            d, ci = mean_ci(a['_per_window'][label] - best['_per_window'][label])
            rows[a['name']] = dict(diff=d, ci=ci, tie=bool(ci[0] <= 0 <= ci[1]))
        out[label] = dict(best=best['name'], arms=rows)
    return out
