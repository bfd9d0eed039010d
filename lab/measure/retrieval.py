"""
Retrieval from the context, measured in held-out text; eval.py scores every arm with these rooms, each one a
generator of examples (the same for every arm: one per window start and distance bucket, from a seeded draw) and
the outcome function room_scores, whose per-bucket outcomes summarize_retrieval turns into intervals and the
per-example [seeds][examples] lists of paired tests.

  passkey_examples        a random string at a fixed depth and again at distance d (the first cue tokens given),
                          against a control with no earlier copy (retrieval_scores)
  passkey_depth_examples  the same with the first copy at a random depth, so that depth and distance vary apart
  needle_examples         RULER's MK-NIAH in miniature: k records key -> value in the text, a query (one key, or two
                          one after the other) at the end, the value tokens scored
  recall_examples         a held-out line of the text at a random depth and again at distance d, against a control
                          with the line only at the later place (natural text, no random tokens)

make_rooms builds the last three for eval.py (their settings included); lab/measure/outcomes.py scores any of them.
Distance buckets (distance_buckets): [lo, 3L/4) and [3L/4, L - span] with the whole row, scored tokens included,
inside the first L tokens; then [L, 2L), [2L, 4L), ... up to T - span. A row holds only the tokens up to its last
scored target, and room_scores scores every row of a room in one call, sorted by length, so that rows of similar
length share forwards. score(rows, positions) -> (loss, hit) is lab.measure.scoring.score bound to an arm; the rooms never call a
model themselves.
"""
import numpy as np

from data.sources import get_tokenizer
from lab.measure.outcomes import room_scores
from lab.measure.placement import check_fit, distance_buckets, room_rng, window_tokens

# eval.py's settings of the rooms (its DEFAULTS include them)
DEFAULTS = dict(
    retrieval_examples=32,  # passkey examples per distance bucket, from their own windows (0 = skip the test)
    retrieval_len=24,       # tokens in the passkey string
    retrieval_cue=4,        # its first tokens, given at the repeat (the cue); the rest are scored
    retrieval_pos=8,        # where the first copy starts
    depth_len=12,           # the depth passkey: string length, its first copy at a random depth (0 = skip)
    needles=4,              # multi-key needles: records per window, one (and two) asked (0 = skip)
    needle_key=4, needle_value=4,  # tokens of a needle's key and value
    recall_len=16,          # natural-text recall: tokens of the held-out line repeated (0 = skip)
    word_needles=4,         # lab/measure/ruler.py: needles ' <word> is <digits>', the untrained format: records (0 = skip)
    mv_values=3,            # multi-value needles: values of the asked key (0 = skip)
    tracking=True,          # variable tracking: A:K ... K:V ... A: asks for V
)
def passkey_examples(val, starts, ends, T, L, K, pos, vocab_size, eot, seed):
    """The passkey test: in each window a random string of K tokens (never eot) at pos, then the same string again at
    pos + d; and a control with the string only at pos + d (no earlier copy), so that the gain isolates retrieval.
    Distance buckets [K, L), [L, 2L), ... up to the bucket ends (lab.measure.scoring.bucket_ends): in [K, L) both copies and the scored tokens lie inside the first L tokens.
    Returns buckets [(label, lo, hi)] and examples [dict(bucket, distance, depth, first, repeat, key, seq, control,
    start)]."""
    rng = np.random.default_rng(seed)
    tokens = np.array([t for t in range(vocab_size) if t != eot])
    buckets, examples, lo = [], [], 0
    for hi in ends:
        a, b = max(lo, K), min(hi, T - pos - K + 1, L - pos - K + 1 if lo == 0 else T)
        if a < b:
            for s in starts:
                d, key = int(rng.integers(a, b)), rng.choice(tokens, K)
                control = np.array(val[s:s + T + 1], dtype=np.int64)
                control[pos + d:pos + d + K] = key
                seq = control.copy()
                seq[pos:pos + K] = key
                examples.append(dict(bucket=len(buckets), distance=d, depth=pos, first=pos, repeat=pos + d, key=key,
                                     seq=seq, control=control, start=s))
            buckets.append((f"{a}-{b - 1}" if lo == 0 else f"{lo}-{hi}", a, b))
        lo = hi
    return buckets, examples


