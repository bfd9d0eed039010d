"""
What every retrieval room shares (lab/measure/retrieval.py's and lab/measure/ruler.py's): the distance buckets a room's
rows are drawn in, each room's own seed stream, a window of held-out tokens, and the check that a room has a bucket
inside the training length (its positive control).
"""
import numpy as np

ROOM_SEEDS = {'passkey_depth': 11, 'needles': 12, 'recall': 13,  # each room its own stream of the eval seed
              'needles_words': 14, 'needles_mv': 15, 'tracking': 16, 'passkey_text': 17}


def distance_buckets(L, T, span, lo):
    """The distance buckets of a room whose rows need `span` tokens from the query (the repeat) on, the last scored
    target included, and distances >= lo: [lo, 3L/4) and [3L/4, L - span] inside L (the whole row in the first L
    tokens; 96-127 at L = 128 is where an effective length shorter than L shows), then [L, 2L), [2L, 4L), ... the
    last ending at T - span (a row ends by T, as the passkey's). Empty buckets are left out. Returns
    [(label, a, b, limit)]: distances a <= d < b, every row of the bucket at most `limit` tokens long. Labels: the
    distances that occur inside L ('12-95', '96-116'), the bucket's nominal range beyond ('128-256')."""
    spans, e = [(0, 3 * L // 4, L), (3 * L // 4, L, L)], L
    while e < T:
        spans.append((e, min(2 * e, T), T))
        e *= 2
    out = []
    for a, b, limit in spans:
        a2, b2 = max(a, lo), min(b, limit - span + 1)
        if a2 < b2:
            out.append((f"{a2}-{b2 - 1}" if limit == L else f"{a}-{b}", a2, b2, limit))
    return out


def window_tokens(val, s, n):
    """Tokens s..s+n-1 of the held-out text as an int64 array."""
    return np.array(val[s:s + n], dtype=np.int64)


def room_rng(seed, room):
    return np.random.default_rng([seed, ROOM_SEEDS[room]])


def check_fit(buckets, what, L):
    if not any(limit == L for *_, limit in buckets):
        raise ValueError(f"{what} does not fit inside L={L}: no distance bucket lies inside the training length; "
                         f"use shorter strings")
