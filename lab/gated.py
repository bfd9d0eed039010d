"""
Gated attention (Qiu et al., "Gated Attention for Large Language Models: Non-linearity, Sparsity, and
Attention-Sink-Free", NeurIPS 2025; Qwen3-Next): the paper's best variant, G1, gates the output of scaled-dot-product
attention elementwise, per head and per channel, by a sigmoid of the layer's own input, before the output projection:

    y_h = softmax(q_h k_h^T / sqrt(d)) v_h                     (the layer's attention, whatever a room makes it)
    o   = c_proj( concat_h(y_h) * sigmoid(X W_g + b_g) )       X: the normed hidden state q, k, v come from (ln_1(x))

W_g is n_embd x n_embd (c_gate; b_g only with config.bias): channel h*head_dim + c of the gate scales channel c of
head h. The gate adds a non-linearity between v and c_proj (the two are otherwise one low-rank linear map) and lets a
head output ~0 for a query without parking its attention on the first token, the sink a softmax must put somewhere.

    python train.py config/train_shakespeare_char_cpu.py --attention=gated --out_dir=out/char-gated

Init: c_gate is a Linear like every other, so GPT's init gives it N(0, 0.02) weights and a zero bias: the gate
starts at sigmoid(z), z ~ N(0, 0.02^2 n_embd) (0.5 +- 0.06 at n_embd = 128): half open, not open. Chosen on purpose,
as Qwen3-Next does (its gate is a second half of q_proj's rows, initialised with them): 0.5 is where the sigmoid's
slope is largest (1/4), so the gate learns fastest there, and the paper finds that it learns to close (sparse,
query-dependent gate scores); a gate started near 1 (a +4 bias: 0.98) sits where the slope is ~0.02, and without a
bias (config.bias=False, the default) no weight setting opens it at all. At init the layer is plain attention with
c_proj about halved, a factor c_proj can absorb.

Composition: the gate multiplies whatever the attend seam returns (a crop, a position map, a query temperature, the
KV cache's attention), so this class composes with every room that goes through it; it cannot stack on another
attention class (SSMax, sinks, ALiBi: one class per layer, lab/measure/combine.py). GPT._last_layer_at asks the
layer's own attend for the queries at positions `at` only; attend notes them, and the gate takes the same rows of X.
"""
import torch
import torch.nn as nn

from lab.smeared_keys import SmearedKeyAttention
from model import ATTENTION, CausalSelfAttention


def gated_class(base):
    """base attention (causal, or the copy mix's smeared keys) with its output gated per head and channel by
    sigmoid(c_gate(X)) before c_proj (G1)."""

    class Gated(base):
        cache_exact = True  # its attention is base's: lab/kv_cache.py's own attention is exact for it

        def __init__(self, config, spec):
            super().__init__(config, spec)
            self.c_gate = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self._rows = None  # the query positions (B, K) the last attend answered, when only some were asked

        def gate(self, x):
            """sigmoid(X W_g + b_g) of hidden states x (B, T, C): one factor per head and channel, in (0, 1)."""
            return torch.sigmoid(self.c_gate(x))

        def attend(self, q, k, v, at=None, pos=None):
            self._rows = at  # (GPT._last_layer_at: q holds just the queries at `at`; the gate must take their rows)
            return super().attend(q, k, v, at, pos=pos)  # (pos: a window of PoSE's positions, model.allowed)

        def forward(self, x, rope, attend=None):
            B, T, C = x.size()
            self._rows = None
            q, k, v = self.qkv(x, rope)
            y = self.attend(q, k, v) if attend is None else attend(q, k, v)  # any room's attention; maybe fewer queries
            y = y.transpose(1, 2).contiguous().view(B, -1, C)
            rows, self._rows = self._rows, None
            if rows is not None:
                x = x.gather(1, rows[..., None].expand(-1, -1, C))
            elif y.size(1) != T:
                raise ValueError(f"attend returned {y.size(1)} queries for {T} tokens and did not say which; a "
                                 f"gated layer gates each query by its own token (return every query, or go "
                                 f"through attend's at)")
            return self.resid_dropout(self.c_proj(y * self.gate(x)))
    return Gated


GatedAttention = gated_class(CausalSelfAttention)
ATTENTION['gated'] = GatedAttention
ATTENTION['smear_keys_gated'] = gated_class(SmearedKeyAttention)  # the copy mix's bases (lab/copy_mix.py)
