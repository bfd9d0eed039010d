"""
RULER's harder needles (Hsieh et al. 2024) in miniature, beside lab/measure/retrieval.py's rooms and built like them (the same
windows, distance buckets, one example per window and bucket from the room's own seed stream, scored by
lab.measure.outcomes.room_scores). They separate what the lab's base was trained to do from finding information:

  word_needle_examples   the multi-key needle in a format the base never trained on: records " <word> is <digits>",
                         keys words of the held-out play, values digit strings, a separator of several tokens (the
                         copy mix writes uniform random strings of 8-32 tokens twice, with no separator)
  multi_value_examples   one key written with several values (MV-NIAH): after the key, every value in the order written
  tracking_examples      variable tracking: A:K at one place, K:V at another; the query A: asks for V, which shares no
                         token with the query, so that one literal match (copying K) is not enough

Each example records `choices`, the first token of the answer and of the wrong values a shortcut would copy, so that
room_scores records which one the model starts to write (lab.measure.outcomes.emitted_choice).
"""
import numpy as np

from data.sources import get_tokenizer
from lab.measure.placement import check_fit, distance_buckets, room_rng, window_tokens
from lab.measure.retrieval import needle_examples, separator_token


def encode(meta, text):
    """The token ids of text (as plain text) in the run's vocabulary: data.sources.get_tokenizer's (characters, GPT-2
    BPE, a GGUF's own BPE); ValueError when the vocabulary cannot write it."""
    return get_tokenizer(meta)[0](text)


def decode(meta, ids):
    """The text of token ids in the run's vocabulary (data.sources.get_tokenizer's)."""
    return get_tokenizer(meta)[1]([int(i) for i in ids])


def play_words(val, meta, key_len):
    """The distinct lower-case words of the held-out text written ' word' in exactly key_len tokens, as token rows
    [n, key_len] (sorted, so the same text gives the same list)."""
    words = sorted({w for w in decode(meta, val).split() if w.isalpha() and w.islower()})
    rows = [ids for ids in (encode(meta, ' ' + w) for w in words) if len(ids) == key_len]
    return np.array(rows, dtype=np.int64).reshape(-1, key_len)


def digit_tokens(meta):
    """The ids of the tokens that are digits only."""
    _, text = get_tokenizer(meta)  # built once, not once per token
    return [t for t in range(meta['vocab_size']) if t != meta['eot_token'] and text([t]).isdigit()]


def word_needle_examples(val, starts, T, L, meta, seed, needles=4, key_len=6, value_len=5, mid=' is '):
    """The multi-key needle (lab.measure.retrieval.needle_examples: the asked record's rank uniform at every distance, the
    value scored after the key and separator) with records ' <word> is <digits>': keys drawn uniformly from the
    play's words (play_words; each occurs once in the row, so a word that the text around it uses is drawn again),
    values value_len digit tokens whose first digits differ between the records (so the first token emitted names
    one record). ValueError when the vocabulary cannot write them."""
    words, digits = play_words(val, meta, key_len), np.array(digit_tokens(meta))
    if len(words) < 10 * needles or len(digits) < needles:
        raise ValueError(f"word needles: the vocabulary needs >= {needles} digit tokens (has {len(digits)}) and the "
                         f"held-out text >= {10 * needles} words of {key_len} tokens (has {len(words)})")

    def draw(rng, k):
        keys = words[rng.choice(len(words), k, replace=False)]
        values = rng.choice(digits, (k, value_len))
        values[:, 0] = rng.choice(digits, k, replace=False)
        return keys, values
    return needle_examples(val, starts, T, L, meta['vocab_size'], meta['eot_token'], seed, needles=needles,
                           key_len=key_len, value_len=value_len, draw=draw, mid=encode(meta, mid),
                           room='needles_words')


# ----------------------------------------------------------------------------- multi-value and tracking


def _free_starts(free, lo, hi):
    """The places a record may start inside [lo, hi] that overlap none placed."""
    at = np.flatnonzero(free)
    return at[(at >= lo) & (at <= hi)]


def _put(rng, free, lo, hi, rec):
    """A record placed uniformly over the free starts in [lo, hi], its span marked taken; None when none is free."""
    room = _free_starts(free, lo, hi)
    if not len(room):
        return None
    p = int(room[rng.integers(len(room))])
    free[max(0, p - rec + 1):p + rec] = False
    return p