def retrieval_scores(score, buckets, examples, K, cue, scored=None):
    """Per distance bucket, each example's outcomes: exact (greedy reproduces every token after the cue, given the
    true prefix) and gain = control loss - repeat loss over the scored tokens (same string, same place, no earlier
    copy in the control). score(rows, positions) -> (loss, hit) is lab.measure.scoring.score bound to an arm: it scores each token
    as the model generates it (a dynamic arm at the scale it has when emitting that token). Returns per bucket
    dict(bucket, distance_lo, distance_hi, exact [N] bools, gain [N], repeat_loss, control_loss, depth [N],
    distance [N]) (room_scores on the passkey's scored positions)."""
    return room_scores(score, buckets, [dict(e, where=list(range(e['repeat'] + cue - 1, e['repeat'] + K - 1)))
                                        for e in examples], scored)


# ----------------------------------------------------------------------------- the passkey's placement


def _two_copies(rng, window, string, d, limit, cue, bucket, extra, with_control=True):
    """A string at a random depth p (uniform over 0..limit - K - d, the depths that fit) and again at p + d, and
    the control with it only at p + d (left out when not with_control); rows end at the last scored target
    (p + d + K tokens)."""
    K = len(string)
    p = int(rng.integers(0, limit - K - d + 1))
    n = p + d + K
    control = window[:n].copy()
    control[p + d:n] = string
    seq = control.copy()
    seq[p:p + K] = string
    out = dict(bucket=bucket, distance=d, depth=p, first=p, repeat=p + d, key=np.asarray(string), seq=seq,
               control=control, where=list(range(p + d + cue - 1, n - 1)), **extra)
    if not with_control:
        del out['control']
    return out


def _contains(row, string):
    """Whether the token string occurs anywhere in row (contiguously)."""
    k = len(string)
    if len(row) < k:
        return False
    return bool((np.lib.stride_tricks.sliding_window_view(row, k) == np.asarray(string)).all(1).any())


# ----------------------------------------------------------------------------- 1. depth and distance apart


def passkey_depth_examples(val, starts, T, L, K, cue, vocab_size, eot, seed, control=True):
    """The passkey with depth and distance drawn apart: per window and distance bucket (distance_buckets, span K) a
    distance d uniform in the bucket, then the first copy's depth p uniform over the depths that fit (0..limit - K
    - d), a random string of K tokens (never eot) at p and at p + d, the first `cue` tokens of the repeat given and
    the rest scored; the control (control=False: none, half the rows) has the string only at p + d. The repeat's
    position p + d is no longer a function of d, and the depth is recorded, so that retrieval can be read over
    (depth, distance) cells. Returns buckets [(label, lo, hi)] and examples [dict(bucket, distance, depth, first,
    repeat, key, seq, control, where)], ordered bucket by bucket, one per start."""
    if not 0 < cue < K:
        raise ValueError(f"passkey depth test: cue={cue} must be in 1..K-1 (K={K})")
    buckets = distance_buckets(L, T, K, K)
    check_fit(buckets, f"a passkey of {K} tokens", L)
    rng = room_rng(seed, 'passkey_depth')
    tokens = np.array([t for t in range(vocab_size) if t != eot])
    examples = []
    for b, (_, lo, hi, limit) in enumerate(buckets):
        for s in starts:
            d, key = int(rng.integers(lo, hi)), rng.choice(tokens, K)
            examples.append(_two_copies(rng, window_tokens(val, s, limit), key, d, limit, cue, b, dict(start=s), control))
    return [bk[:3] for bk in buckets], examples


# ----------------------------------------------------------------------------- 2. multi-key needles


