"""
How an arm runs when eval.py scores it, and the measurements beside its loss that run the same way. The form is plain
causal attention, a position map on the arm's RoPE (lab/position_maps.py: ReRoPE, Leaky ReRoPE, Self-Extend), or a
crop to its window (lab/crop.py: masked, or truncated, a fresh forward per position); and over any of them a query
temperature (lab/temperature.py). An arm's own crop (--self_crop) is the arm with a crop, built here by the same code:
the same weights, RoPE, attention class and temperature, only the window added. Beside the loss: the attention
entropy diagnostic (lab/measure/diagnostics.py), the passkey test and the retrieval rooms (lab/measure/retrieval.py).
"""
from types import SimpleNamespace

import numpy as np

from lab.crop import truncated_scores, window_attention, window_logits
from lab.measure.diagnostics import entropy_at, truncated_entropy
from lab.measure.temperature_law import law_measures
from lab.measure.outcomes import room_scores
from lab.position_maps import mapped_attention, mapped_logits
from lab.measure.retrieval import retrieval_scores
from lab.measure.scoring import grid_positions, score
from lab.temperature import tempered, tempered_logits

# eval.py's settings of these measurements (its DEFAULTS include them)
DEFAULTS = dict(
    entropy_windows=4,      # windows for the attention entropy (manual attention, chunked)
    entropy_chunk=256,      # query chunk of that path: memory O(chunk x T)
    grid=16,                # the entropy diagnostic of moving-scale arms: evenly spaced positions per bucket
    temperature='',         # query temperatures also on every fine-tuned arm (more arms): 'qtemp:shape=drope:c=0.2; ...'
    moving_examples=0,      # moving-scale arms (Dynamic NTK/YaRN) score a room's rows past L (each token its own
                            # forward) for the first N retrieval windows only; paired tests use those; 0 = all
)


def arm_form(model, arm, plan, ctx, batch_size):
    """The arm's way of running: attend (None: causal) and logits (for the entropy diagnostic) of its position map
    or crop; scorer(rows, where, preds=False) -> (loss, hit[, argmax tokens]), each token scored as the model runs
    when generating; n0, the first position past which a window is scored only at its sampled positions (the
    truncated crop: past its window)."""
    pm, crop, temp = arm.get('position_map'), arm.get('crop') or {}, arm.get('temperature')
    w, truncated, sink = crop.get('window'), crop.get('form') == 'truncated', crop.get('sink', 0)
    if sink and temp:
        raise ValueError(f"arm {arm['name']!r}: a query temperature counts the keys of a plain window; the sink-kept "
                         f"crop (sink={sink}) has no temperature form here: drop one of them")
    attend = mapped_attention(model, pm) if pm else \
        window_attention(model, w, sink=sink, at=crop.get('at', 'true')) if crop and not truncated else None
    logits = mapped_logits(model, pm) if pm else window_logits(model, w, sink, crop.get('at', 'true')) if crop else None
    crop_seam = crop_logits = None  # the truncated crop's seams, per batch of crops (fn(start), lab/crop.py)
    if temp and truncated:  # the arm's query temperature on each cut input, at the true positions of its tokens
        crop_seam = lambda start: tempered(model, temp, None, arm['L'], start=start)  # noqa: E731
        crop_logits = lambda start: tempered_logits(model, temp, None, arm['L'], start=start)  # noqa: E731
    elif temp:  # over the arm's own attention (a sliding crop: n counts only the keys its window leaves)
        attend, logits = (tempered(model, temp, attend, arm['L'], window=w),
                          tempered_logits(model, temp, logits, arm['L'], window=w))
    if truncated:
        def scorer(rows, where, preds=False):
            return truncated_scores(model, rows, where, w, ctx, batch_size, preds, crop_seam)
    else:
        def scorer(rows, where, preds=False):
            return score(model, rows, where, plan, ctx, batch_size, attend, preds)
    return SimpleNamespace(attend=attend, scorer=scorer, n0=w if truncated else plan[1], window=w, truncated=truncated,
                           logits=logits, crop_logits=crop_logits)


def side_measures(model, form, plan, run, cfg, ctx):
    """Attention entropy and the weight on the first token (the sink strength) per query position (exact below the
    first run's end, then a grid), the passkey outcomes and each retrieval room's, all scored through the arm's form."""
    L, T, B, chunk = run['L'], run['T'], cfg['batch_size'], cfg['entropy_chunk']
    x = run['seqs'][:cfg['entropy_windows'], :T].to(next(model.parameters()).device)
    if form.truncated:
        ent = truncated_entropy(model, x, grid_positions(L, T, form.window, cfg['grid']), form.window, ctx, B, chunk,
                                form.crop_logits)
        sink = np.full(T, np.nan)  # (each crop's first token is another token: not the sink strength)
        sink_heads = np.full((model.config.n_layer, model.config.n_head, T), np.nan)
    else:
        first = plan[0][0][1]
        ent, sink, sink_heads = entropy_at(model, x, grid_positions(L, T, first, cfg['grid']), first, chunk, ctx,
                                           form.logits, heads=True)
    scored = None
    if form.n0 < T and not form.truncated and cfg['moving_examples']:  # a moving scale: each token its own forward
        first = set(run['ret_starts'][:cfg['moving_examples']])
        scored = lambda e: e['start'] in first or max(e['where']) < form.n0  # noqa: E731  (inside L: one forward)
    ret = retrieval_scores(form.scorer, run['buckets'], run['examples'], cfg['retrieval_len'], cfg['retrieval_cue'],
                           scored) if run['examples'] else []
    rooms = {n: room_scores(form.scorer, r['buckets'], r['examples'], scored) for n, r in run['rooms'].items()}
    return dict(ent=ent, sink=sink, sink_heads=sink_heads, ret=ret, rooms=rooms,
                law=law_measures(model, form, plan, run, cfg, ctx))  # None unless --temperature_law
