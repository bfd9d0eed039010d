"""Tests of lab/stats.py against hand-computed numbers and textbook values (t tables, closed-form t CDFs for
df = 1, 2, 3, 4, exact binomial sums, Holm by hand): the lab's use of scipy.stats gives those numbers. numpy and
scipy, well under a second; no torch."""
import math

import numpy as np
import pytest

from lab import stats
from lab.stats import (align_seeds, clustered_wilson, compare_family, holm, mcnemar_exact, mean_ci,  # no torch
                                newcombe_paired, paired_diff, seeds_mean_ci, t975, t_p, t_quantile, verdict, wilson)

approx = pytest.approx
T2_975 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # df = 2 closed form: t_p = (2p - 1) / sqrt(2 p (1 - p)) = 4.302653
T4_975, T6_975, T7_975 = 2.776445, 2.446912, 2.364624  # textbook 6-digit t_0.975 for df = 4, 6, 7
T975_TABLE = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
              2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
              2.042)  # the textbook 3-decimal t_0.975 table, df = 1..30


def cdf_df2(t):
    """Student t CDF, df = 2, closed form."""
    return 0.5 + t / (2 * math.sqrt(2 + t * t))


def cdf_df4(t):
    """Student t CDF, df = 4, closed form."""
    return 0.5 + 3 / 8 * t / math.sqrt(1 + t * t / 4) * (1 - t * t / (12 * (1 + t * t / 4)))


# ---- t (scipy.stats.t) -------------------------------------------------------------------------------------------

def test_scipy_t_and_binomial_give_hand_values():
    """What the removed hand-written incomplete beta was tested for, now asked of the lab's scipy calls: the t
    quantile and two-sided p against tables and closed forms, the binomial sum of McNemar by hand, Wilson's z."""
    assert t_quantile(0.975, 5) == approx(2.5706, abs=5e-5)
    assert t975(5) == t_quantile(0.975, 5)
    assert t975(31) == approx(2.039513, abs=1e-6) and t975(120) == approx(1.979930, abs=1e-6)
    for t in (0.1, 0.7, 1.5, 4.0, 25.0):  # df = 3: 2 (1 - F) = 1 - (2/pi) (atan x + x / (1 + x^2)), x = t / sqrt 3
        x = t / math.sqrt(3)
        assert t_p(t, 3) == approx(1 - 2 / math.pi * (math.atan(x) + x / (1 + x * x)), abs=2e-12)
    assert t_p(1.0, 1) == approx(0.5, abs=1e-15)  # Cauchy: 1 - 2 atan(1) / pi
    assert t_p(math.sqrt(2), 2) == approx(1 - math.sqrt(2) / 2, abs=1e-15)  # 1 - t / sqrt(2 + t^2)
    assert mcnemar_exact(3, 7) == approx(2 * (1 + 10 + 45 + 120) / 1024, abs=1e-15)  # 0.34375
    assert stats.Z975 == approx(1.959964, abs=5e-7)
    for bad in (lambda: t_p(1.0, 0), lambda: t_quantile(0.9, 0), lambda: t_quantile(1.0, 3),
                lambda: t_quantile(0.0, 3), lambda: t_p(float('nan'), 3)):
        with pytest.raises(ValueError):
            bad()


def test_t_p_known_values():
    assert t_p(2.042, 30) == approx(0.05, abs=2e-4)  # table value rounded to 3 decimals
    assert t_p(0, 5) == 1.0
    for t in (0.1, 0.7, 1.5, 4.0, 25.0):
        assert t_p(t, 1) == approx(1 - 2 * math.atan(t) / math.pi, abs=2e-12)  # Cauchy
        assert t_p(t, 2) == approx(2 * (1 - cdf_df2(t)), abs=2e-12)
        assert t_p(t, 4) == approx(2 * (1 - cdf_df4(t)), abs=2e-12)
        for df in (1, 3, 7.5, 40):
            assert t_p(-t, df) == t_p(t, df)
            assert t_quantile(t_p(t, df) / 2, df) == approx(-t, rel=1e-9)  # the quantile inverts the tail
    assert t_p(1.959964, 1e6) == approx(0.05, abs=2e-6)  # large df: the normal
    assert t_p(1.959964, math.inf) == approx(0.05, abs=2e-7)
    assert t_p(2.0, 2.5) < t_p(2.0, 2) and t_p(2.0, 2.5) > t_p(2.0, 3)  # fractional df lies between


