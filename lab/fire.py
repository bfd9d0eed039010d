"""
FIRE (Li et al., "Functional Interpolation for Relative Positions Improves Long Context Transformers", ICLR 2024): no
rotation; every head's scores get a learned bias of the query's position i and the key's j (0-based),

    b_h(i, j) = f_θ( ψ(i - j) / ψ(max(L_thr, i)) )_h   for j <= i,    ψ(x) = log(c·x + 1),  c > 0

f_θ a small MLP (1 -> 32 ReLU units -> one output per head), c and the threshold L_thr learned. Progressive
interpolation: ψ increases and i - j <= i, so the argument lies in [0, 1] at every position; a query past L_thr divides
by its own ψ(i), so distances past the training length are squeezed into the range training filled (on a finer and
finer grid) instead of running off it, which is how FIRE extrapolates. Below L_thr the normaliser is the constant
ψ(L_thr) and the bias a function of i - j alone (the paper's "thresholding the normalizer for better short sequence
modeling"). ψ's log spends the argument's resolution on near keys. FIRE contains T5's relative bias, ALiBi and Kerple
(the paper's theorems); ALiBi is lab/alibi.py.

    python train.py config/train_shakespeare_char_cpu.py --pos_emb=fire --out_dir=out/char-fire

The parameterisation, per layer (the paper's FIRE; its FIRE-S shares one module across the layers): the paper's
formula with the settings of the public PyTorch re-implementation in ReaLLMASIC/nanoGPT
(variations/position_encoding_variations.py, class FIRE: fire_mlp_width=32, fire_init_c=0.1, fire_init_L=512, a
learned L_multiplier on a fixed init_L, eps=1e-6; the FireSelfAttention of torchtune's PR 2388 takes other values,
which it calls arbitrary, and GELU):
  * f_θ: Linear(1, 32), ReLU, Linear(32, n_head), in PyTorch's default Linear init (U(±1/sqrt(fan_in)), weights and
    biases), which GPT's N(0, 0.02) init does not reach (plain parameters here): 32 ReLU kinks spread over the
    argument, where N(0, 0.02) weights with zero biases would start f_θ as one straight line in x.
  * ψ(x) = log(|c|·x + 1), c learned from 0.1 (|c| keeps it positive, as that code's abs); the normaliser gets
    + 1e-6 (its eps: c -> 0 never divides 0 by 0).
  * L_thr = |m|·L0, the multiplier m learned from 1 and L0 fixed (a persistent buffer: the checkpoint holds the
    threshold it trained). That code's 512 is a quarter of the paper's training length, 2048; here L0 = block_size/4,
    the same share, so that progressive interpolation is on past L from the start (an absolute 512 would switch it
    off up to 512 at the lab's L = 128 or 256).
The bias is computed in float32 with autocast off: past L_thr neighbouring arguments differ by ~1/(i·ψ(i)), which
bfloat16's 8 bits would merge.

Registered as the attention of pos_emb='fire' models (model.GPTConfig.attention_class, like ALiBi's): its scores go
through the chunked path (the bias is a float mask), `logits` and `attend(at=)` build the same bias, and the KV cache
(lab/kv_cache.py) runs `attend` with the new queries' positions (cache_at), exact. What FIRE shares with ALiBi: no RoPE
to scale, map or pattern, one attention class per layer, no position ids (forward's pos=); what it does not: its bias
reads the query's absolute position through max(L_thr, i), so the two crops differ on one layer (lab/crop.py).
"""
import math

import torch
import torch.nn as nn

from lab.attention import chunked_attention
from model import ATTENTION, CausalSelfAttention

WIDTH = 32          # f_θ's hidden units (mlp_width)
INIT_C = 0.1        # ψ's c at init (init_c)
THRESHOLD = 0.25    # L0 = THRESHOLD * block_size: init_L = 512 at the paper's training length 2048
EPS = 1e-6          # added to the normaliser (eps)


