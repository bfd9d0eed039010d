"""
ALiBi (Press et al. 2022), the relative-bias baseline: no rotation, each head's scores get -m_h * (i - j). Registered
as the attention of pos_emb='alibi' models; its scores go through the chunked path (the bias is a float mask).
"""
import math

import torch

from lab.attention import chunked_attention
from model import ATTENTION, CausalSelfAttention


def alibi_slopes(n_head):
    """m_h = 2^(-8h/H), h = 1..H, for H a power of two; else the P = 2^floor(log2 H) slopes, then every other slope
    of 2P heads (the paper's code)."""
    geometric = lambda n: [2.0 ** (-8 * h / n) for h in range(1, n + 1)]  # noqa: E731
    p = 2 ** int(math.floor(math.log2(n_head)))
    return torch.tensor(geometric(p) + geometric(2 * p)[0::2][:n_head - p])


def alibi_bias(slopes, q_start, q_end, k_len):
    """ALiBi's float mask of queries q_start..q_end-1 against keys 0..k_len-1: -m_h * (i - j) for j <= i, -inf for
    j > i. Shape (H, q_end - q_start, k_len), float32; it broadcasts over the batch."""
    i = torch.arange(q_start, q_end, device=slopes.device)[:, None]
    j = torch.arange(k_len, device=slopes.device)[None, :]
    return (-slopes.float()[:, None, None] * (i - j)).masked_fill(j > i, float('-inf'))


class ALiBiAttention(CausalSelfAttention):
    def __init__(self, config, spec):
        super().__init__(config, spec)
        self.register_buffer('alibi_slopes', alibi_slopes(config.n_head), persistent=False)

    def logits(self, q, k, s, e):
        return super().logits(q, k, s, e) + alibi_bias(self.alibi_slopes, s, e, e)

    def attend(self, q, k, v, at=None):
        if at is not None:  # q holds only the queries at positions at (B, K) (model.forward's at=)
            rel = at[:, None, :, None] - torch.arange(k.size(2), device=k.device)  # i - j, (B, 1, K, T)
            att = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1)) - self.alibi_slopes.float()[:, None, None] * rel
            return torch.softmax(att.masked_fill(rel < 0, float('-inf')), dim=-1).to(v.dtype) @ v
        p = self.dropout if self.training else 0.0
        return chunked_attention(q, k, v, lambda s, e: self.logits(q, k, s, e), dropout=p)


ATTENTION['alibi'] = ALiBiAttention