def test_t_p_and_quantile_match_tables():
    assert t_p(2.228, 10) == approx(0.05, abs=2e-4)
    assert t_p(0.0, 3) == 1.0
    assert t_p(-3.0, math.inf) == approx(0.0026998, abs=1e-7)
    t = 1.7
    assert t_p(t, 2) == approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)
    assert t_quantile(0.975, 2) == approx(T2_975, abs=1e-9)
    for df in (4, 6, 7):
        assert t_quantile(0.975, df) == approx({4: T4_975, 6: T6_975, 7: T7_975}[df], abs=1e-6)
    for df in range(1, 31):  # the 3-decimal table
        assert abs(t_quantile(0.975, df) - T975_TABLE[df - 1]) < 6e-4 and t975(df) == t_quantile(0.975, df)
    assert t_quantile(0.995, 10) == approx(3.169, abs=6e-4)
    assert t_quantile(0.025, 5) == approx(-2.571, abs=6e-4)
    assert t_quantile(0.975, 120) == approx(1.980, abs=6e-4)
    assert t_quantile(0.5, 3) == 0.0
    assert t_p(t_quantile(1 - 0.05 / 8, 9.3), 9.3) == approx(0.05 / 4, abs=2e-10)


# ---- McNemar / Holm ------------------------------------------------------------------------------------------------

def test_mcnemar_exact_hand_values():
    assert mcnemar_exact(0, 5) == 2 / 32
    assert mcnemar_exact(5, 0) == 2 / 32
    assert mcnemar_exact(1, 9) == approx(2 * 11 / 1024, abs=1e-15)
    assert mcnemar_exact(2, 8) == approx(2 * (1 + 10 + 45) / 1024, abs=1e-15)
    assert mcnemar_exact(4, 4) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 1) == 1.0  # 2 * 1/2
    # large n: scipy's binomial CDF against the exact integer sum
    b, c = 480, 570
    exact = 2 * sum(math.comb(1050, i) for i in range(481)) / 2 ** 1050
    assert mcnemar_exact(b, c) == approx(exact, rel=1e-9)
    with pytest.raises(ValueError):
        mcnemar_exact(1.5, 3)


def test_holm_hand_values():
    assert holm([0.01, 0.04, 0.03, 0.005]) == approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert holm([0.2, 0.3, 0.4]) == approx([0.6, 0.6, 0.6], abs=1e-15)  # monotone: 0.4 lifted to 0.6
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped
    assert holm([0.5]) == [0.5] and holm([]) == []
    with pytest.raises(ValueError):
        holm([0.1, float('nan')])


# ---- paired_diff ---------------------------------------------------------------------------------------------------

def test_paired_diff_one_seed_paired_t():
    a, b = np.array([[2., 4, 9]]), np.array([[1., 2, 3]])  # d = [1, 2, 6]: mean 3, var 7
    r = paired_diff(a, b)
    se = math.sqrt(7 / 3)
    assert r['method'] == 'paired-t' and r['df'] == 2
    assert r['diff'] == approx(3) and r['se'] == approx(se, abs=1e-12)
    assert r['ci'] == approx([3 - T2_975 * se, 3 + T2_975 * se], abs=1e-8)  # [-3.5725, 9.5725]
    t = 3 / se
    assert r['p'] == approx(1 - t / math.sqrt(2 + t * t), abs=1e-10)  # 0.188497
    assert r['p'] == approx(0.188497, abs=1e-6)