def needle_examples(val, starts, T, L, vocab_size, eot, seed, needles=4, queries=1, key_len=4, value_len=4,
                    sep=None, draw=None, mid=None, room='needles'):
    """RULER's multi-key needle (MK-NIAH) in miniature, on held-out text: `needles` records, each `key_len` random
    key tokens, the separator token `sep` (None: no separator, so that it works for any vocabulary) and `value_len`
    random value tokens (never eot or sep; keys distinct, each occurring once in the row), written over the text at
    random non-overlapping places; then the query at the end: the queried key (and sep), after which the value
    tokens are scored (exact = every value token is the argmax given the true prefix). queries=2 is the
    multi-query form: two records asked one after the other (key, sep, value, key, sep, value), both values scored.
    Per window and distance bucket: each queried needle's distance to its own query (query start - needle start)
    uniform in the bucket (span = queries records), the query start q uniform over what fits (so the queried
    needle's depth q - d is uniform over the depths that fit, and the k records fit before q), the other needles
    placed one by one: r of them (r uniform over 0..needles - queries) uniformly over the free places before the
    (first) asked needle, the rest between it and the query, so that the asked record's rank among the records is
    uniform at every distance (placed uniformly over [0, q) instead, the asked record was the earliest one in 68% of
    the examples past 512: "copy the oldest value" scored there without matching a key). Returns buckets
    [(label, lo, hi)] and examples [dict(bucket, distance, depth, query, rank, seq, where, needles=[dict(pos, key,
    value, queried)])]: distance, depth and rank (records before it) of the first asked needle; seq ends at the last
    value token. Other formats (lab/measure/ruler.py): draw(rng, k) -> (keys [k, key_len], values [k, value_len]) draws the
    records' tokens (default: uniform over the vocabulary but eot and sep), mid the tokens between key and value
    (default [sep]), room the name of the seed stream."""
    if not (1 <= queries <= needles and key_len >= 1 and value_len >= 1):
        raise ValueError(f"needles: need 1 <= queries={queries} <= needles={needles}, key_len={key_len} >= 1 and "
                         f"value_len={value_len} >= 1")
    mid = ([] if sep is None else [sep]) if mid is None else list(mid)
    rec = key_len + len(mid) + value_len  # a record, needle or query
    buckets = distance_buckets(L, T, queries * rec, queries * rec)
    check_fit(buckets, f"a query of {queries} record(s) of {rec} tokens", L)
    if needles * rec > L - queries * rec:
        raise ValueError(f"needles: {needles} records of {rec} tokens and a query of {queries * rec} do not fit "
                         f"inside L={L}; use fewer or shorter records")
    rng = room_rng(seed, room)
    tokens = np.array([t for t in range(vocab_size) if t != eot and t != sep])
    draw = draw or (lambda rng, k: (rng.choice(tokens, (k, key_len)), rng.choice(tokens, (k, value_len))))
    examples = []
    for b, (_, lo, hi, limit) in enumerate(buckets):
        for s in starts:
            window = window_tokens(val, s, limit)
            for _ in range(10000):
                ex = _draw_needles(rng, window, draw, lo, hi, limit, needles, queries, key_len, value_len, mid, rec)
                if ex is not None:
                    break
            else:
                raise RuntimeError(f"needles: could not place {needles} records in bucket {lo}-{hi - 1}")
            examples.append(dict(ex, bucket=b, start=s))
    return [bk[:3] for bk in buckets], examples


