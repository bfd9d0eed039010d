"""
The temperature-law diagnostic (Hayase & Karakida 2026, "A Unified Framework for Critical Scaling of Inverse
Temperature in Self-Attention", arXiv 2605.12697): which law beta(n) of the inverse temperature a model's own attention
rows call for as the number n of keys grows: (ln n)^(1/2), ln n or (ln n)^2.

The paper (its abstract; the full definitions were not available here, so the scale below is written from first
principles on the abstract's terms and may differ from the paper's in its constants): for an attention row of scaled
scores s_j over the n keys a query sees, the gaps to the top key are g_j = s_max - s_j, and the gap-counting function
N_n(t) = #{competitors j != top : g_j <= t} counts the competitors within t of it. At inverse temperature beta the
softmax puts 1 / (1 + Z(beta)) on the top key, with

    Z(beta) = sum_{j != top} exp(-beta g_j) = integral of exp(-beta t) dN_n(t)   (N_n's Laplace-Stieltjes transform),

and the row's critical inverse temperature is beta_c = inf{beta >= 0 : Z(beta) <= 1}, the least beta at which the top
key holds half of the mass (below it the top competitors stay unseparated, above it the entropy collapses). Z is
decreasing and convex in beta, so Newton's method from the left converges to the root monotonically. By hand: one
competitor (n = 2) gives beta_c = 0 (it holds half at every beta >= 0); k competitors all at gap g give
beta_c = ln(k) / g; a tie at the top (a competitor at gap 0 beside others) gives beta_c = inf. beta_c <= 1: the row
already concentrates at the model's trained temperature (its scores as they are).

The law is the growth of beta_c with n. If the scores near the top of a row look like a sample with upper tail
P(X > x) = exp(-h(x)), the top sits at b_n with h(b_n) = ln n and the competitors near it are spaced at rate h'(b_n),
so beta_c grows like h'(b_n): Gaussian scores (h = x^2 / 2 sigma^2) -> sqrt(2 ln n) / sigma (p = 1/2); a doubly
exponential tail (h = e^x) or a fixed gap to a bulk of competitors (the k-at-gap-g row, SSMax's argument) -> ln n
(p = 1); an upper endpoint approached as h = 1 / (x_max - x) -> (ln n)^2 (p = 2); a plain exponential tail (h = x/sigma)
-> a constant (p = 0). (Not, as one might guess, p = 1 for exponential tails: their top spacings do not shrink.) The
fit: ln beta_c = p ln ln n + c by least squares over the rows of one eval window (every layer, head and measured query
position), so p is one number per window; the windows are the unit (lab/stats.py's t interval over windows, seeds
inside it). The asymptotic exponents are reached slowly: at the n of an eval (16..4096) i.i.d. Gaussian rows fit
p ~ 0.8-0.9 and the ln n family ~ 1.2, so each fit is recorded beside reference_laws, the same fit of i.i.d. rows of
each family at the same n.

In eval.py (--temperature_law=True; off by default, so earlier runs and their numbers do not move): per arm, the
scores each layer's attention computes through the model's `attend` seam (the arm's own score function: its crop, map
or query temperature, ALiBi's / FIRE's / CoPE's bias and SSMax's scale included, a learned sink as one more
competitor), at `law_rows` query positions per position bucket (geometric in n, from MIN_KEYS keys on), every head of
every layer, on the first `law_windows` eval windows, each position scored as the model runs when generating (a
moving RoPE scale: a forward of p + 1 tokens). Recorded per bucket: the median beta_c over its rows and the share of
rows with beta_c <= 1; per window the fitted p, over all rows, inside L (the model's own law at its trained
temperature) and past L (what a length-dependent temperature would have to follow). The truncated crop is skipped
(each of its rows is another input's last row). summary.json: arms[i].temperature_law; temperature_law.csv; a table
in summary.md.
"""
import csv
import functools
import io
import math
import warnings

import numpy as np
import torch

from lab.attention import sink_of
from lab.measure.scoring import bucket_ends
from lab.stats import seeds_mean_ci

DEFAULTS = dict(
    temperature_law=False,  # the temperature-law diagnostic (beta_c per row, the fitted law p): off by default
    law_rows=16,            # its query positions per position bucket (geometric in n), each row every layer and head
    law_windows=0,          # its eval windows (the first ones; 0: all of --num_windows); p's interval is over these
)
MIN_KEYS = 16               # rows seeing fewer keys are neither measured nor fitted (ln ln n is ~1 there)
LAWS = {0.0: 'constant', 0.5: '(ln n)^1/2', 1.0: 'ln n', 2.0: '(ln n)^2'}  # exponent p of beta_c ~ (ln n)^p