def test_paired_diff_binary_mcnemar():
    a = np.array([1, 1, 1, 1, 1, 0, 1, 0])
    b = np.array([0, 0, 0, 0, 0, 0, 1, 1])  # discordant: 5 (A only), 1 (B only)
    r = paired_diff(a[None], b[None], binary=True)
    assert r['method'] == 'newcombe-mcnemar'
    assert r['p'] == approx(2 * 7 / 64, abs=1e-15)  # 0.21875
    se = math.sqrt(4 / 7 / 8)  # d = [1,1,1,1,1,0,0,-1]: mean 0.5, sum of squares about it 4.0
    assert r['diff'] == approx(0.5) and r['se'] == approx(se, abs=1e-12)
    # Newcombe by hand: e, f, g, h = 1, 5, 1, 1; Wilson(6, 8) = [0.409280, 0.928520], Wilson(2, 8) = [0.071480,
    # 0.590720]; eh - fg = -4 < 0, so phi = -4 / sqrt(6 * 2 * 2 * 6) = -1/3;
    # lo = 0.5 - sqrt(2 * 0.340720^2 + 2/3 * 0.340720^2) = -0.05639, hi = 0.5 + sqrt(8/3 * 0.178520^2) = 0.79152
    assert r['ci'] == approx([-0.05639, 0.79152], abs=2e-5)
    with pytest.raises(ValueError):
        paired_diff(a[None] * 0.5, b[None], binary=True)


def test_newcombe_paired_worked_example_and_no_discordant_pair():
    def table(e, f, g, h):  # pairs (1,1) e times, (1,0) f, (0,1) g, (0,0) h
        return np.repeat([1, 1, 0, 0], [e, f, g, h]), np.repeat([1, 0, 1, 0], [e, f, g, h])
    # Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), ch. 8: Cavo et al. (2012),
    # complete response before and after consolidation, 59 / 6 / 16 / 80: -0.0621 (95% CI -0.1186 to -0.0046)
    assert newcombe_paired(*table(59, 6, 16, 80)) == approx([-0.1186, -0.0046], abs=6e-5)
    # 32 concordant pairs: a paired t interval has zero width; Newcombe's is the Wilson half-width 1 - 32/(32 + z^2)
    z2 = 1.959964 ** 2
    assert newcombe_paired(*table(32, 0, 0, 0)) == approx([-(1 - 32 / (32 + z2)), 1 - 32 / (32 + z2)], abs=1e-6)
    assert newcombe_paired(*table(0, 0, 0, 32)) == approx([-0.10718, 0.10718], abs=1e-5)
    r = paired_diff(np.ones((3, 32)), np.ones((3, 32)), binary=True)  # three seeds that agree are not 96 examples
    assert r['ci'] == approx([-0.10718, 0.10718], abs=1e-5) and r['method'] == 'seed-paired-t-newcombe'
    x = np.zeros((3, 16))
    x[:, :5] = 1  # the same 5 of 16 right in every seed of both arms: phi is that of 16 pairs, not of 48 pooled ones
    one = newcombe_paired(x[0], x[0])  # e, h = 5, 11: phi = (55 - 8) / 55, half-width 0.1318
    assert one == approx([-0.1318, 0.1318], abs=1e-4) and paired_diff(x, x.copy(), binary=True)['ci'] == approx(one)
    with pytest.raises(ValueError):
        newcombe_paired([1, 0, 1], [1, 0])


GRID = np.array([[1., 2, 3], [2, 3, 4], [3, 4, 5]])  # row means [2,3,4], column means [2,3,4]: both variances 1


def test_paired_diff_paired_seeds():
    b = np.array([[0., 1, 0], [2, 0, 1], [1, 1, 1]])
    r = paired_diff(b + GRID, b)  # D = GRID: var(u)/N = var(m)/S = 1/3
    se = math.sqrt(2 / 3)
    assert r['method'] == 'seed-paired-t'
    assert r['diff'] == approx(3) and r['se'] == approx(se, abs=1e-12)
    assert r['df'] == approx((2 / 3) ** 2 / ((1 / 3) ** 2 / 2 + (1 / 3) ** 2 / 2), abs=1e-12)  # = 4
    assert r['df'] == approx(4.0, abs=1e-12)
    assert r['ci'] == approx([3 - T4_975 * se, 3 + T4_975 * se], abs=1e-5)
    assert r['p'] == approx(2 * (1 - cdf_df4(3 / se)), abs=1e-10)


