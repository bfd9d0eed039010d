"""
Attention a query chunk at a time, for the rooms that need the scores themselves (ALiBi, the crop, position maps,
attention entropy): memory O(chunk x T) instead of O(T^2).
"""
import torch
import torch.nn.functional as F


def chunked_attention(q, k, v, logits, chunk=256, dropout=0.0):
    """softmax(logits(s, e)) @ v for queries s..e-1 over keys 0..e-1, one chunk of queries at a time.
    logits(s, e) returns float32 scores, already scaled, -inf where j > i."""
    ys = []
    for s in range(0, q.size(2), chunk):
        e = min(s + chunk, q.size(2))
        p = F.dropout(F.softmax(logits(s, e), dim=-1), dropout, dropout > 0)
        ys.append(p.to(v.dtype) @ v[:, :, :e])
    return torch.cat(ys, dim=2)
