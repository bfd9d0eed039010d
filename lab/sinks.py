"""
Learned attention sinks (gpt-oss): one learned logit per head joins every query's scores before the softmax, and its
column is dropped after, so a head may put attention "nowhere" instead of on the first token. A model trained without
one grows a sink of its own on early tokens (StreamingLLM's attention sinks); at the lab's ~12M training tokens it may
not, and a learned one need not emerge from data. Measured beside every arm: the attention its queries past L put on
the first token (summary.json's `first_token_buckets`), the sink strength.

    python train.py config/train_shakespeare_char_copy_cpu.py --attention=smear_keys_sinks --out_dir=out/char-sinks-copy

With the sink: softmax over [q.k_0, ..., q.k_i, z_h] (z_h learned, initialized at 0), i.e. every key's weight is
exp(score) / (sum of exp(scores) + exp(z_h)); the sink's value is zero. The model's attention runs it as SDPA with one
extra all-zero key and value in front and z_h as that key's additive bias (exact). The rooms that compute attention
from scores (crop, position maps, the entropy diagnostic) take the sink through lab.attention.attention_probs.
"""
import torch
import torch.nn.functional as F

from lab.smeared_keys import SmearedKeyAttention
from model import ATTENTION, CausalSelfAttention, allowed


def sinks_class(base):
    """base attention with a learned sink logit per head (self.sink, shape (n_head,))."""

    class Sinks(base):
        def __init__(self, config, spec):
            super().__init__(config, spec)
            self.sink = torch.nn.Parameter(torch.zeros(config.n_head))

        def attend(self, q, k, v, at=None, pos=None):
            n, H = k.size(2), q.size(1)
            i = torch.arange(n - q.size(2), n, device=q.device) if at is None else at[:, None, :]
            ok = allowed(i, n, self.window, self.chunk, pos=pos)  # (pos: a window of PoSE's positions)
            ok = ok if ok.dim() == 4 else ok[None, None]
            bias = torch.zeros(ok.shape, dtype=q.dtype, device=q.device).masked_fill(~ok, float('-inf'))
            bias = bias.expand(ok.size(0), H, -1, -1)
            sink = self.sink.to(q.dtype).view(1, H, 1, 1).expand(ok.size(0), H, ok.size(2), 1)
            zero = lambda x: torch.cat((x.new_zeros(*x.shape[:2], 1, x.size(-1)).expand(x.size(0), -1, -1, -1), x), 2)
            return F.scaled_dot_product_attention(q, zero(k), zero(v), attn_mask=torch.cat((sink, bias), -1),
                                                  dropout_p=self.dropout if self.training else 0.0)
    return Sinks


ATTENTION['sinks'] = sinks_class(CausalSelfAttention)
ATTENTION['smear_keys_sinks'] = sinks_class(SmearedKeyAttention)
