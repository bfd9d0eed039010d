"""
Teaching a small model to copy from its context, so that retrieval past L can be measured at all: synthetic copies
mixed into the training windows, and smeared keys. One room; lab/engine/batches.py uses it through `settings` and `mix`.

Copies: in a share of the windows a random string is written twice at a random distance (`insert_repeats`); a warm-up
of copy_fixed_iters steps writes one random string twice at a fixed offset, which a model learns fast as a
positional copy and then turns into content-based copying (see docs/results.md for the recipe search).
Smeared keys (Olsson et al. 2022's induction-head shortcut): each head's key mixes in the previous token's key,
k_t += g_h (k_{t-1} - k_t) with a learned gate g_h = sigmoid(smear_h) (0.5 at init), on the content before RoPE puts
it at position t; one layer can then find "the token after the previous occurrence". `attention='smear_keys'`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from model import ATTENTION, CausalSelfAttention, rotate


class SmearedKeyAttention(CausalSelfAttention):
    lookback = 1  # a key depends on the previous token's: the KV cache feeds that token again (lab/kv_cache.py)

    def __init__(self, config, spec):
        super().__init__(config, spec)
        self.smear = nn.Parameter(torch.zeros(config.n_head, 1, 1))

    def qkv(self, x, rope):
        q, k, v = super().qkv(x, None)
        k = k + torch.sigmoid(self.smear).to(k.dtype) * (F.pad(k, (0, 0, 1, -1)) - k)
        return (*rotate(q, k, rope), v)


ATTENTION['smear_keys'] = SmearedKeyAttention


def check_cap(max_distance, span_hi):
    """A cap on the distance between the two copies is 0 (none) or at least the longest copy: ValueError otherwise."""
    if max_distance and not span_hi <= max_distance:  # not <=: NaN too
        raise ValueError(f"copy_max_distance={max_distance} must be 0 (no cap) or >= copy_span_hi={span_hi} (a copy "
                         f"cannot start before its first copy ends)")


def insert_repeats(w, gen, share, span_lo, span_hi, vocab_size, exclude=None, max_distance=0):
    """Synthetic retrieval mixed into natural-text windows w (N, n) int64 (n = T+1: inputs w[:, :-1], targets
    w[:, 1:]). Each window, with probability `share`, gets a random string of k tokens (k uniform in
    [span_lo, span_hi], ids uniform in [0, vocab_size) except `exclude`, e.g. eot) written over a span and again
    at distance d (uniform in [k, n-k], or [k, min(n-k, max_distance)] when max_distance > 0: a fine-tune that keeps
    the copy skill without training the distances an eval tests) later in the same window, both copies inside it;
    the rest stays text.
    Draws only from the torch.Generator `gen`, so runs are reproducible and every DDP rank sees the same data.
    Returns a new tensor; share 0 returns w itself and draws nothing."""
    if share <= 0:
        return w
    N, n = w.shape
    if not 1 <= span_lo <= span_hi or 2 * span_hi > n:
        raise ValueError(f"copy spans [{span_lo}, {span_hi}] do not fit twice in windows of {n} tokens; "
                         f"need 1 <= copy_span_lo <= copy_span_hi <= {n // 2}")
    check_cap(max_distance, span_hi)
    tokens = torch.tensor([t for t in range(vocab_size) if t != exclude])
    w = w.clone()
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=gen))  # uniform in [lo, hi]
    for i in (torch.rand(N, generator=gen) < share).nonzero().flatten().tolist():
        k = draw(span_lo, span_hi)
        d = draw(k, n - k if not max_distance else min(n - k, max_distance))
        s = draw(0, n - k - d)
        key = tokens[torch.randint(len(tokens), (k,), generator=gen)]
        w[i, s:s + k] = key
        w[i, s + d:s + d + k] = key
    return w


def settings(cfg, meta, T):
    """insert_repeats' settings (+ fixed_iters) from a run's cfg for windows of T tokens; None when there is no mix.
    Raises ValueError naming the setting when one is out of range."""
    if not (cfg['copy_share'] > 0 or cfg['copy_fixed_iters'] > 0):
        if not cfg['copy_share'] >= 0 or cfg['copy_fixed_iters'] < 0:  # not >= 0: NaN too
            raise ValueError(f"copy_share={cfg['copy_share']} and copy_fixed_iters={cfg['copy_fixed_iters']} must be "
                             f">= 0 (0: no synthetic copies)")
        return None
    mix = dict(share=cfg['copy_share'], span_lo=cfg['copy_span_lo'], span_hi=cfg['copy_span_hi'],
               vocab_size=meta['vocab_size'], exclude=meta['eot_token'], fixed_iters=cfg['copy_fixed_iters'],
               max_distance=cfg.get('copy_max_distance', 0))
    check_cap(mix['max_distance'], mix['span_hi'])
    if mix['fixed_iters'] < 0 or not (0 <= mix['share'] <= 1 and 1 <= mix['span_lo'] <= mix['span_hi']
                                      and 2 * mix['span_hi'] <= T + 1):
        raise ValueError(f"copy_share={mix['share']} must be in [0, 1], copy_fixed_iters={mix['fixed_iters']} >= 0 "
                         f"and 1 <= copy_span_lo={mix['span_lo']} <= copy_span_hi={mix['span_hi']} <= (window+1)/2 = "
                         f"{(T + 1) // 2} (the window trained is {T} tokens)")
    return mix


def describe(mix, T):
    """One line saying what the mix does."""
    half = (T + 1) // 2
    return (f"synthetic copies: steps < {mix['fixed_iters']}: every window is a random string of {half} tokens written "
            f"twice (fixed offset); then " * (mix['fixed_iters'] > 0) +
            f"{100 * mix['share']:g}% of windows carry a random string of {mix['span_lo']}-{mix['span_hi']} tokens "
            f"written twice, at a uniform distance inside the window" +
            (f" up to {mix['max_distance']}" if mix.get('max_distance') else ''))


def mix(w, gen, mix, it):
    """Windows w (N, T+1) with the copies of step `it` written in (the fixed-offset warm-up before fixed_iters)."""
    m = dict(mix)
    if it < m.pop('fixed_iters'):  # a copy at a fixed offset: learned fast, as a positional copy
        half = w.size(1) // 2
        m.update(share=1.0, span_lo=half, span_hi=half, max_distance=0)
    return insert_repeats(w, gen, **m)