def test_paired_diff_paired_seeds_fractional_df():
    D = np.array([[1., 2, 3], [3, 4, 5]])  # u = [2,3,4] -> 1/3; m = [2,4] -> var 2 / S = 1
    r = paired_diff(D, np.zeros((2, 3)))
    assert r['se'] == approx(math.sqrt(4 / 3), abs=1e-12)
    assert r['df'] == approx(32 / 19, abs=1e-12)  # (4/3)^2 / ((1/3)^2/2 + 1^2/1)
    half = r['ci'][1] - r['diff']
    assert half == approx(r['diff'] - r['ci'][0])
    assert t_p(half / r['se'], 32 / 19) == approx(0.05, abs=2e-10)
    assert half / r['se'] > T2_975  # df < 2: wider than the df = 2 quantile


def test_paired_diff_unpaired_seed_counts():
    r = paired_diff(GRID, np.array([[1., 1, 1]]))  # 3 seeds vs 1 run: u = [1,2,3] -> 1/3, A's seeds -> 1/3
    se = math.sqrt(2 / 3)
    assert r['method'] == 'seed-unpaired-t'
    assert r['diff'] == approx(2) and r['se'] == approx(se, abs=1e-12) and r['df'] == approx(4, abs=1e-12)
    assert r['ci'] == approx([2 - T4_975 * se, 2 + T4_975 * se], abs=1e-5)
    assert r['p'] == approx(2 * (1 - cdf_df4(2 / se)), abs=1e-10)
    with pytest.raises(ValueError):
        paired_diff(GRID, np.array([[1., 1, 1]]), paired_seeds=True)


def test_paired_vs_unpaired_seeds_on_shared_seed_effects():
    b = np.array([[0., 0, 0], [1, 1, 1], [2, 2, 2]])  # seed offsets shared with a: a - b = [1,2,3] in every seed
    p = paired_diff(GRID, b)
    assert p['method'] == 'seed-paired-t'
    assert p['diff'] == approx(2) and p['se'] == approx(math.sqrt(1 / 3), abs=1e-12) and p['df'] == approx(2)
    assert p['ci'] == approx([2 - T2_975 / math.sqrt(3), 2 + T2_975 / math.sqrt(3)], abs=1e-8)
    u = paired_diff(GRID, b, paired_seeds=False)  # three components of 1/3 each: se = 1, df = 1 / (3 (1/9) / 2) = 6
    assert u['method'] == 'seed-unpaired-t'
    assert u['se'] == approx(1.0, abs=1e-12) and u['df'] == approx(6.0, abs=1e-12)
    assert u['ci'] == approx([2 - T6_975, 2 + T6_975], abs=1e-5)
    assert p['se'] < u['se']  # pairing the seeds removes the shared seed offsets (here N = 3 so df 2 vs 6 offsets it)


def test_paired_diff_pairs_seeds_by_value():
    """seeds = (a's seed list, b's): rows are paired by seed value, not list position; arms that ran different seeds
    (or list one twice) are refused with both lists named; one seed each pairs units, not seeds."""
    b = np.array([[0., 1, 0], [2, 0, 1], [1, 1, 1]])  # seeds 1337, 1338, 1339
    a, seeds = b + GRID, [1337, 1338, 1339]
    shuffled = b[[2, 0, 1]]  # the same runs listed as 1339, 1337, 1338
    r = paired_diff(a, shuffled, seeds=(seeds, [1339, 1337, 1338]))
    assert r == paired_diff(a, b) and r['se'] == approx(math.sqrt(2 / 3), abs=1e-12) and r['df'] == approx(4.0)
    assert paired_diff(a, shuffled)['se'] != approx(math.sqrt(2 / 3), abs=1e-3)  # by position: other seeds' runs
    assert np.array_equal(align_seeds(shuffled, seeds, [1339, 1337, 1338]), b)
    assert align_seeds(b, seeds, seeds) is b
    with pytest.raises(ValueError, match=r'\[1337, 1338\] and \[1337, 1339\]'):
        paired_diff(a[:2], b[:2], seeds=([1337, 1338], [1337, 1339]))
    with pytest.raises(ValueError, match='same seeds'):
        paired_diff(a[:2], b[:2], seeds=([1337, 1337], [1337, 1337]))
    with pytest.raises(ValueError, match='same seeds'):
        paired_diff(a, b, seeds=(seeds, None))
    u = paired_diff(a[:2], b[:2], paired_seeds=False, seeds=([1337, 1338], [1337, 1339]))  # not paired: no check
    assert u['method'] == 'seed-unpaired-t'
    assert paired_diff(a[:1], b[:1], seeds=([1337], [1338])) == paired_diff(a[:1], b[:1])


