"""
Statistics for the lab's comparisons. The room holds 95% intervals of one arm's mean (Student t, also over seeds x
units) and of a proportion (Wilson, also clustered over seeds), the exact McNemar test, Holm's step-down adjustment,
and the paired comparison of two arms measured on the same units (eval windows or passkey examples, in the same
order), with or without several seeds (paired by seed value, never by list position); lab/verdicts/compare.py applies them
to eval.py's arms. A leaf below every room (numpy and scipy only): the rooms that measure and those that judge both read it.
The rule for a comparison of arm A to arm B (diff = A - B) within one table column (one family of comparisons):
'better' / 'worse' when the Holm-adjusted paired p-value is < 0.05 (the sign of the difference says which, given
whether higher is better); 'equivalent' when the whole 95% paired interval lies inside [-margin, +margin];
'unresolved' otherwise. lab/verdicts/compare.py and the retrieval room import this room; scipy.stats supplies the
distributions (Student t, normal, binomial), numpy the rest.
"""
import math

import numpy as np
from scipy import stats as sps

Z975 = float(sps.norm.ppf(0.975))  # 1.959964: the two-sided 95% normal quantile of Wilson


def _check_df(df):
    if not df > 0:  # scipy answers NaN for df <= 0; say so instead
        raise ValueError(f'degrees of freedom must be > 0, got {df}')


def t_p(t, df):
    """Two-sided p-value of a t statistic: P(|T| >= |t|) = 2 sf(|t|; df) (no 1 - F cancellation); df may be
    fractional (Welch-Satterthwaite) or inf (the normal)."""
    _check_df(df)
    if math.isnan(t):
        raise ValueError('t_p of NaN')
    return min(1.0, 2.0 * float(sps.t.sf(abs(t), df)))


def t_quantile(p, df):
    """The p-quantile of Student's t (scipy's ppf), df fractional or inf. E.g. t_quantile(1 - 0.05 / (2 m), df) for a
    Bonferroni 1 - 0.05/m interval."""
    _check_df(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f't_quantile needs 0 < p < 1, got {p}')
    return float(sps.t.ppf(p, df))


def t975(df):
    """The 97.5% quantile of Student's t with df degrees of freedom (the half-width factor of a 95% interval)."""
    return t_quantile(0.975, df)


