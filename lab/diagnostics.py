"""
Attention diagnostics: the entropy of every query's attention distribution, the quantity YaRN's temperature is meant
to hold in place as inputs grow (a longer input spreads attention over more keys; a sharper softmax counters that).
Through the model's `attend` seam: every layer's attention is computed from its score function one chunk of queries
at a time (memory O(chunk x T), so T = 4096 fits on a CPU), and the entropy of each chunk's softmax is recorded.
"""
import numpy as np
import torch

from lab.attention import chunked_attention


@torch.no_grad()
def attention_entropy(model, idx, chunk=256, logits=None):
    """Entropy (nats) of every query's attention distribution: tensor (n_layer, B, n_head, T). logits: a score
    function fn(layer, q, k, s, e) (e.g. lab.position_maps.mapped_logits); default: each layer's own (causal, ALiBi)."""
    out = [None] * model.config.n_layer

    def attend(layer, q, k, v):
        score = (lambda s, e: logits(layer, q, k, s, e)) if logits else \
            (lambda s, e: model.transformer.h[layer].attn.logits(q, k, s, e))
        ent = torch.empty(q.shape[:3], device=q.device)

        def recorded(s, e):
            att = score(s, e)
            p = torch.softmax(att, dim=-1)
            ent[..., s:e] = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
            return att
        out[layer] = ent
        return chunked_attention(q, k, v, recorded, chunk)
    model(idx, attend=attend)
    return torch.stack(out)


@torch.no_grad()
def entropy_at(model, x, positions, n0, chunk, ctx, logits=None):
    """Mean attention entropy (over layers, heads, windows) per query position, each query scored as the model runs
    when generating: positions below n0 from one forward, any later p by a forward of p + 1 tokens (lab.scoring.score)."""
    out = np.full(x.size(1), np.nan)
    near = [p for p in positions if p < n0]
    with ctx:
        if near:
            ent = attention_entropy(model, x[:, :max(near) + 1], chunk, logits).float().mean(dim=(0, 1, 2)).cpu()
            out[near] = ent[near].numpy()
        for p in (p for p in positions if p >= n0):
            out[p] = attention_entropy(model, x[:, :p + 1], chunk, logits)[..., p].float().mean().item()
    return out
