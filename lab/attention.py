"""
Attention a query chunk at a time, for the rooms that need the scores themselves (ALiBi, attention entropy): memory
O(chunk x T) instead of O(T^2); and masked attention fused (banded_attention: the crop, windows and chunks; merge_lse:
the position maps' two tables), one block of queries at a time over the keys it can see.
"""
import math

import torch
import torch.nn.functional as F


def attention_probs(att, sink=None):
    """softmax over the keys of scores att (..., H, Q, K); with a learned sink (lab/sinks.py: one logit per head,
    shape (H,); lab/inkling.py: one per query, (..., H, Q), the rows of att) the softmax runs over [scores, sink] and
    the sink's column is dropped (rows then sum to < 1)."""
    if sink is None:
        return F.softmax(att, dim=-1)
    z = (sink.float().view(-1, 1, 1) if sink.dim() == 1 else sink.float()[..., None]).expand(*att.shape[:-1], 1)
    return F.softmax(torch.cat((att, z), -1), dim=-1)[..., :-1]


def sink_rows(sink, s, e):
    """The sink logits of queries s..e-1: a per-head sink (H,) as it is, a per-query one (..., H, T) cut to them."""
    return sink if sink is None or sink.dim() == 1 else sink[..., s:e]


def chunked_attention(q, k, v, logits, chunk=256, dropout=0.0, sink=None):
    """softmax(logits(s, e)) @ v for queries s..e-1 over keys 0..e-1, one chunk of queries at a time.
    logits(s, e) returns float32 scores, already scaled, -inf where j > i. sink: a layer's learned sink logits (per
    head, or per query: every query's, cut to the chunk's)."""
    ys = []
    for s in range(0, q.size(2), chunk):
        e = min(s + chunk, q.size(2))
        p = F.dropout(attention_probs(logits(s, e), sink_rows(sink, s, e)), dropout, dropout > 0)
        ys.append(p.to(v.dtype) @ v[:, :, :e])
    return torch.cat(ys, dim=2)


def sink_of(model, layer):
    """The layer's learned sink logits (lab/sinks.py), or None."""
    return getattr(model.transformer.h[layer].attn, 'sink', None)


# ----------------------------------------------------------------------------- masked attention, fused


