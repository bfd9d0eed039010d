"""
Attention diagnostics: the entropy of every query's attention distribution, the quantity YaRN's temperature is meant
to hold in place as inputs grow (a longer input spreads attention over more keys; a sharper softmax counters that).
Through the model's `attend` seam: every layer's attention is computed from its score function one chunk of queries
at a time (memory O(chunk x T), so T = 4096 fits on a CPU), and the entropy of each chunk's softmax is recorded.
The truncated crop's entropy (truncated_entropy) is the same measurement over lab/crop.py's crops.
"""
from contextlib import nullcontext

import numpy as np
import torch

from lab.attention import attention_probs, chunked_attention, sink_of, sink_rows
from lab.crop import check_positions, check_window, crop_batches
from model import CausalSelfAttention


@torch.no_grad()
def attention_entropy(model, idx, chunk=256, logits=None, first_key=False, last_only=False):
    """Entropy (nats) of every query's attention distribution: tensor (layers, B, n_head, T), a row per layer that
    attends (a conv layer, lab/conv.py, attends nowhere: no row; n_layer rows for every other model). logits: a score
    function fn(layer, q, k, s, e) (e.g. lab.position_maps.mapped_logits); default: each layer's own (causal, ALiBi).
    first_key: also return the weight each query puts on key 0 (the sink strength; a learned sink's share excluded).
    last_only: only the last query is wanted (a moving-scale position, a truncated crop: one forward per query), the
    other entries NaN; with the layer's own scores each layer then runs its own attention (SDPA) and just that
    query's scores are computed beside it, about a plain forward's cost instead of the chunked softmax over T^2."""
    out, first = [None] * model.config.n_layer, [None] * model.config.n_layer

    def attend(layer, q, k, v):
        attn = model.transformer.h[layer].attn
        score = (lambda s, e: logits(layer, q, k, s, e)) if logits else (lambda s, e: attn.logits(q, k, s, e))
        ent, first[layer] = (torch.full(q.shape[:3], float('nan'), device=q.device) for _ in range(2))
        out[layer], T = ent, q.size(2)

        def recorded(s, e):
            att = score(s, e)
            a = max(s, T - 1) if last_only else s  # the rows recorded
            if a < e:
                p = attention_probs(att[..., a - s:, :], sink_rows(sink_of(model, layer), a, e))
                ent[..., a:e] = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
                first[layer][..., a:e] = p[..., 0]
            return att
        if last_only and logits is None:  # the layer's own attention; the last query's scores beside it
            recorded(T - 1, T)
            return attn.attend(q, k, v)
        return chunked_attention(q, k, v, recorded, chunk, sink=sink_of(model, layer))
    model(idx, attend=attend)
    out, first = [o for o in out if o is not None], [f for f in first if f is not None]  # (the layers that attend)
    return (torch.stack(out), torch.stack(first)) if first_key else torch.stack(out)


@torch.no_grad()
def entropy_at(model, x, positions, n0, chunk, ctx, logits=None, heads=False):
    """Mean attention entropy and weight on the first token (over layers, heads, windows) per query position, each
    query scored as the model runs when generating: positions below n0 from one forward, any later p by a forward of
    p + 1 tokens (lab.measure.scoring.score). -> (entropy [T], first-token weight [T]), NaN where not scored; with
    heads=True also the first-token weight of each layer and head (windows averaged) [layers, n_head, T], which is
    what sinks are counted by (one sink head would hide under the mean)."""
    out, first = np.full(x.size(1), np.nan), np.full(x.size(1), np.nan)
    attending = sum(isinstance(b.attn, CausalSelfAttention) for b in model.transformer.h)  # (not conv layers)
    per_head = np.full((attending, model.config.n_head, x.size(1)), np.nan)
    near = [p for p in positions if p < n0]
    with ctx:
        if near:
            ent, f = attention_entropy(model, x[:, :max(near) + 1], chunk, logits, True)
            out[near] = ent.float().mean(dim=(0, 1, 2)).cpu()[near].numpy()
            first[near] = f.float().mean(dim=(0, 1, 2)).cpu()[near].numpy()
            per_head[..., near] = f.float().mean(dim=1).cpu()[..., near].numpy()
        for p in (p for p in positions if p >= n0):
            ent, f = attention_entropy(model, x[:, :p + 1], chunk, logits, True, last_only=True)
            out[p], first[p] = ent[..., p].float().mean().item(), f[..., p].float().mean().item()
            per_head[..., p] = f[..., p].float().mean(dim=1).cpu().numpy()
    return (out, first, per_head) if heads else (out, first)


@torch.no_grad()
def truncated_entropy(model, x, positions, window, ctx=None, batch_size=8, chunk=256, logits=None):
    """eval's attention-entropy diagnostic (entropy_at) for the truncated crop (lab/crop.py): the mean entropy (over
    layers, heads and rows of x) of query p's attention in the forward over x[:, max(0, p - window + 1) : p + 1]
    (its last query). logits: None, or fn(start) -> the score function for crops starting at positions start (B,)
    (as lab.crop.truncated_scores' attend). x: LongTensor [B, T]. Returns a float array [T], NaN where not asked."""
    window = check_window(window)
    ctx = nullcontext() if ctx is None else ctx
    check_positions([positions], 1, x.size(1), "a query position of x")
    out = np.full(x.size(1), np.nan)
    items = [(j, r, int(p)) for j, p in enumerate(positions) for r in range(x.size(0))]  # every row at each p
    sums = {}
    for part, crops in crop_batches(x, items, window, batch_size, extra=0):
        crops = crops.to(next(model.parameters()).device)
        score = None if logits is None else \
            logits(torch.tensor([p for _, _, p in part], device=crops.device) - (crops.size(1) - 1))
        with ctx:
            ent = attention_entropy(model, crops, chunk, score, last_only=True)[..., -1]  # (layers, N, H)
        per = ent.float().mean(dim=(0, 2)).cpu().numpy()
        for (_, _, p), e in zip(part, per):
            sums.setdefault(p, []).append(float(e))
    for p, es in sums.items():
        out[p] = np.mean(es)
    return out