def _place(rng, free, q, d, rec, between, distractors):
    """The earliest record of interest at q - d, `between` more of interest uniformly between it and the query, and
    `distractors` others: r of them (r uniform over 0..distractors) before it, the rest after. Returns the starts
    [first, between..., distractors...], or None when they do not fit."""
    first = q - d
    if not free[first]:
        return None
    free[max(0, first - rec + 1):first + rec] = False
    later = lambda: _put(rng, free, first + rec, q - rec, rec)  # noqa: E731
    pos = [first] + [later() for _ in range(between)]
    before = int(rng.integers(0, distractors + 1))
    pos += [_put(rng, free, 0, first - rec, rec) if i < before else later() for i in range(distractors)]
    return None if None in pos else pos


def _records(rng, window, tokens, lo, hi, limit, n_rec, span, kl, vl, sep, scored, build):
    """One try at an example of n_rec records of kl + 1 + vl tokens before a query of `span` tokens: the distance d
    from the query start q back to the earliest record of interest uniform in [lo, hi), q uniform over what fits;
    build(rng, q, d, free, rec, tokens, sep) places the records and returns (positions [n_rec], keys, values, query
    tokens, extra, want) or None, want = [(key, how often it must occur before the query)]. Returns the example
    (seq ends at the query's last token; the `scored` tokens after the query's key and ':' are scored) or None when
    the draw does not fit or the text makes a key occur more often than wanted."""
    rec = kl + 1 + vl
    d = int(rng.integers(lo, hi))
    q_lo, q_hi = max(n_rec * rec, d), limit - span
    if q_lo > q_hi:
        return None
    q = int(rng.integers(q_lo, q_hi + 1))
    free = np.ones(q - rec + 1, dtype=bool)
    made = build(rng, q, d, free, rec, tokens, sep)
    if made is None:
        return None
    pos, keys, values, query, extra, want = made
    seq = window[:q + span].copy()
    for p, key, value in zip(pos, keys, values):
        seq[p:p + rec] = np.concatenate([key, [sep], value])
    seq[q:q + span] = query
    if not _key_counts_ok(seq, q, want):
        return None
    return dict(extra, distance=d, depth=q - d, query=q, seq=seq, where=list(range(q + kl, q + kl + scored)))


def _bigrams(row):
    return set(zip(row[:-1].tolist(), row[1:].tolist()))


def _key_counts_ok(seq, q, want):
    """Whether each key occurs in seq[:q] exactly as often as want[key] says (no copy of it made by the text)."""
    for key, n in want:
        if int((np.lib.stride_tricks.sliding_window_view(seq[:q], len(key)) == key).all(1).sum()) != n:
            return False
    return True


def _room_examples(val, starts, T, L, meta, seed, room, n_rec, span, lo, kl, vl, scored, build):
    """Per window and distance bucket (distance_buckets, span tokens from the query on, distances >= lo) one example
    of _records(..., build), tried again until it fits."""
    sep = separator_token(meta)
    if sep is None:
        raise ValueError(f"{room}: the vocabulary has no one-token ':' to separate keys from values")
    buckets = distance_buckets(L, T, span, lo)
    check_fit(buckets, f"a {room} query of {span} tokens", L)
    if n_rec * (kl + 1 + vl) > L - span:
        raise ValueError(f"{room}: {n_rec} records of {kl + 1 + vl} tokens and a query of {span} do not fit inside "
                         f"L={L}; use fewer or shorter records")
    rng = room_rng(seed, room)
    tokens = np.array([t for t in range(meta['vocab_size']) if t not in (meta['eot_token'], sep)])
    examples = []
    for b, (_, a, z, limit) in enumerate(buckets):
        for s in starts:
            window = window_tokens(val, s, limit)
            for _ in range(10000):
                ex = _records(rng, window, tokens, a, z, limit, n_rec, span, kl, vl, sep, scored, build)
                if ex is not None:
                    break
            else:
                raise RuntimeError(f"{room}: could not place the records in bucket {a}-{z - 1}")
            examples.append(dict(ex, bucket=b, start=s))
    return [bk[:3] for bk in buckets], examples