def fire_argument(i, k_len, c, threshold, eps=EPS):
    """f_θ's input ψ(i - j) / (ψ(max(L_thr, i)) + eps), ψ(x) = log(|c|·x + 1), for queries at positions i (an int
    tensor of any shape) against keys 0..k_len-1: float32 of shape i.shape + (k_len,), in [0, 1] where j <= i (0 where
    j > i, which fire_bias masks). c, threshold: 0-d tensors (L_thr = threshold)."""
    i = i.float()[..., None]
    j = torch.arange(k_len, device=i.device, dtype=torch.float32)
    c = c.float().abs()
    return torch.log1p(c * (i - j).clamp(min=0)) / (torch.log1p(c * torch.maximum(i, threshold.float())) + eps)


def fire_bias(i, k_len, c, threshold, w1, b1, w2, b2):
    """FIRE's float mask of queries at positions i against keys 0..k_len-1: b_h(i, j) = f_θ(x)_h, f_θ(x) =
    w2·relu(w1·x + b1) + b2 of x = fire_argument(i, j) for j <= i, -inf for j > i. w1 (W, 1), b1 (W,), w2 (H, W), b2
    (H,). Shape (*i.shape[:-1], H, Q, k_len) for i (*, Q), float32: (H, Q, K) for positions (Q,), broadcasting over the
    batch; (B, H, K, T) for at= positions (B, K)."""
    x = fire_argument(i, k_len, c, threshold)
    with torch.autocast(x.device.type, enabled=False):  # float32 even under bfloat16 autocast (see the docstring)
        out = torch.relu(x[..., None] * w1.float()[:, 0] + b1.float()) @ w2.float().t() + b2.float()  # (*, Q, K, H)
    future = (torch.arange(k_len, device=x.device) > i[..., None])[..., None, :, :]  # j > i, (*, 1, Q, K)
    return out.movedim(-1, -3).masked_fill(future, float('-inf'))


class FIREAttention(CausalSelfAttention):
    cache_at = True  # attend(q, k, v, at) is exact for queries at any positions `at` over all keys (lab/kv_cache.py)

    def __init__(self, config, spec):
        super().__init__(config, spec)
        H = config.n_head
        self.fire_w1, self.fire_b1 = nn.Parameter(torch.empty(WIDTH, 1)), nn.Parameter(torch.empty(WIDTH))
        self.fire_w2, self.fire_b2 = nn.Parameter(torch.empty(H, WIDTH)), nn.Parameter(torch.empty(H))
        for p, fan_in in ((self.fire_w1, 1), (self.fire_b1, 1), (self.fire_w2, WIDTH), (self.fire_b2, WIDTH)):
            nn.init.uniform_(p, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))  # nn.Linear's default init
        self.fire_c = nn.Parameter(torch.tensor(INIT_C))
        self.fire_m = nn.Parameter(torch.tensor(1.0))  # L_thr = |m|·L0
        self.register_buffer('fire_L0', torch.tensor(THRESHOLD * config.block_size))

    def threshold(self):
        """L_thr = |m|·L0, a 0-d tensor."""
        return self.fire_m.abs() * self.fire_L0

    def bias(self, i, k_len):
        """fire_bias with this layer's parameters: (H, Q, k_len) for positions i (Q,), (B, H, K, k_len) for (B, K)."""
        mlp = (self.fire_w1, self.fire_b1, self.fire_w2, self.fire_b2)
        return fire_bias(i, k_len, self.fire_c, self.threshold(), *mlp)

    def logits(self, q, k, s, e):
        return super().logits(q, k, s, e) + self.bias(torch.arange(s, e, device=q.device), e)

    def attend(self, q, k, v, at=None):
        if at is not None:  # q holds only the queries at positions at (B, K) (model.forward's at=, the KV cache)
            att = (q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1)) + self.bias(at, k.size(2))
            return torch.softmax(att, dim=-1).to(v.dtype) @ v
        p = self.dropout if self.training else 0.0
        return chunked_attention(q, k, v, lambda s, e: self.logits(q, k, s, e), dropout=p)


ATTENTION['fire'] = FIREAttention