# ----------------------------------------------------------------------------- the pure functions

def critical_beta(scores, iters=100):
    """beta_c of each row of `scores` (..., K), -inf where a key is not seen: the least beta >= 0 with
    Z(beta) = sum_{j != top} exp(-beta (s_top - s_j)) <= 1 (the top key then holds half the softmax mass). float64
    tensor (...): 0 for rows with at most one competitor, inf where a competitor ties the top (and others remain).
    Newton's method on ln Z (convex, decreasing) from lo = ln m / mean(g) (Jensen: ln Z(lo) >= 0), m competitors,
    bounded by hi = ln m / min(g) (ln Z(hi) <= 0)."""
    s = scores.detach().to(torch.float64)
    seen = torch.isfinite(s)
    m = seen.sum(-1) - 1  # competitors: the keys seen but the top one
    top = s.argmax(-1, keepdim=True)
    comp = seen.scatter(-1, top, False)
    g = torch.where(comp, s.gather(-1, top) - s, torch.full_like(s, math.inf))  # inf: not a competitor
    gmin = g.amin(-1)
    gmean = torch.where(comp, g, torch.zeros_like(g)).sum(-1) / m.clamp(min=1)
    logm = torch.log(m.clamp(min=1).to(torch.float64))
    ok = (m >= 2) & (gmin > 0)
    beta = torch.where(ok, logm / gmean.clamp(min=1e-300), torch.zeros_like(logm))
    hi = torch.where(ok, logm / gmin.clamp(min=1e-300), torch.zeros_like(logm))
    for _ in range(iters):
        w = torch.where(comp, -beta[..., None] * g, torch.full_like(g, -math.inf))
        lz = torch.logsumexp(w, -1)
        slope = (torch.softmax(w, -1).nan_to_num(0.0) * torch.where(comp, g, torch.zeros_like(g))).sum(-1)
        step = torch.where(ok, lz / slope.clamp(min=1e-300), torch.zeros_like(lz))
        beta = torch.minimum(beta + step.clamp(min=0), hi)
        if not bool((step.abs() > 1e-13 * beta.clamp(min=1e-300)).any()):
            break
    out = torch.where(ok, beta, torch.zeros_like(beta))
    return torch.where((m >= 2) & (gmin <= 0), torch.full_like(out, math.inf), out)


def law_fit(n, beta):
    """(p, c) of ln beta = p ln ln n + c by least squares over the rows with n >= MIN_KEYS and 0 < beta < inf; (nan,
    nan) when fewer than two distinct n remain. n, beta: arrays of one shape (the rows of one window)."""
    n, beta = np.asarray(n, dtype=np.float64).ravel(), np.asarray(beta, dtype=np.float64).ravel()
    keep = (n >= MIN_KEYS) & np.isfinite(beta) & (beta > 0)
    x, y = np.log(np.log(n[keep])), np.log(beta[keep])
    if len(np.unique(x)) < 2:
        return math.nan, math.nan
    p, c = np.polyfit(x, y, 1)
    return float(p), float(c)


FAMILIES = {  # i.i.d. scores whose beta_c follows each law as n grows: X = draw(rng, shape); law -> exponent
    'constant': lambda rng, sh: rng.exponential(size=sh),               # h(x) = x: beta_c -> a constant
    '(ln n)^1/2': lambda rng, sh: rng.standard_normal(sh),              # h(x) = x^2 / 2
    'ln n': lambda rng, sh: np.log(rng.exponential(size=sh)),           # h(x) = e^x
    '(ln n)^2': lambda rng, sh: -1.0 / rng.exponential(size=sh),        # h(x) = 1 / (-x), x < 0
}


def reference_laws(ns, reps=128, seed=0):
    """The p law_fit finds for rows of i.i.d. scores of each family of FAMILIES at the key counts ns (reps rows each,
    seeded): the exponent each law shows over this range of n. -> {law: p (None with one n)}. The asymptotic
    exponents are reached slowly, so at the n of an eval the families are hardly told apart: over n = 16..1024
    Gaussian rows fit p ~ 0.8-0.9 and the ln n family ~ 1.2 (the row's bulk, not only its tail, sets beta_c there:
    ~ ln(n) / the gap to the bulk, p ~ 1); over 1,024..65,536 ~ 0.5-0.7 and ~ 0.9-1.2 (each +-0.1-0.2 from seed to
    seed at 128 rows an n). A measured p is read against these as well as against LAWS."""
    return dict(_reference(tuple(sorted({int(n) for n in ns if n >= MIN_KEYS})), reps, seed))