def test_paired_diff_zero_variance_and_errors():
    a = np.array([[1., 2, 3, 4]])
    r = paired_diff(a, a - 0.5)
    assert r['ci'] == [0.5, 0.5] and r['p'] == 0.0 and r['diff'] == approx(0.5)
    r = paired_diff(a, a)
    assert r['ci'] == [0.0, 0.0] and r['p'] == 1.0
    r = paired_diff(GRID, GRID - 1)  # paired seeds, constant shift
    assert r['ci'] == [1.0, 1.0] and r['p'] == 0.0
    with pytest.raises(ValueError, match='NaN'):
        paired_diff(np.array([[1., np.nan, 3]]), np.ones((1, 3)))
    with pytest.raises(ValueError, match='N >= 2'):
        paired_diff(np.ones((2, 1)), np.ones((2, 1)))
    with pytest.raises(ValueError, match='same N'):
        paired_diff(np.ones((1, 3)), np.ones((1, 4)))
    with pytest.raises(ValueError, match='shape'):
        paired_diff(np.ones((1, 2, 3)), np.ones((1, 2, 3)))


# ---- one arm -------------------------------------------------------------------------------------------------------

def test_seeds_mean_ci():
    x = np.array([0.3, 1.1, 2.0, 0.7])
    assert seeds_mean_ci(x[None]) == mean_ci(x)
    m, ci = seeds_mean_ci(GRID)  # 1/3 + 1/3, df 4
    half = T4_975 * math.sqrt(2 / 3)
    assert m == approx(3) and ci == approx([3 - half, 3 + half], abs=1e-5)
    m, ci = seeds_mean_ci(np.array([[1., 2, 3], [1, 2, 3]]))  # seed means equal: units only, df 2
    assert m == approx(2) and ci == approx([2 - T2_975 / math.sqrt(3), 2 + T2_975 / math.sqrt(3)], abs=1e-8)