def multi_value_examples(val, starts, T, L, meta, seed, values=3, distractors=2, key_len=4, value_len=4):
    """MV-NIAH: one key written in `values` records key:value with different values, and `distractors` records of
    other keys, over the held-out text; the query is the key, ':', then every value in the order written, all of
    them scored (exact = every value token is the argmax). The distance is from the query back to the earliest of
    the key's records (uniform in the bucket); the key's other records lie uniformly between it and the query, and
    r of the distractors (r uniform) before it, the rest after. choices: the first value (the oldest), a later
    value of the key, a distractor's value. Random tokens (never eot or ':'), the lab's trained alphabet."""
    rec = key_len + 1 + value_len
    span = key_len + 1 + values * value_len

    def build(rng, q, d, free, rec, tokens, sep):
        pos = _place(rng, free, q, d, rec, values - 1, distractors)
        if pos is None:
            return None
        pos = sorted(pos[:values]) + pos[values:]  # the key's records in the order written
        keys = rng.choice(tokens, (1 + distractors, key_len))
        vals = rng.choice(tokens, (values + distractors, value_len))
        vals[:, 0] = rng.choice(tokens, values + distractors, replace=False)
        if len({tuple(x) for x in keys.tolist()}) < len(keys):
            return None
        choices = [('first', int(vals[0, 0]))] + [('later', int(v)) for v in vals[1:values, 0]] + \
            [('other', int(v)) for v in vals[values:, 0]]
        return (pos, [keys[0]] * values + list(keys[1:]), vals, np.concatenate([keys[0], [sep]] + list(vals[:values])),
                dict(choices=choices), [(keys[0], values)] + [(k, 1) for k in keys[1:]])
    return _room_examples(val, starts, T, L, meta, seed, 'needles_mv', values + distractors, span, values * rec,
                          key_len, value_len, values * value_len, build)


def tracking_examples(val, starts, T, L, meta, seed, distractors=2, key_len=4, value_len=4):
    """Variable tracking in two hops: records A:K and K:V (random strings of key_len = value_len tokens; K is the
    first record's value and the second's key) in either order, with `distractors` records X:Y, over the held-out
    text; the query A: is followed by V, scored. V shares no token with the query: copying after the literal match
    of A gives K (one hop). The distance is from the query back to the earlier of the two chain records (uniform in
    the bucket), the other lying uniformly between; r distractors before it (r uniform), the rest after; the query A:
    and the record K:V share no two tokens in a row. choices:
    V (the answer), K (one hop), a distractor's value. order: 'A:K first' or 'K:V first'."""
    if key_len != value_len:
        raise ValueError(f"tracking: key_len={key_len} must equal value_len={value_len} (K is a value and a key)")
    rec = span = key_len + 1 + value_len

    def build(rng, q, d, free, rec, tokens, sep):
        pos = _place(rng, free, q, d, rec, 1, distractors)
        if pos is None:
            return None
        s = rng.choice(tokens, (3 + 2 * distractors, key_len))  # A, K, V, then the distractors' keys and values
        s[:, 0] = rng.choice(tokens, len(s), replace=False)     # first tokens all distinct
        A, K, V = s[0], s[1], s[2]
        if _bigrams(np.concatenate([A, [sep]])) & _bigrams(np.concatenate([K, [sep], V])):
            return None  # the query would match K:V's record literally (two tokens in a row)
        dk, dv = s[3:3 + distractors], s[3 + distractors:]
        forward = bool(rng.integers(2))
        chain = pos[:2] if forward else pos[1::-1]  # A:K's place, then K:V's
        choices = [('answer', int(V[0])), ('one hop', int(K[0]))] + [('other', int(v[0])) for v in dv]
        return (chain + pos[2:], [A, K] + list(dk), [K, V] + list(dv), np.concatenate([A, [sep], V]),
                dict(choices=choices, order='A:K first' if forward else 'K:V first'),
                [(A, 1), (K, 2), (np.concatenate([K, [sep]]), 1)] + [(k, 1) for k in dk])
    return _room_examples(val, starts, T, L, meta, seed, 'tracking', 2 + distractors, span, 2 * rec, key_len,
                          value_len, value_len, build)


WORD = dict(key_len=6, value_len=5)        # ' ' + a five-letter word; five digits
RANDOM = dict(distractors=2, key_len=4, value_len=4)  # the trained alphabet's records, as the needles'


def rooms(cfg, val, starts, T, L, meta):
    """eval.py's rooms of this file from its settings (word_needles, mv_values, tracking; 0 / False: left out), as
    lab.measure.retrieval.make_rooms' extra: [(name, build, settings)]."""
    seed, out, n, v = cfg['seed'], [], cfg['word_needles'], cfg['mv_values']
    if n:
        out.append(('needles_words', lambda: word_needle_examples(val, starts, T, L, meta, seed, n, **WORD),
                    dict(needles=n, **WORD, format="' <word> is <digits>'")))
    if v:
        out.append(('needles_mv', lambda: multi_value_examples(val, starts, T, L, meta, seed, v, **RANDOM),
                    dict(values=v, **RANDOM)))
    if cfg['tracking']:
        out.append(('tracking', lambda: tracking_examples(val, starts, T, L, meta, seed, **RANDOM), dict(RANDOM)))
    return out