@functools.lru_cache(maxsize=64)
def _reference(ns, reps, seed):
    out = []
    for i, (law, draw) in enumerate(FAMILIES.items()):
        rng = np.random.default_rng([seed, i])
        beta = [critical_beta(torch.from_numpy(draw(rng, (reps, n)))).numpy() for n in ns]
        out.append((law, round(law_fit(np.repeat(ns, reps), np.concatenate(beta))[0], 4) if len(ns) > 1 else None))
    return tuple(out)


def law_interval(p):
    """The exponent over windows: p [S, W] (seeds x windows; a 1-D array is one seed) -> dict(p=mean, ci=[lo, hi],
    laws=[the laws of LAWS whose exponent the 95% interval holds], windows=W): the window is the unit
    (lab.stats.seeds_mean_ci), never the row. NaN windows (no fit) are dropped with their column."""
    p = np.atleast_2d(np.asarray(p, dtype=np.float64))
    p = p[:, np.isfinite(p).all(0)]
    if p.shape[1] == 0:
        return dict(p=None, ci=None, laws=[], windows=0)
    mean, ci = seeds_mean_ci(p)
    return dict(p=mean, ci=ci, laws=[name for e, name in LAWS.items() if ci[0] <= e <= ci[1]], windows=p.shape[1])


def law_positions(L, T, rows):
    """The measured query positions: in each position bucket [lo, hi) (lab.measure.scoring.bucket_ends), `rows`
    positions whose key counts n = p + 1 are geometric from max(lo + 1, MIN_KEYS) to hi (rounded, distinct)."""
    out, lo = [], 0
    for hi in bucket_ends(L, T):
        a = max(lo + 1, MIN_KEYS)
        if a <= hi:
            out += sorted({int(round(v)) - 1 for v in np.geomspace(a, hi, rows)})
        lo = hi
    return out


# ----------------------------------------------------------------------------- the measurement


@torch.no_grad()
def row_betas(model, x, positions, logits=None, attend=None):
    """beta_c and n (the keys seen) of every layer's and head's attention row at query positions `positions` of
    x [B, T'] (T' > max(positions)), from one forward through the attend seam: the scores of score(p, p + 1)
    (logits: fn(layer, q, k, s, e), the arm's own; default each layer's `logits`), a learned sink appended as one
    more competitor; the forward itself runs `attend` (the arm's; default each layer's own). -> (beta, n), float64
    arrays [n_layer, B, n_head, P]."""
    beta, n = [None] * model.config.n_layer, [None] * model.config.n_layer

    def seam(layer, q, k, v):
        attn = model.transformer.h[layer].attn
        sink = sink_of(model, layer)
        rows = []
        for p in positions:
            sc = (logits(layer, q, k, p, p + 1) if logits else attn.logits(q, k, p, p + 1))[:, :, 0].float()
            rows.append((torch.isfinite(sc).sum(-1), sc if sink is None else
                         torch.cat((sc, sink.float().view(1, -1, 1).expand(sc.size(0), -1, 1)), -1)))
        n[layer] = torch.stack([r[0] for r in rows], -1).cpu().numpy().astype(np.float64)
        beta[layer] = torch.stack([critical_beta(r[1]) for r in rows], -1).cpu().numpy()
        return attn.attend(q, k, v) if attend is None else attend(layer, q, k, v)
    model(x, attend=seam)
    return np.stack(beta), np.stack(n)


@torch.no_grad()
def law_rows_at(model, x, positions, n0, ctx, logits=None, attend=None):
    """row_betas at every position, each scored as the model runs when generating: positions below n0 from one
    forward of max(them) + 1 tokens, a later p by a forward of p + 1 tokens (a moving RoPE scale). -> (beta, n),
    [n_layer, B, n_head, P] in the order of positions."""
    near, far = [p for p in positions if p < n0], [p for p in positions if p >= n0]
    parts = []
    with ctx:
        if near:
            parts.append(row_betas(model, x[:, :max(near) + 1], near, logits, attend))
        for p in far:
            parts.append(row_betas(model, x[:, :p + 1], [p], logits, attend))
    return tuple(np.concatenate([part[i] for part in parts], -1) for i in (0, 1))