def wilson_by_hand(p, n, z=1.959963984540054):  # the 97.5% normal quantile, to 16 digits
    """Wilson: (p + z^2/2n -/+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    c, h = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [(c - h) / (1 + z * z / n), (c + h) / (1 + z * z / n)]


def test_clustered_wilson():
    one = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1, 0])  # 6 / 10
    assert clustered_wilson(one[None]) == approx([0.312671, 0.831819], abs=1e-5)  # textbook Wilson 6/10
    copies = clustered_wilson(np.stack([one] * 3))
    assert copies == approx(wilson(6, 10), abs=1e-12)  # identical seeds add no information
    naive = wilson(18, 30)
    assert copies[1] - copies[0] > naive[1] - naive[0] + 0.1
    # S = 2, N = 4: p = 3/8; example means [1, .5, 0, 0] -> var0 .171875 / 4; seed means [.5, .25] -> .03125 / 2
    # v = .05859375, p(1-p) = .234375 -> n_eff = 4
    x = np.array([[1, 1, 0, 0], [1, 0, 0, 0]])
    assert clustered_wilson(x) == approx(wilson_by_hand(3 / 8, 4), abs=1e-12)
    assert clustered_wilson(np.zeros((3, 5))) == approx([0.0, 0.434482], abs=1e-6)  # wilson(0, 5), not n = 15
    assert clustered_wilson(np.ones((3, 5)))[0] == approx(1 - 0.434482, abs=1e-6)
    assert clustered_wilson(np.array([[1, 0], [0, 1]])) == approx(wilson_by_hand(0.5, 4), abs=1e-12)  # v = 0: S N
    assert clustered_wilson(np.array([[1, 1], [0, 0]])) == approx(wilson_by_hand(0.5, 1), abs=1e-12)  # n_eff = 1


# ---- verdicts ------------------------------------------------------------------------------------------------------

def test_verdict_all_four():
    assert verdict([-0.3, -0.1], 0.01, 0.05) == 'better'  # loss went down
    assert verdict([0.1, 0.3], 0.01, 0.05) == 'worse'
    assert verdict([-0.3, -0.1], 0.01, 0.05, higher_is_better=True) == 'worse'
    assert verdict([0.1, 0.3], 0.049, 0.05, higher_is_better=True) == 'better'
    assert verdict([-0.05, 0.04], 0.5, 0.1) == 'equivalent'
    assert verdict([-0.1, 0.1], 0.5, 0.1) == 'equivalent'  # inclusive
    assert verdict([-0.05, 0.2], 0.3, 0.1) == 'unresolved'
    assert verdict([-0.3, -0.1], 0.05, 0.05) == 'unresolved'  # p must be < alpha
    assert verdict([-0.03, -0.01], 0.05, 0.05) == 'equivalent'


def test_compare_family_holm_flips_a_verdict():
    n = 20
    strong = (np.r_[np.ones(10), np.zeros(10)], np.zeros(n))  # 10 discordant, all for A: p = 2/1024
    weak = (np.r_[np.ones(13), np.zeros(7)], np.r_[np.zeros(6), np.ones(7), np.zeros(7)])  # 6 vs 0: p = 2/64
    none = (np.r_[1, 0, np.zeros(18)], np.r_[0, 1, np.zeros(18)])  # 1 vs 1: p = 1
    pairs = [(name, a[None], b[None]) for name, (a, b) in (('strong', strong), ('weak', weak), ('none', none))]
    rows = compare_family(pairs, margin=0.05, binary=True, higher_is_better=True)
    assert [r['name'] for r in rows] == ['strong', 'weak', 'none']
    assert [r['p'] for r in rows] == approx([2 / 1024, 2 / 64, 1.0], abs=1e-15)
    assert [r['p_holm'] for r in rows] == approx([3 * 2 / 1024, 2 * 2 / 64, 1.0], abs=1e-15)
    assert [r['diff'] for r in rows] == approx([0.5, 0.3, 0.0])
    weak_row = rows[1]
    assert verdict(weak_row['ci'], weak_row['p'], 0.05, higher_is_better=True) == 'better'  # before Holm
    assert [r['verdict'] for r in rows] == ['better', 'unresolved', 'unresolved']
    assert all(r['method'] == 'newcombe-mcnemar' for r in rows)
    assert set(rows[0]) == {'name', 'diff', 'ci', 'se', 'df', 'p', 'p_holm', 'verdict', 'inside_margin', 'identical',
                            'method'}
    assert not any(r['inside_margin'] for r in rows)  # 'better' by +50 points is not inside a 5-point margin


def test_better_inside_the_margin_is_told_apart_from_equivalent():
    """A real but tiny loss difference: a = b - 0.005 +- 0.001 on 20 windows. Paired t: p ~ 1e-14, interval about
    [-0.0055, -0.0045], inside the 0.02 margin: 'better' (lower loss) with inside_margin, never 'equivalent'."""
    b = np.linspace(1.0, 2.0, 20)
    a = b - 0.005 + 0.001 * np.tile([1, -1], 10)
    (r,) = compare_family([('tiny', a[None], b[None])], margin=0.02)
    assert r['verdict'] == 'better' and r['inside_margin'] and r['p_holm'] < 1e-10
    assert -0.0056 < r['ci'][0] < r['ci'][1] < -0.0044
    (r,) = compare_family([('tiny', a[None], b[None])], margin=0.004)  # the margin inside the interval: not marked
    assert r['verdict'] == 'better' and not r['inside_margin'] and not r['identical']
    (r,) = compare_family([('same', b[None], b[None])], margin=0.02)  # the same values: the one zero-width 'equivalent'
    assert r['verdict'] == 'equivalent' and r['identical'] and r['ci'] == [0.0, 0.0]
