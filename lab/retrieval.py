"""
The passkey test: can a model retrieve a string it saw d tokens earlier? A random string is written into a held-out
window and again at distance d; the first tokens of the repeat are given (the cue) and the rest are scored, against a
control with no earlier copy. eval.py measures every arm with it; per-example outcomes and intervals come from here.
"""
import numpy as np
import torch

from lab.stats import clustered_wilson, seeds_mean_ci


def passkey_examples(val, starts, ends, T, L, K, pos, vocab_size, eot, seed):
    """The passkey test: in each window a random string of K tokens (never eot) at pos, then the same string again at
    pos + d; and a control with the string only at pos + d (no earlier copy), so that the gain isolates retrieval.
    Distance buckets [K, L), [L, 2L), ... up to the bucket ends (eval.bucket_ends): in [K, L) both copies and the scored tokens lie inside the first L tokens.
    Returns buckets [(label, lo, hi)] and examples [dict(bucket, distance, first, repeat, key, seq, control)]."""
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
                examples.append(dict(bucket=len(buckets), distance=d, first=pos, repeat=pos + d, key=key, seq=seq,
                                     control=control))
            buckets.append((f"{a}-{b - 1}" if lo == 0 else f"{lo}-{hi}", a, b))
        lo = hi
    return buckets, examples


def retrieval_scores(score, buckets, examples, K, cue):
    """Per distance bucket, each example's outcomes: exact (greedy reproduces every token after the cue, given the
    true prefix) and gain = control loss - repeat loss over the scored tokens (same string, same place, no earlier
    copy in the control). score(rows, positions) -> (loss, hit) is eval.score bound to an arm: it scores each token
    as the model generates it (a dynamic arm at the scale it has when emitting that token). Returns per bucket
    dict(bucket, distance_lo, distance_hi, exact [N] bools, gain [N], repeat_loss, control_loss)."""
    out = []
    for b, (label, lo, hi) in enumerate(buckets):
        group = [e for e in examples if e['bucket'] == b]
        rows = torch.from_numpy(np.stack([e['seq'] for e in group] + [e['control'] for e in group]))
        where = [list(range(e['repeat'] + cue - 1, e['repeat'] + K - 1)) for e in group] * 2
        loss, hit = score(rows, where)
        rep, ctl = [float(x.mean()) for x in loss[:len(group)]], [float(x.mean()) for x in loss[len(group):]]
        out.append(dict(bucket=label, distance_lo=lo, distance_hi=hi - 1, exact=[bool(h.all()) for h in hit[:len(group)]],
                        gain=[c - r for c, r in zip(ctl, rep)], repeat_loss=float(np.mean(rep)),
                        control_loss=float(np.mean(ctl))))
    return out


def summarize_retrieval(per_seed):
    """One arm's passkey buckets from its seeds' retrieval_scores: exact match and gain with 95% intervals in which
    the seeds count as repeated looks at the same examples (a 3-seed arm is N examples seen three times, not 3N:
    lab.stats.clustered_wilson / seeds_mean_ci), plus the per-example outcomes [seeds][examples] for paired tests."""
    out = []
    for rows in zip(*per_seed):
        exact = np.array([r['exact'] for r in rows], dtype=np.float64)
        gain = np.array([r['gain'] for r in rows])
        g, g_ci = seeds_mean_ci(gain)
        out.append(dict(bucket=rows[0]['bucket'], distance_lo=rows[0]['distance_lo'],
                        distance_hi=rows[0]['distance_hi'], n=exact.shape[1], seeds=len(rows),
                        exact_match=float(exact.mean()), exact_match_ci=clustered_wilson(exact),
                        repeat_loss=float(np.mean([r['repeat_loss'] for r in rows])),
                        control_loss=float(np.mean([r['control_loss'] for r in rows])), gain=g, gain_ci=g_ci,
                        per_example=dict(exact=exact.astype(int).tolist(),
                                         gain=[[round(float(x), 6) for x in r] for r in gain])))
        if len(rows) > 1:
            out[-1]['exact_match_seed_sd'] = float(np.std(exact.mean(1), ddof=1))
            out[-1]['gain_seed_sd'] = float(np.std(gain.mean(1), ddof=1))
    return out