def law_measures(model, form, plan, run, cfg, ctx):
    """One checkpoint's measurement for eval.py: {'positions', 'beta', 'n'} ([n_layer, W, n_head, P]) over the first
    law_windows eval windows, through the arm's form (lab/measure/forms.py); None when --temperature_law is off.
    {'skipped': why} for the truncated crop (each of its rows is another input's last row, not the arm's own)."""
    if not cfg.get('temperature_law'):
        return None
    if form.truncated:
        return dict(skipped="the truncated crop: each row is another input's last (crop:form=sliding is measured)")
    L, T = run['L'], run['T']
    w = cfg['law_windows'] or len(run['seqs'])
    x = run['seqs'][:w, :T].to(next(model.parameters()).device)
    positions = law_positions(L, T, cfg['law_rows'])
    beta, n = law_rows_at(model, x, positions, plan[0][0][1], ctx, form.logits, form.attend)
    return dict(positions=positions, beta=beta, n=n)


def law_summary(per_run, L, T):
    """An arm's summary.json entry from its seeds' law_measures: per position bucket the median beta_c over its rows
    (windows, layers, heads, positions, seeds), the share with beta_c <= 1 (the top key holds half the mass at the
    trained temperature) and the row count; the law p over all rows, over those inside L (the model's own law at its
    trained temperature) and over those past L (the growth a length-dependent temperature would have to follow):
    law_fit per seed and window, law_interval over windows, reference_laws at the same n beside it (None where a
    range has one n or none: a crop past its window, T <= L); and each layer's p over all rows (all.per_layer)."""
    runs = [r for r in per_run if r]
    if not runs or 'skipped' in runs[0]:
        return runs[0] if runs else None
    pos = np.asarray(runs[0]['positions'])
    ends = bucket_ends(L, T)
    buckets = {}
    for lo, hi in zip([0] + ends, ends):
        b = np.concatenate([r['beta'][..., (pos >= lo) & (pos < hi)].ravel() for r in runs])
        buckets[f"{lo}-{hi}"] = None if b.size == 0 else dict(
            median=float(np.median(b)), concentrated=float(np.mean(b <= 1.0)), rows=int(b.size))

    def fits(keep):
        return [[law_fit(r['n'][:, w][..., keep], r['beta'][:, w][..., keep]) for w in range(r['beta'].shape[1])]
                for r in runs]
    out = dict(buckets=buckets, min_keys=MIN_KEYS, positions=pos.tolist(),
               ties=int(sum(np.isinf(r['beta']).sum() for r in runs)))
    with warnings.catch_warnings():  # (a range with one n: NaN fits, dropped by law_interval)
        warnings.simplefilter('ignore', RuntimeWarning)
        for name, keep in (('all', pos >= 0), ('inside_L', pos < L), ('past_L', pos >= L)):
            got = fits(keep)
            out[name] = dict(**law_interval([[p for p, _ in seed] for seed in got]),
                             reference=reference_laws(np.unique(runs[0]['n'][..., keep])),
                             per_window=[[None if math.isnan(p) else round(p, 4) for p, _ in seed] for seed in got])
        per_layer = np.nanmean([[law_fit(r['n'][layer, w], r['beta'][layer, w])[0] for r in runs
                                 for w in range(r['beta'].shape[1])] for layer in range(runs[0]['beta'].shape[0])], 1)
    out['all']['per_layer'] = [None if math.isnan(p) else round(float(p), 3) for p in per_layer]  # the layers differ
    return out


def law_csv(results):
    """temperature_law.csv from summary.json's arms (None when no arm carries the diagnostic): a row per arm and
    position bucket (median beta_c, the share of rows with beta_c <= 1, rows), then per arm its fitted law over all
    rows and inside L (p, its 95% interval over windows, windows, the laws of LAWS inside that interval)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator='\n')
    w.writerow(['arm', 'bucket', 'median_beta_c', 'share_beta_c_le_1', 'rows', 'p', 'p_lo', 'p_hi', 'windows',
                'laws_in_interval'])
    got = False
    for a in results:
        t = a.get('temperature_law')
        if not t or 'skipped' in t:
            continue
        got = True
        for label, b in t['buckets'].items():
            w.writerow([a['name'], label, *(('', '', 0) if b is None else (g7(b['median']), g7(b['concentrated']),
                                                                            b['rows'])), '', '', '', '', ''])
        for name in ('all', 'inside_L', 'past_L'):
            f = t[name]
            w.writerow([a['name'], f"p_{name}", '', '', '', '' if f['p'] is None else g7(f['p']),
                        *(map(g7, f['ci']) if f['ci'] else ('', '')), f['windows'], ' / '.join(f['laws'])])
    return buf.getvalue() if got else None


def g7(x):
    """x to 7 significant digits, as summary.json stores it (so a merged eval's CSV is the measured one's)."""
    return f"{float(x):.7g}"
