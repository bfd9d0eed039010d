"""
Attention a query chunk at a time, for the rooms that need the scores themselves (ALiBi, the crop, position maps,
attention entropy): memory O(chunk x T) instead of O(T^2).
"""
import torch
import torch.nn.functional as F


def attention_probs(att, sink=None):
    """softmax over the keys of scores att (..., H, Q, K); with a learned sink (lab/sinks.py: one logit per head,
    shape (H,)) the softmax runs over [scores, sink] and the sink's column is dropped (rows then sum to < 1)."""
    if sink is None:
        return F.softmax(att, dim=-1)
    z = sink.float().view(-1, 1, 1).expand(*att.shape[:-1], 1)
    return F.softmax(torch.cat((att, z), -1), dim=-1)[..., :-1]


def chunked_attention(q, k, v, logits, chunk=256, dropout=0.0, sink=None):
    """softmax(logits(s, e)) @ v for queries s..e-1 over keys 0..e-1, one chunk of queries at a time.
    logits(s, e) returns float32 scores, already scaled, -inf where j > i. sink: a layer's learned sink logits."""
    ys = []
    for s in range(0, q.size(2), chunk):
        e = min(s + chunk, q.size(2))
        p = F.dropout(attention_probs(logits(s, e), sink), dropout, dropout > 0)
        ys.append(p.to(v.dtype) @ v[:, :, :e])
    return torch.cat(ys, dim=2)


def sink_of(model, layer):
    """The layer's learned sink logits (lab/sinks.py), or None."""
    return getattr(model.transformer.h[layer].attn, 'sink', None)