def _draw_needles(rng, window, draw, lo, hi, limit, k, m, kl, vl, mid, rec):
    """One try at a needle example; None when the draw does not fit (drawn again)."""
    d = rng.integers(lo, hi, size=m)
    q_lo, q_hi = max(k * rec, max(int(d[j]) - j * rec for j in range(m))), limit - m * rec
    if q_lo > q_hi:
        return None
    q = int(rng.integers(q_lo, q_hi + 1))
    pos = [q + j * rec - int(d[j]) for j in range(m)]  # the queried needles; each ends by q (d_j >= (j + 1) rec)
    free = np.ones(q - rec + 1, dtype=bool)  # where a record may start: inside [0, q), overlapping none placed
    for p in pos:
        if not free[p]:
            return None
        free[max(0, p - rec + 1):p + rec] = False
    before = int(rng.integers(0, k - m + 1))  # how many other records precede the asked one: its rank, uniform
    starts = np.arange(len(free))
    for i in range(k - m):
        room = np.flatnonzero(free & ((starts <= pos[0] - rec) if i < before else (starts >= pos[0] + rec)))
        if not len(room):
            return None
        p = int(room[rng.integers(len(room))])
        pos.append(p)
        free[max(0, p - rec + 1):p + rec] = False
    keys, values = draw(rng, k)
    if len({tuple(x) for x in keys.tolist()}) < k:
        return None
    seq = window[:q + m * rec].copy()
    for p, key, value in zip(pos, keys, values):
        seq[p:p + rec] = np.concatenate([key, mid, value])
    where = []
    for j in range(m):
        qj = q + j * rec
        seq[qj:qj + rec] = np.concatenate([keys[j], mid, values[j]])
        where += list(range(qj + rec - vl - 1, qj + rec - 1))
    if any(int((np.lib.stride_tricks.sliding_window_view(seq[:q], kl) == key).all(1).sum()) != 1 for key in keys):
        return None  # a key also in the text (or made across a record's edge): the answer would not be unique
    rank = before + sum(p < pos[0] for p in pos[1:m])  # records before the (first) asked one
    return dict(distance=int(d[0]), depth=pos[0], query=q, seq=seq, where=where, rank=int(rank),
                needles=[dict(pos=p, key=key, value=value, queried=i < m)
                         for i, (p, key, value) in enumerate(zip(pos, keys, values))])


# ----------------------------------------------------------------------------- 3. natural-text recall


def newline_tokens(meta):
    """The ids of the tokens that hold a line break: '\\n' of a char vocabulary; for GPT-2 BPE every token whose
    bytes hold one ('\\n', '\\n\\n', ...; tiktoken when installed, else 198 and 628); for another vocabulary (a
    GGUF's BPE) every token but eot whose text holds one (data.sources.get_tokenizer's decode)."""
    if meta['tokenizer'] == 'char':
        return [i for i, c in enumerate(meta['itos']) if c == '\n']
    if meta['tokenizer'] != 'gpt2':
        decode = get_tokenizer(meta)[1]
        return [i for i in range(meta['vocab_size']) if i != meta['eot_token'] and '\n' in decode([i])]
    try:
        import tiktoken
        enc = tiktoken.get_encoding('gpt2')
        return [i for i in range(enc.n_vocab) if b'\n' in enc.decode_single_token_bytes(i)]
    except Exception:  # tiktoken missing or offline: the two plain line-break tokens
        return [198, 628]


def separator_token(meta, text=':'):
    """The id of a one-token separator for the needles ('key:value'), or None when the vocabulary has no such
    single token (the needles then go without one)."""
    if meta['tokenizer'] == 'char':
        return meta['itos'].index(text) if text in meta['itos'] else None
    if meta['tokenizer'] != 'gpt2':
        ids = get_tokenizer(meta)[0](text)
        return ids[0] if len(ids) == 1 else None
    try:
        import tiktoken
        ids = tiktoken.get_encoding('gpt2').encode_ordinary(text)
        return ids[0] if len(ids) == 1 else None
    except Exception:
        return None


def text_lines(val, newlines, eot, K):
    """Start offsets in val of every line (between line breaks or document ends) of at least K tokens."""
    arr = np.asarray(val)
    breaks = np.flatnonzero(np.isin(arr, list(newlines) + [eot]))
    begin, end = np.concatenate([[0], breaks + 1]), np.concatenate([breaks, [len(arr)]])
    return begin[end - begin >= K]


