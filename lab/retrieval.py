"""
The passkey test: can a model retrieve a string it saw d tokens earlier? A random string is written into a held-out
window and again at distance d; the first tokens of the repeat are given (the cue) and the rest are scored, against a
control with no earlier copy. eval.py measures every arm with it; per-example outcomes and intervals come from here.
"""
import numpy as np
import torch

from lab.stats import mean_ci, wilson


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


@torch.no_grad()
def retrieval_scores(model, buckets, examples, K, cue, n0, ctx, device, batch_size, attend=None):
    """Per distance bucket: exact match (greedy reproduces every token after the cue, given the true prefix) with its
    Wilson interval, the repeat loss, the control loss (same string, same place, no earlier copy) and the gain
    control - repeat with its t-interval over examples. Examples that end below n0 share forwards; past it (a dynamic
    arm) each example gets one forward ending at its last scored token, i.e. the scale it has when emitting it."""
    out = []
    for b, (label, lo, hi) in enumerate(buckets):
        group = [e for e in examples if e['bucket'] == b]
        near = [e for e in group if e['repeat'] + K - 1 <= n0]
        chunks = [near[i:i + batch_size] for i in range(0, len(near), batch_size)] + \
            [[e] for e in group if e['repeat'] + K - 1 > n0]
        rep, ctl, exact = [], [], []
        for chunk in chunks:
            n = max(e['repeat'] + K - 1 for e in chunk)  # token k of the repeat is the target at repeat + k - 1
            seq = torch.from_numpy(np.stack([e['seq'][:n + 1] for e in chunk] + [e['control'][:n + 1] for e in chunk]))
            seq = seq.to(device)
            with ctx:
                logits, loss = model(seq[:, :-1], seq[:, 1:], reduction='none', attend=attend)
            for j, e in enumerate(chunk):
                r = slice(e['repeat'] + cue - 1, e['repeat'] + K - 1)
                rep.append(loss[j, r].float().mean().item())
                ctl.append(loss[j + len(chunk), r].float().mean().item())
                exact.append(bool((logits[j, r].argmax(-1) == seq[j, r.start + 1:r.stop + 1]).all()))
        gain, gain_ci = mean_ci(np.array(ctl) - np.array(rep))
        out.append(dict(bucket=label, distance_lo=lo, distance_hi=hi - 1, n=len(rep), exact_match=float(np.mean(exact)),
                        exact_match_ci=wilson(sum(exact), len(exact)), repeat_loss=float(np.mean(rep)),
                        control_loss=float(np.mean(ctl)), gain=gain, gain_ci=gain_ci))
    return out


def average_retrieval(rets):
    """Retrieval entries of several seeds of one arm: means, with the sd across seeds of exact match and gain."""
    out = []
    for rows in zip(*rets):
        r = dict(rows[0])
        for k in ('exact_match', 'repeat_loss', 'control_loss', 'gain'):
            r[k] = float(np.mean([x[k] for x in rows]))
        r['exact_match_seed_sd'] = float(np.std([x['exact_match'] for x in rows], ddof=1))
        r['gain_seed_sd'] = float(np.std([x['gain'] for x in rows], ddof=1))
        n = sum(x['n'] for x in rows)
        r['n'], r['exact_match_ci'] = n, wilson(round(r['exact_match'] * n), n)
        out.append(r)
    return out
