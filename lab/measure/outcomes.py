"""
The retrieval rooms' outcomes (lab/measure/retrieval.py makes the examples): room_scores scores every row of a room with an
arm in one call, sorted by length so that rows of similar length share forwards, and summarize_retrieval turns the
per-bucket outcomes of every seed into intervals (seeds and examples: clustered Wilson, t over seeds x examples) and
the per-example [seeds][examples] lists of the paired tests. score(rows, positions) -> (loss, hit) is
lab.measure.scoring.score bound to an arm; nothing here calls a model itself.
"""
import numpy as np
import torch

from lab.stats import clustered_wilson, seeds_mean_ci


def score_rows(score, rows, positions, preds=False):
    """score(rows, positions) over rows of any lengths, sorted by the length they need (the last scored target + 1)
    so that rows of similar length share forwards, padded to a common width (the padding lies after every scored
    target, so causal attention never sees it). Returns (loss, hit) in the order given, and with preds=True the
    argmax tokens too (score(rows, positions, preds=True))."""
    need = [max(ps) + 2 for ps in positions]
    order = sorted(range(len(rows)), key=lambda i: need[i])
    width = max(need)
    batch = torch.zeros(len(rows), width, dtype=torch.long)
    for j, i in enumerate(order):
        row = torch.as_tensor(np.asarray(rows[i][:need[i]], dtype=np.int64))
        batch[j, :len(row)] = row
    got = score(batch, [list(positions[i]) for i in order], **({'preds': True} if preds else {}))
    out = [[None] * len(rows) for _ in got]
    for j, i in enumerate(order):
        for o, g in zip(out, got):
            o[i] = g[j]
    return tuple(out)


def emitted_record(example, pred):
    """Which record's value the model starts to write after the (first) asked key: the rank (records before it) of
    the record whose first value token is the argmax at the first scored position, the asked record first; -1 when
    it is none of them. A "copy the oldest" strategy shows as 0, "copy the nearest" as needles - 1."""
    order = sorted(range(len(example['needles'])), key=lambda i: example['needles'][i]['pos'])
    ranked = {i: r for r, i in enumerate(order)}
    asked = next(i for i, n in enumerate(example['needles']) if n['queried'])
    for i in [asked] + [i for i in order if i != asked]:
        if int(example['needles'][i]['value'][0]) == int(pred[0]):
            return ranked[i]
    return -1


def emitted_choice(example, pred):
    """Which of an example's choices [(label, first token)] (lab/measure/ruler.py: the answer first, then the values a
    shortcut would copy) the argmax at the first scored position starts to write; 'none' when it is none of them."""
    return next((label for label, tok in example['choices'] if tok == int(pred[0])), 'none')


def room_scores(score, buckets, examples, scored=None):
    """Every example of a room scored in one score_rows call: for each, the tokens after positions e['where'] (the
    scored targets are e['seq'][p + 1]). Per bucket: exact (greedy reproduces every scored token given the true
    prefix), the mean loss over the scored tokens, and where an example has a control row (same tokens, same
    place, no earlier copy), gain = control loss - repeat loss. Returns per bucket dict(bucket, distance_lo,
    distance_hi, exact [N], gain [N] | loss [N], repeat_loss, control_loss | loss_mean, depth [N], distance [N]
    and, for the needles, rank [N] and emitted [N] (emitted_record; a room with choices: emitted_choice)). scored(example) -> bool: the examples to score
    (default all); an example left out has None outcomes and the means are over the scored ones (eval's
    moving_examples)."""
    if not examples:
        return []
    control = 'control' in examples[0]
    keep = [i for i, e in enumerate(examples) if scored is None or scored(e)]
    rows = [examples[i]['seq'] for i in keep] + ([examples[i]['control'] for i in keep] if control else [])
    where = [examples[i]['where'] for i in keep] * (2 if control else 1)
    needles, choices = 'needles' in examples[0], 'choices' in examples[0]
    loss, hit, *pred = score_rows(score, rows, where, preds=needles or choices) if keep else ([], [], [])
    slot, n = {i: j for j, i in enumerate(keep)}, len(keep)
    at = lambda f, i: None if i not in slot else f(slot[i])  # noqa: E731  an outcome, None when not scored
    out = []
    for b, (label, lo, hi) in enumerate(buckets):
        idx = [i for i, e in enumerate(examples) if e['bucket'] == b]
        rep = [at(lambda j: float(loss[j].mean()), i) for i in idx]
        r = dict(bucket=label, distance_lo=lo, distance_hi=hi - 1, exact=[at(lambda j: bool(hit[j].all()), i)
                                                                          for i in idx])
        if control:
            ctl = [at(lambda j: float(loss[n + j].mean()), i) for i in idx]
            r.update(gain=[None if c is None else c - x for c, x in zip(ctl, rep)],
                     repeat_loss=_mean(rep), control_loss=_mean(ctl))
        else:
            r.update(loss=rep, loss_mean=_mean(rep))
        r.update(depth=[int(examples[i]['depth']) for i in idx], distance=[int(examples[i]['distance']) for i in idx])
        if needles:  # how many records precede the asked one, and which record's value the model starts to write
            r.update(rank=[int(examples[i]['rank']) for i in idx],
                     emitted=[at(lambda j: emitted_record(examples[i], pred[0][j]), i) for i in idx])
        elif choices:
            r.update(emitted=[at(lambda j: emitted_choice(examples[i], pred[0][j]), i) for i in idx])
        out.append(r)
    return out


