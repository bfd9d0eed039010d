"""
Teaching a small model to copy from its context, so that retrieval past L can be measured at all: synthetic copies
mixed into the training windows. One room; lab/engine/batches.py uses it through `settings` and `mix`. Its bases train
with smeared keys (attention='smear_keys', lab/smeared_keys.py).

Copies: in a share of the windows a random string is written twice at a random distance (`insert_repeats`); a warm-up
of copy_fixed_iters steps writes one random string twice at a fixed offset, which a model learns fast as a
positional copy and then turns into content-based copying (see docs/results.md for the recipe search). A share of
those windows (copy_words) may carry word-needle records instead (`insert_records`): lab.measure.ruler's format,
' <word> is <digits>' written several times and one of them again, so that its room has a base that passes it
(lab/engine/batches.py reads that format's tokens from the training text: add_records).
"""
import torch


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
    return write_repeats(w, gen, (torch.rand(N, generator=gen) < share).nonzero().flatten().tolist(), span_lo,
                         span_hi, vocab_size, exclude, max_distance)


def write_repeats(w, gen, rows, span_lo, span_hi, vocab_size, exclude=None, max_distance=0):
    """insert_repeats' strings written into the chosen rows of w (a new tensor)."""
    n = w.size(1)
    tokens = torch.tensor([t for t in range(vocab_size) if t != exclude])
    w = w.clone()
    draw = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=gen))  # uniform in [lo, hi]
    for i in rows:
        k = draw(span_lo, span_hi)
        d = draw(k, n - k if not max_distance else min(n - k, max_distance))
        s = draw(0, n - k - d)
        key = tokens[torch.randint(len(tokens), (k,), generator=gen)]
        w[i, s:s + k] = key
        w[i, s + d:s + d + k] = key
    return w


def check_records(n, words, digits, mid, needles=4, value_len=5):
    """insert_records' settings against windows of n tokens: the record length, or ValueError naming what to change."""
    K, kl = words.shape
    rec = kl + len(mid) + value_len
    if (needles + 1) * rec > n:
        raise ValueError(f"copy_words: {needles} word-needle records of {rec} tokens and their query need windows of "
                         f"{(needles + 1) * rec} tokens, these are {n}; train longer windows or set copy_words=0")
    if K < needles or len(digits) < needles:
        raise ValueError(f"copy_words: the records need >= {needles} words of {kl} tokens in the training text (it "
                         f"has {K}) and >= {needles} digit tokens in the vocabulary (it has {len(digits)}); use a "
                         f"corpus that has them or set copy_words=0")
    return rec


def insert_records(w, gen, rows, words, digits, mid, needles=4, value_len=5):
    """Word-needle records written into the chosen rows of windows w (N, n) (a new tensor): in each, `needles`
    records key + mid + value (keys distinct rows of `words` [K, key_len], e.g. ' thine'; values value_len ids drawn
    from `digits`, the first digits distinct between records; mid e.g. the ids of ' is ') at uniform non-overlapping
    places before a query start q, uniform over what fits, and at q one record drawn uniformly written again: the
    format of lab.measure.ruler's word-needle room, its value a copy the model can learn to make by matching the key.
    Draws only from the torch.Generator gen."""
    n, rec = w.size(1), check_records(w.size(1), words, digits, mid, needles, value_len)
    K = len(words)
    w, mid = w.clone(), torch.as_tensor(mid, dtype=w.dtype)
    for i in rows:
        q = int(torch.randint(needles * rec, n - rec + 1, (1,), generator=gen))
        gaps = torch.randint(0, q - needles * rec + 1, (needles,), generator=gen).sort().values
        keys = words[torch.randperm(K, generator=gen)[:needles]]
        values = digits[torch.randint(len(digits), (needles, value_len), generator=gen)]
        values[:, 0] = digits[torch.randperm(len(digits), generator=gen)[:needles]]
        recs = torch.cat([keys, mid.expand(needles, -1), values], 1)
        for j, start in enumerate((gaps + torch.arange(needles) * rec).tolist()):
            w[i, start:start + rec] = recs[j]
        w[i, q:q + rec] = recs[int(torch.randint(needles, (1,), generator=gen))]
    return w


def settings(cfg, meta, T):
    """insert_repeats' settings (+ fixed_iters) from a run's cfg for windows of T tokens; None when there is no mix.
    Raises ValueError naming the setting when one is out of range."""
    words = cfg.get('copy_words', 0)
    if not 0 <= words <= 1 or words and not cfg['copy_share'] > 0:  # not <=: NaN too
        raise ValueError(f"copy_words={words} is the share of the copy windows written as word-needle records: give a "
                         f"number in [0, 1] beside copy_share > 0 (copy_share={cfg['copy_share']})")
    if words and cfg.get('copy_max_distance'):  # the records' distances are not capped: the cap would not hold
        raise ValueError(f"copy_words={words} writes word-needle records at any distance in the window, so "
                         f"copy_max_distance={cfg['copy_max_distance']} would not hold for them; set one of them to 0")
    if not (cfg['copy_share'] > 0 or cfg['copy_fixed_iters'] > 0):
        if not cfg['copy_share'] >= 0 or cfg['copy_fixed_iters'] < 0:  # not >= 0: NaN too
            raise ValueError(f"copy_share={cfg['copy_share']} and copy_fixed_iters={cfg['copy_fixed_iters']} must be "
                             f">= 0 (0: no synthetic copies)")
        return None
    mix = dict(share=cfg['copy_share'], span_lo=cfg['copy_span_lo'], span_hi=cfg['copy_span_hi'],
               vocab_size=meta['vocab_size'], exclude=meta['eot_token'], fixed_iters=cfg['copy_fixed_iters'],
               max_distance=cfg.get('copy_max_distance', 0))
    if words:
        mix['words'] = words  # the records' tokens: lab.engine.batches.add_records, from the training text
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
            (f" up to {mix['max_distance']}" if mix.get('max_distance') else '') +
            (f"; {100 * mix['words']:g}% of those windows carry 4 word-needle records ' <word> is <digits>' and one "
             f"of them again instead" if mix.get('words') else ''))


def mix(w, gen, mix, it):
    """Windows w (N, T+1) with the copies of step `it` written in (the fixed-offset warm-up before fixed_iters)."""
    m = dict(mix)
    words, records = m.pop('words', 0), m.pop('records', None)
    if it < m.pop('fixed_iters'):  # a copy at a fixed offset: learned fast, as a positional copy
        half = w.size(1) // 2
        m.update(share=1.0, span_lo=half, span_hi=half, max_distance=0)
    elif words:  # one draw splits the copy windows: records for the first share, strings for the rest
        u = torch.rand(w.size(0), generator=gen)
        w = insert_records(w, gen, (u < m['share'] * words).nonzero().flatten().tolist(), **records)
        rows = ((u >= m['share'] * words) & (u < m['share'])).nonzero().flatten().tolist()
        return write_repeats(w, gen, rows, m['span_lo'], m['span_hi'], m['vocab_size'], m['exclude'],
                             m['max_distance'])
    return insert_repeats(w, gen, **m)