def mean_ci(x):
    """Mean and 95% t-interval of a 1-D sample (a zero-width interval for a single value)."""
    x = np.asarray(x, dtype=np.float64)
    m = float(x.mean())
    h = 0.0 if len(x) < 2 else t975(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return m, [m - h, m + h]


def wilson(k, n):
    """95% Wilson score interval of a proportion p = k/n, z = the 97.5% normal quantile:
    (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if n == 0:
        return [0.0, 1.0]
    z, p = Z975, k / n
    c, h = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, (c - h) / (1 + z * z / n)), min(1.0, (c + h) / (1 + z * z / n))]


# ---- exact McNemar and Holm ------------------------------------------------------------------------------------

def mcnemar_exact(b, c):
    """Two-sided exact McNemar p on the discordant counts b (A right, B wrong) and c (A wrong, B right):
    p = min(1, 2 P(X <= min(b, c))), X ~ Binomial(b + c, 1/2), i.e. 2 sum_{i <= min(b,c)} C(n, i) / 2^n; 1 when
    b + c = 0."""
    if b < 0 or c < 0 or b != int(b) or c != int(c):
        raise ValueError(f'mcnemar_exact needs counts (integers >= 0), got b={b}, c={c}')
    n, k = int(b) + int(c), int(min(b, c))
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * float(sps.binom.cdf(k, n, 0.5)))


def holm(pvals):
    """Holm step-down adjusted p-values, in the order given: sort p ascending, p_(i) -> min(1, (m - i + 1) p_(i))
    (i = 1..m), then the running maximum so the adjusted values keep the order of the raw ones."""
    p = [float(v) for v in pvals]
    if any(not 0.0 <= v <= 1.0 for v in p):
        raise ValueError(f'holm needs p-values in [0, 1] (no NaN), got {p}')
    m, out, run = len(p), [0.0] * len(p), 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        run = max(run, min(1.0, (m - rank) * p[i]))
        out[i] = run
    return out


def seed_pairs(a, b, paired_seeds):
    """The (seed, unit) pairs of two arms' [S, N] outcomes, as two arrays of one shape: row by row when the seeds are
    paired, else every seed of a with every seed of b (newcombe_paired's per_unit is then their size // N)."""
    return (a, b) if paired_seeds else (np.repeat(a, len(b), axis=0), np.tile(b, (len(a), 1)))


def newcombe_paired(a, b, limits=None, per_unit=1):
    """95% interval of p_a - p_b for 0/1 outcomes of two arms on the same pairs (Newcombe 1998, Stat. Med. 17:2635,
    method 10: square-and-add of the two Wilson intervals, corrected for their correlation). a, b: 0/1 arrays of the
    same shape, pair k = (a[k], b[k]). With e = #(1,1), f = #(1,0), g = #(0,1), h = #(0,0), n pairs:
    D = (f - g)/n; [l1, u1], [l2, u2] the Wilson intervals of p_a and p_b (`limits` replaces them, e.g. clustered
    ones over seeds); phi = C / sqrt((e+f)(g+h)(e+g)(f+h)) with C = eh - fg - n/2 when eh - fg > n/2, 0 when
    0 <= eh - fg <= n/2, eh - fg when negative (phi = 0 when a margin is empty); then
    lo = D - sqrt((p_a - l1)^2 - 2 phi (p_a - l1)(u2 - p_b) + (u2 - p_b)^2),
    hi = D + sqrt((p_b - l2)^2 - 2 phi (p_b - l2)(u1 - p_a) + (u1 - p_a)^2).
    Unlike a paired t (Wald) interval it is not zero-width when no discordant pair is seen: 32 concordant pairs of
    ones give [-0.107, +0.107]. per_unit: pairs pooled per unit (seeds x seeds of one example): the counts are
    divided by it, so that phi's continuity term -n/2 is that of the n units, not of the pooled pairs (with three
    seeds that agree, 48 pooled pairs would otherwise narrow the interval of 16 examples)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or not len(a):
        raise ValueError(f'newcombe_paired needs two 0/1 arrays of one nonzero size, got {a.shape} and {b.shape}')
    _check_binary(a, 'a'), _check_binary(b, 'b')
    n = len(a) / per_unit
    e, f = float((a * b).sum()) / per_unit, float((a * (1 - b)).sum()) / per_unit
    g, h = float(((1 - a) * b).sum()) / per_unit, float(((1 - a) * (1 - b)).sum()) / per_unit
    pa, pb = (e + f) / n, (e + g) / n
    (l1, u1), (l2, u2) = limits or (wilson(e + f, n), wilson(e + g, n))
    margins = (e + f) * (g + h) * (e + g) * (f + h)
    cross = e * h - f * g
    c = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
    phi = c / math.sqrt(margins) if margins > 0 else 0.0
    lo = pa - pb - math.sqrt(max(0.0, (pa - l1) ** 2 - 2 * phi * (pa - l1) * (u2 - pb) + (u2 - pb) ** 2))
    hi = pa - pb + math.sqrt(max(0.0, (pb - l2) ** 2 - 2 * phi * (pb - l2) * (u1 - pa) + (u1 - pa) ** 2))
    return [lo, hi]


# ---- paired comparison of two arms on the same units -----------------------------------------------------------

def _as_2d(x, name):
    """A [S, N] float array (a 1-D array is one seed); ValueError for other shapes or any NaN / inf."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f'{name} must be [seeds, units], got shape {x.shape}')
    bad = int((~np.isfinite(x)).sum())
    if bad:
        raise ValueError(f'{name} (shape {x.shape}) has {bad} NaN/inf value(s)')
    return x


def _check_binary(x, name):
    if not np.all((x == 0) | (x == 1)):
        raise ValueError(f'{name} (shape {x.shape}) must hold 0/1 outcomes')


def _satterthwaite(comps):
    """Sum of variance components v = sum c_k and the Welch-Satterthwaite df = v^2 / sum (c_k^2 / df_k) over the
    components with c_k > 0 (components with df_k < 1 are dropped); df = sum df_k when v = 0 (no information)."""
    comps = [(float(c), float(k)) for c, k in comps if k >= 1]
    v = sum(c for c, _ in comps)
    den = sum(c * c / k for c, k in comps if c > 0)
    return v, (v * v / den if den > 0 else float(sum(k for _, k in comps)))


def _t_result(diff, v, df, scale, method):
    """diff, its 95% t interval diff -/+ t_0.975(df) sqrt(v), se, df and the two-sided t p-value. Zero variance
    (se <= 1e-12 scale, scale = the largest |value| compared): ci = [diff, diff], p = 0 if diff != 0 else 1."""
    se, tol = math.sqrt(max(v, 0.0)), 1e-12 * max(scale, 1e-300)
    if se <= tol:
        p = 0.0 if abs(diff) > tol else 1.0
        return dict(diff=diff, ci=[diff, diff], se=se, df=df, p=p, method=method)
    h = t_quantile(0.975, df) * se
    return dict(diff=diff, ci=[diff - h, diff + h], se=se, df=df, p=t_p(diff / se, df), method=method)


def align_seeds(b, seeds_a, seeds_b):
    """b's rows [Sb, N] (one per seed in seeds_b) put in the order of seeds_a, so that row i of a and of b hold the
    same seed: b itself when the lists are equal, its rows reordered when they hold the same seeds in another order;
    ValueError naming both lists otherwise (different seeds, a seed listed twice, a list missing or not one per row)."""
    sa, sb = None if seeds_a is None else list(seeds_a), None if seeds_b is None else list(seeds_b)
    if sa is None or sb is None or not len(sa) == len(sb) == len(b) == len(set(sa)) or set(sa) != set(sb):
        raise ValueError(f'pairing seeds needs the same seeds in both arms (one per row), got seeds {sa} and {sb}')
    return b if sa == sb else b[[sb.index(s) for s in sa]]


def paired_diff(a, b, binary=False, paired_seeds=None, seeds=None):
    """Paired difference diff = mean(a) - mean(b) of two arms measured on the same N units (same order); a is
    [Sa, N] (seeds x units), b is [Sb, N]. Returns dict(diff, ci (95%), se, df, p (two-sided), method).
    - Sa = Sb = 1 ('paired-t'): d = a - b over units, se^2 = var(d)/N, df = N - 1. binary=True (0/1 outcomes):
      p = mcnemar_exact(#(a=1,b=0), #(a=0,b=1)) and the interval newcombe_paired(a, b) ('newcombe-mcnemar'), which
      is not zero-width when no pair is discordant (a paired t interval is).
    - seeds paired (paired_seeds, default Sa = Sb > 1; 'seed-paired-t'): D = a - b [S, N], u = D.mean(0) per unit,
      m = D.mean(1) per seed; se^2 = var(u)/N + var(m)/S, Welch-Satterthwaite df over (N-1, S-1). The unit x seed
      residual is counted in both components, so the interval is conservative. seeds = (a's seed list, b's) pairs
      the rows by seed value (align_seeds: ValueError unless both arms ran the same seeds); without it by row.
    - otherwise ('seed-unpaired-t'): u = a.mean(0) - b.mean(0); se^2 = var(u)/N + var(ma)/Sa [Sa > 1] + var(mb)/Sb
      [Sb > 1] with ma, mb the arms' seed means; Satterthwaite df over the components present.
    All variances ddof = 1. The interval is diff -/+ t_0.975(df) se, p = 2 P(T_df >= |diff| / se); zero variance gives
    ci = [diff, diff] and p = 0 (diff != 0) or 1 (diff = 0). binary=True with seeds: the same p, and the interval
    newcombe_paired over every (seed, unit) pair (seed-paired: the same seed; else every seed of a with every seed of
    b), with each arm's limits clustered_wilson over its seeds ('...-newcombe'; with one seed each, method 10)."""
    a, b = _as_2d(a, 'a'), _as_2d(b, 'b')
    (sa, n), (sb, nb) = a.shape, b.shape
    if n != nb:
        raise ValueError(f'a {a.shape} and b {b.shape} must hold the same units (same N)')
    if n < 2:
        raise ValueError(f'paired_diff needs N >= 2 units, got a {a.shape}, b {b.shape}')
    if binary:
        _check_binary(a, 'a'), _check_binary(b, 'b')
    if paired_seeds is None:
        paired_seeds = sa == sb > 1
    if paired_seeds and sa != sb:
        raise ValueError(f'paired seeds need the same seed count, got a {a.shape}, b {b.shape}')
    if paired_seeds and sa > 1 and seeds is not None:  # one seed each: the units are paired, not the seeds
        b = align_seeds(b, *seeds)
    diff = float(a.mean() - b.mean())
    scale = float(max(np.abs(a).max(), np.abs(b).max()))
    if sa == sb == 1:
        d = a[0] - b[0]
        res = _t_result(diff, float(d.var(ddof=1)) / n, n - 1, scale, 'newcombe-mcnemar' if binary else 'paired-t')
        if binary:
            res['p'] = mcnemar_exact(int(((a[0] == 1) & (b[0] == 0)).sum()), int(((a[0] == 0) & (b[0] == 1)).sum()))
            res['ci'] = newcombe_paired(a[0], b[0])
        return res
    if paired_seeds:
        D = a - b
        comps = [(D.mean(0).var(ddof=1) / n, n - 1), (D.mean(1).var(ddof=1) / sa, sa - 1)]
        method = 'seed-paired-t'
    else:
        comps = [((a.mean(0) - b.mean(0)).var(ddof=1) / n, n - 1)]
        comps += [(x.mean(1).var(ddof=1) / s, s - 1) for x, s in ((a, sa), (b, sb)) if s > 1]
        method = 'seed-unpaired-t'
    v, df = _satterthwaite(comps)
    res = _t_result(diff, v, df, scale, method)
    if binary:  # the interval: Newcombe's square-and-add over the seeds' pairs, each arm's limits clustered over seeds
        pa, pb = seed_pairs(a, b, paired_seeds)
        res.update(ci=newcombe_paired(pa, pb, (clustered_wilson(a), clustered_wilson(b)), pa.size // n),
                   method=method + '-newcombe')
    return res


def seeds_mean_ci(x):
    """One arm's mean and 95% interval from x [S, N] (seeds x units): se^2 = var(unit means)/N + var(seed means)/S
    (ddof = 1), Satterthwaite df over (N-1, S-1), mean -/+ t_0.975(df) se. S = 1: exactly mean_ci over the units."""
    x = _as_2d(x, 'x')
    s, n = x.shape
    if s == 1:
        return mean_ci(x[0])
    comps = [(x.mean(1).var(ddof=1) / s, s - 1)] + ([(x.mean(0).var(ddof=1) / n, n - 1)] if n > 1 else [])
    v, df = _satterthwaite(comps)
    m = float(x.mean())
    h = 0.0 if v <= 0 else t_quantile(0.975, df) * math.sqrt(v)
    return m, [m - h, m + h]


def clustered_wilson(outcomes):
    """95% interval of exact match from 0/1 outcomes [S, N] (S seeds on the same N examples). S = 1: wilson(k, N).
    S > 1: Wilson at p = mean with an effective size n_eff = p (1 - p) / v clipped into [1, S N], where
    v = var0(example means)/N + var(seed means)/S; var0 is ddof = 0 (the binomial p(1-p) convention of Wilson, so S
    identical copies of one seed give exactly that seed's wilson(k, N)), the seed variance ddof = 1. v = 0 gives
    n_eff = S N; p = 0 or 1 gives n = N (the examples, not S N)."""
    x = _as_2d(outcomes, 'outcomes')
    _check_binary(x, 'outcomes')
    s, n = x.shape
    if s == 1 or n == 0:
        return wilson(int(x.sum()), n)
    p = float(x.mean())
    if p in (0.0, 1.0):
        return wilson(p * n, n)
    v = float(x.mean(0).var()) / n + float(x.mean(1).var(ddof=1)) / s
    n_eff = s * n if v <= 0 else min(max(p * (1 - p) / v, 1.0), float(s * n))
    return wilson(p * n_eff, n_eff)


# ---- verdicts ----------------------------------------------------------------------------------------------------

def verdict(ci, p_adj, margin, higher_is_better=False, alpha=0.05):
    """Verdict for arm A relative to B (diff = A - B): 'better' / 'worse' when p_adj < alpha, by the sign of the ci
    midpoint (loss: lower is better; higher_is_better for accuracy); else 'equivalent' when -margin <= lo and
    hi <= margin; else 'unresolved'."""
    lo, hi = float(ci[0]), float(ci[1])
    if math.isnan(lo) or math.isnan(hi) or math.isnan(p_adj) or not margin >= 0:
        raise ValueError(f'verdict needs a finite ci, a p-value and margin >= 0, got {ci}, {p_adj}, {margin}')
    mid = 0.5 * (lo + hi)
    if p_adj < alpha and mid != 0:
        return 'better' if (mid > 0) == bool(higher_is_better) else 'worse'
    return 'equivalent' if -margin <= lo and hi <= margin else 'unresolved'


# The round-off floor: two arms whose every paired difference is at most this in magnitude are the same model, not a
# finding ('identical', never better, worse or equivalent on the difference). eval.py stores per-window values to the
# sixth decimal (summary_json.summarize_arm), so one unit of that decimal is the smallest difference a stored value can
# carry: two computations of one model that differ only in float32 round-off differ by 0 or 1e-6 per window there.
FLOOR = 1e-6


def under_floor(a, b, seeds=None, floor=FLOOR):
    """Whether every paired difference of a [Sa, N] and b [Sb, N] is at most `floor` in magnitude: a - b unit by unit
    (seeds paired by value when `seeds` = (a's seed list, b's) and both arms ran several; with other seed counts every
    seed of a against every seed of b). NaN (an unscored unit) is never under the floor."""
    a, b = _as_2d(a, 'a'), _as_2d(b, 'b')
    if a.shape[0] == b.shape[0] > 1 and seeds is not None and seeds[0] is not None and seeds[1] is not None:
        b = align_seeds(b, *seeds)
    d = a - b if a.shape == b.shape else a[:, None, :] - b[None, :, :]
    return bool(d.size) and bool(np.all(np.abs(d) <= floor * (1 + 1e-6)))  # (1e-6 written in binary: a hair over)


def compare_family(pairs, margin, binary=False, higher_is_better=False):
    """One family (one table column): paired_diff(a, b, binary, seeds=seeds) for each (name, a [Sa, N], b [Sb, N])
    or (name, a, b, seeds = (a's seed list, b's)) in pairs, the p-values Holm-adjusted across the list, and each row's
    verdict(ci, p_holm, margin, higher_is_better). Returns a list of dict(name, diff, ci, se, df, p, p_holm, verdict,
    inside_margin, method), in the order given. inside_margin: a 'better' / 'worse' whose whole interval lies inside
    [-margin, +margin] (a real difference, too small to matter), which the tables write apart from 'equivalent';
    identical: every paired difference is exactly 0 (the same computation, e.g. two maps that agree inside L), the
    only 'equivalent' a zero-width interval can give (0/1 outcomes never have one: Newcombe), or, for values that are
    not 0/1, every paired difference within the round-off FLOOR (under_floor): such a row's verdict is 'equivalent'
    and it reads 'identical', whatever its test gave (its p is kept, and counts in the column's Holm as before)."""
    rows = [dict(name=name, **paired_diff(a, b, binary=binary, seeds=seeds[0] if seeds else None),
                 floor=not binary and under_floor(a, b, seeds[0] if seeds else None))
            for name, a, b, *seeds in pairs]
    for r, ph in zip(rows, holm([r['p'] for r in rows])):
        r['p_holm'] = ph
        r['identical'] = r['floor'] or r['diff'] == r['ci'][0] == r['ci'][1] == 0  # every paired difference 0 (or round-off)
        r['verdict'] = 'equivalent' if r['identical'] else verdict(r['ci'], ph, margin, higher_is_better)
        r['inside_margin'] = r['verdict'] in ('better', 'worse') and -margin <= r['ci'][0] and r['ci'][1] <= margin
    return [{k: r[k] for k in ('name', 'diff', 'ci', 'se', 'df', 'p', 'p_holm', 'verdict', 'inside_margin', 'identical',
                               'method')} for r in rows]