def _mean(values):
    return float(np.mean([v for v in values if v is not None]))


def summarize_retrieval(per_seed):
    """One arm's buckets of a room from its seeds' room_scores (or retrieval_scores): exact match and, with a
    control, the gain, with 95% intervals in which the seeds count as repeated looks at the same examples (a 3-seed
    arm is N examples seen three times, not 3N: lab.stats.clustered_wilson / seeds_mean_ci); without one, the mean
    loss of the scored tokens. per_example holds the outcomes [seeds][examples] for paired tests (exact, and gain or
    loss) and each example's depth and distance [examples] (the same examples for every seed and arm). Examples
    an arm did not score (None, room_scores' scored) stay None there; n and the intervals are of the scored ones."""
    out = []
    for rows in zip(*per_seed):
        mask = np.array([x is not None for x in rows[0]['exact']])
        full = np.array([[np.nan if x is None else x for x in r['exact']] for r in rows], dtype=np.float64)
        exact = full[:, mask]
        e = dict(bucket=rows[0]['bucket'], distance_lo=rows[0]['distance_lo'], distance_hi=rows[0]['distance_hi'],
                 n=exact.shape[1], seeds=len(rows), exact_match=float(exact.mean()),
                 exact_match_ci=clustered_wilson(exact))
        per = dict(exact=[[None if np.isnan(x) else int(x) for x in r] for r in full])
        what = 'gain' if 'gain' in rows[0] else 'loss'
        vals = np.array([[np.nan if x is None else x for x in r[what]] for r in rows], dtype=np.float64)
        m, m_ci = seeds_mean_ci(vals[:, mask])
        if what == 'gain':
            e.update(repeat_loss=float(np.mean([r['repeat_loss'] for r in rows])),
                     control_loss=float(np.mean([r['control_loss'] for r in rows])), gain=m, gain_ci=m_ci)
        else:
            e.update(loss=m, loss_ci=m_ci)
        per[what] = [[None if np.isnan(x) else round(float(x), 6) for x in r] for r in vals]
        if 'depth' in rows[0]:
            per.update(depth=list(rows[0]['depth']), distance=list(rows[0]['distance']))
        if 'rank' in rows[0]:  # the needles: the asked record's rank, and per seed the rank of the record emitted
            per.update(rank=list(rows[0]['rank']), emitted=[list(r['emitted']) for r in rows])
        elif 'emitted' in rows[0]:  # lab/measure/ruler.py's rooms: per seed the choice emitted
            per.update(emitted=[list(r['emitted']) for r in rows])
        e['per_example'] = per
        out.append(e)
        if len(rows) > 1:
            e['exact_match_seed_sd'] = float(np.std(exact.mean(1), ddof=1))
            e[f'{what}_seed_sd'] = float(np.std(vals[:, mask].mean(1), ddof=1))
    return out