def recall_examples(val, starts, T, L, K, cue, newlines, eot, seed):
    """Natural-text recall: per window and distance bucket (distance_buckets, span K) a line of the held-out text
    (the first K tokens of a line of at least K tokens between line breaks, drawn from the whole split and never
    one whose tokens already occur in the window's row) at a random depth p (uniform over the depths that fit), and
    again at p + d; the first `cue` tokens of the repeat given, the rest scored; the control has the line only at
    p + d, so the gain (control loss - repeat loss) is what the earlier copy is worth. Returns buckets
    [(label, lo, hi)] and examples [dict(bucket, distance, depth, first, repeat, key, seq, control, where, line)]
    with line = the line's offset in val."""
    if not 0 < cue < K:
        raise ValueError(f"recall test: cue={cue} must be in 1..K-1 (K={K})")
    lines = text_lines(val, newlines, eot, K)
    if not len(lines):
        raise ValueError(f"recall test: the held-out text has no line of {K} tokens or more; use a shorter length")
    buckets = distance_buckets(L, T, K, K)
    check_fit(buckets, f"a line of {K} tokens", L)
    rng = room_rng(seed, 'recall')
    examples = []
    for b, (_, lo, hi, limit) in enumerate(buckets):
        for s in starts:
            window, d = window_tokens(val, s, limit), int(rng.integers(lo, hi))
            for _ in range(1000):
                at = int(lines[rng.integers(len(lines))])
                line = window_tokens(val, at, K)
                if not _contains(window, line):
                    break
            else:
                raise RuntimeError(f"recall test: every line drawn occurs in the window at {s}")
            examples.append(_two_copies(rng, window, line, d, limit, cue, b, dict(start=s, line=at)))
    return [bk[:3] for bk in buckets], examples


# ----------------------------------------------------------------------------- eval.py's rooms together


def make_rooms(val, starts, T, L, meta, seed, cue, examples, depth_len=12, needles=4, key_len=4, value_len=4,
               multi_query=True, recall_len=20, depth_control=False, strict=True, extra=()):
    """The rooms past the passkey, built once for every arm from the windows `starts` (one example per window and
    bucket); a room whose size (depth_len, needles, recall_len) is 0 is left out. The depth passkey goes without
    its control unless depth_control (exact match and loss; half the rows). The needles use ':' as their
    separator when the vocabulary has it as one token (separator_token). Returns (rooms, skipped): rooms =
    {name: dict(buckets, examples, settings)} with name in passkey_depth, needles, needles_mq (two keys asked one
    after the other), recall, and settings the room's entry for summary.json's settings; skipped = {name: reason}
    for the rooms that do not fit (a short L, a cue not below the length): strict=True raises ValueError instead.
    extra: more rooms [(name, build() -> (buckets, examples), knobs)], e.g. lab.measure.ruler.rooms'."""
    V, eot, rooms, skipped = meta['vocab_size'], meta['eot_token'], {}, {}

    def room(name, build, **knobs):
        try:
            made = build()
        except ValueError as e:
            if strict:
                raise
            skipped[name] = str(e)
            return
        rooms[name] = dict(buckets=made[0], examples=made[1],  # a room's knobs may say its own count of examples
                           settings={'examples': examples, 'buckets': [b[0] for b in made[0]], **knobs})
    if depth_len:
        room('passkey_depth', lambda: passkey_depth_examples(val, starts, T, L, depth_len, cue, V, eot, seed,
                                                             control=depth_control),
             len=depth_len, cue=cue, control=depth_control)
    if needles:
        sep = separator_token(meta)
        for name, q in (('needles', 1), ('needles_mq', 2)) if multi_query and needles >= 2 else (('needles', 1),):
            room(name, lambda q=q: needle_examples(val, starts, T, L, V, eot, seed, needles=needles, queries=q,
                                                   key_len=key_len, value_len=value_len, sep=sep),
                 needles=needles, queries=q, key_len=key_len, value_len=value_len, sep=sep)
    if recall_len:
        room('recall', lambda: recall_examples(val, starts, T, L, recall_len, cue, newline_tokens(meta), eot, seed),
             len=recall_len, cue=cue)
    for name, build, knobs in extra:
        room(name, build, **knobs)
    return rooms, skipped