def visible(i, j, window=None, sink=0, chunk=None):
    """Which keys j (positions, (K,)) the queries i ((Q,)) see, (Q, K) bool: j <= i; with a window only i - j < window,
    and the first `sink` keys of the input beside it (StreamingLLM's sink + window); with a chunk only keys of the
    query's own chunk (i // chunk == j // chunk). The model's own `allowed` is this with sink = 0."""
    i, j = i[:, None], j[None, :]
    ok = j <= i
    if window:
        ok = ok & ((j > i - window) | (j < sink))
    return ok & (j // chunk == i // chunk) if chunk else ok


def key_parts(s, e, window=None, sink=0, chunk=None):
    """The keys a block of queries s..e-1 (inside one chunk) can see, in two parts: `full`, the range [a, s + 1) that
    every query of the block sees (no mask needed), and `edges`, the index ranges that some of them see (the sink
    keys left of the band, the band's first keys before a, and the block's own causal triangle s + 1..e-1). Every
    other key is masked for every query of the block, so it is never visited."""
    lo = max(0, s - window + 1) if window else 0
    if chunk:
        lo = max(lo, (s // chunk) * chunk)
    a = max(lo, e - window) if window else lo  # keys from a on are within the window of the block's last query
    full = (a, s + 1) if a < s + 1 else None
    m = min(sink, lo) if window and (not chunk or s < chunk) else 0  # (sink keys lie in the first chunk)
    edges = [(0, m), (lo, a if full else s + 1), (s + 1, e)]
    return full, [(x, y) for x, y in edges if y > x]


def attention_lse(q, k, v, mask=None, scale=None):
    """(softmax(q k^T * scale + mask) v, log-sum-exp of each query's scores): the fused CPU flash kernel returns both;
    elsewhere the scores are formed for this block (the caller keeps blocks small). mask: (Q, K) bool or None. A
    query that sees no key gets output 0 and log-sum-exp -inf (merge_lse then weights it 0)."""
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    if mask is not None and not bool(mask.all()):
        seen = mask.any(-1)
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(~mask, float('-inf'))
        bias[~seen] = 0.0  # (a row with no key: computed over all, then zeroed below)
    else:
        seen, bias = None, None
    if q.device.type == 'cpu' and q.dtype in (torch.float32, torch.float64, torch.bfloat16):
        y, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, False, attn_mask=bias,
                                                                            scale=scale)
    else:
        att = (q @ k.transpose(-2, -1)).float() * scale
        att = att if bias is None else att + bias.float()
        lse = torch.logsumexp(att, -1)
        y = (torch.softmax(att, -1).to(v.dtype) @ v)
    if seen is not None and not bool(seen.all()):
        y = y.masked_fill(~seen[:, None], 0.0)
        lse = lse.masked_fill(~seen, float('-inf'))
    return y, lse.float()


def causal_lse(q, k, v, scale=None):
    """Causal attention and each query's log-sum-exp (the fused CPU kernel returns both; elsewhere blocks)."""
    if q.device.type == 'cpu' and q.dtype in (torch.float32, torch.float64, torch.bfloat16):
        y, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=scale)
        return y, lse.float()
    return banded_attention(q, k, v, chunk=q.size(2), scale=scale, lse=True)


def merge_lse(parts):
    """Softmax attention over the union of disjoint key sets from each set's own (output, log-sum-exp): weights
    exp(lse_k - max) normalised (exact: a softmax over all keys is this mix of the softmaxes over each part)."""
    top = torch.stack([lse for _, lse in parts]).amax(0)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    w = [torch.exp(lse - top) for _, lse in parts]
    total = sum(w)
    y = sum(wi[..., None].to(y.dtype) * y for wi, (y, _) in zip(w, parts)) / total[..., None].to(parts[0][0].dtype)
    return y, top + torch.log(total)


def banded_attention(q, k, v, window=None, sink=0, chunk=None, block=512, scale=None, lse=False):
    """Causal attention in which query i sees keys i - window < j <= i, the first `sink` keys of the input, and (chunk)
    only its own chunk's keys, fused: the queries before the window's length in one causal call, then one block of
    queries at a time over the keys it can see, split in two calls merged by their log-sum-exp (merge_lse): the
    keys every query of the block sees, unmasked, and the few at its edges with a (block x edges) mask. No T x T
    tensor, no key that no query of the block sees is visited: a window of W costs about T x W scores where causal
    costs T^2/2, at about the causal kernel's speed. q, k, v: (B, H, T, d), queries and keys at positions 0..T-1.
    Returns y (and each query's log-sum-exp with lse=True)."""
    T = q.size(2)
    if not window and not chunk and not lse:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    ys, ls = [], []
    s = 0 if chunk else min(T, window or T)  # queries before the window's length see every key before them: causal
    if s:
        y, l = causal_lse(q[:, :, :s], k[:, :, :s], v[:, :, :s], scale)
        ys.append(y)
        ls.append(l)
    while s < T:
        e = min(s + block, T, ((s // chunk) + 1) * chunk if chunk else T)
        full, edges = key_parts(s, e, window, sink, chunk)
        qb, parts = q[:, :, s:e], []
        if full:
            parts.append(attention_lse(qb, k[:, :, full[0]:full[1]], v[:, :, full[0]:full[1]], None, scale))
        if edges:
            idx = torch.cat([torch.arange(a, b, device=q.device) for a, b in edges])
            mask = visible(torch.arange(s, e, device=q.device), idx, window, sink, chunk)
            parts.append(attention_lse(qb, k[:, :, idx], v[:, :, idx], mask, scale))
        part = merge_lse(parts) if len(parts) > 1 else parts[0]
        ys.append(part[0])
        ls.append(part[1])
        s = e
    y = torch.cat(ys, 2)
    return (y, torch.cat(ls, -1)) if lse else y
