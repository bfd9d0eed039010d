"""
A short causal convolution in place of attention (Liquid AI's LFM2 and LFM3), a layer kind: layers='conv,...'. Most
of those models' layers mix tokens by a gated depthwise convolution over the last k tokens, a few by attention with
RoPE; the convolution is the local position source: it knows where a token sits only by which tokens sit next to it.
No position id, no RoPE, no mask reaches it.

The block, per token t of x_0..x_{T-1} (rows of n_embd; * elementwise, each channel c its own k taps w_c):

    [B_t; C_t; h_t] = W_in x_t                                 in_proj: three blocks of n_embd rows, in that order
    u_t = B_t * h_t                                            the input gate
    z_t = sum_{j=0}^{k-1} w_{c, j} u_{t-k+1+j}                 the depthwise causal convolution, u_s = 0 for s < 0
    y_t = W_out (C_t * z_t)                                    the output gate, then out_proj (c_proj here)

(biases on the three maps with config.bias, as LFM's conv_bias). Read in transformers 5 (installed, models/):
  lfm2/modeling_lfm2.py    Lfm2ShortConv (l. 371-415): BCx = in_proj(x).transpose(-1, -2); B, C, x = BCx.chunk(3,
                           dim=-2); B * x; conv; C * conv; out_proj. Its conv is nn.Conv1d(hidden, hidden,
                           kernel_size=L_cache, groups=hidden, padding=L_cache - 1) (l. 383-390) cut to the first T
                           outputs (causal_conv1d_fn, l. 294-313): a depthwise conv whose tap j meets u_{t-k+1+j}.
                           Lfm2DecoderLayer (l. 418-431): the conv where layer_types says 'conv', else attention.
  lfm2/configuration_lfm2.py  conv_L_cache = 3 (l. 74); layer_types (l. 82-88): 'full_attention' at full_attn_idxs,
                           else 'conv'.
  lfm3/modeling_lfm3.py    Lfm3ShortConv (l. 397-441), the same block (conv_L_cache = 7, configuration_lfm3.py l. 73);
                           Lfm3Attention (l. 208-284): a sliding window only in 'sliding_attention' layers (l. 236),
                           a sigmoid gate per head on its output (l. 280-281, not built here); Lfm3RotaryEmbedding
                           (l. 72-83): a RoPE table per attention type, none for 'conv'.
  lfm3/configuration_lfm3.py  layer_types (l. 94-98): layer i is 'full_attention' if i % 4 == 2, 'sliding_attention'
                           if i % 4 == 0 and i > 0, else 'conv' (24 layers: 13 conv, 5 sliding, 6 full);
                           sliding_window = 256 (l. 78); rope_parameters (l. 85-93): sliding layers 'default' at
                           theta 1e4, full layers 'proportional' at theta 1e6 with partial_rotary_factor 0.5 (p-RoPE:
                           pairs i < p d/2 turn at theta^(-2i/d), the rest not at all: rope.proportional_inv_freq).

In this lab: 'conv' in the layer pattern (rope_config.parse_layers), kernel k = 3 (LFM2's L_cache) unless 'conv:k=7';
model.Block builds this class for such a layer (ATTENTION_ROOMS['conv']), beside attention='causal' only (LFM3's head
gate is not built; other classes beside convs untested). The norms around it are the model's (ln_1 before; no sandwich
norm after, LFM3's post_operator_norm). LFM3 in miniature, 4 layers:
    --layers='conv,rope:w=32,conv,rope' --rope_scaling="{'rope_type': 'proportional', 'partial_rotary_factor': 0.5,
    'layers': 'full'}"
LFM3's layers 3-6 (conv, sliding, conv, full: its 13 : 5 : 6 mix of 24 layers is about 2 : 1 : 1), a sliding window of
L/4 as the lab's other windowed bases, k = 3 (at L = 128 a kernel is already a larger share of the context than LFM3's
7 of its long one), and the full layer at the model's base 1e4, not LFM3's 1e6: there every turning pair turns many
times in L; at L = 128 and d = 32, base 1e6 would leave pairs 5-7 under a third of a turn.

How the rest of the lab meets it:
  * RoPE: a conv layer is no RoPE layer (rope_groups gives it None, as NoPE); rope_scaling['layers'] aims at RoPE
    layers only, and one that reaches none is refused (rope_config.scaled_layers).
  * The attend seam (crop, position maps, diagnostics): never called by a conv layer, so every room acts on the
    attention layers alone, which is right for a crop: the k - 1 tokens a conv reads lie inside any window w >= k
    (they add k - 1 per conv layer to the sliding crop's receptive field, as its layers stack); the truncated crop's
    fresh input starts the conv at zeros, a text that begins there. The entropy and sink heads count attention
    layers only.
  * forward(at=): a conv layer last returns every row; GPT._last_layer_at keeps those at `at`.
  * PoSE's skipped position ids: the conv reads the token order, which is the text's (contiguous), so it ignores them.
  * The KV cache (lab/kv_cache.py): the conv's output at t reads the inputs of its layer at t - k + 1 .. t, which
    nothing caches; `reach` = k - 1 asks the cache to feed those tokens again, and as each conv layer widens what a
    token depends on, it feeds the sum of the layers' reaches (exact; 2 conv layers of k = 3: 4 tokens more a step).
  * Hugging Face export: refused in one line (GPT-NeoX and Llama have no conv layer).
"""
import torch.nn as nn
import torch.nn.functional as F

from model import ATTENTION


class ShortConv(nn.Module):
    """LFM2's gated short convolution with the attention's interface: (config, spec) -> forward(x, rope, attend)."""
    window = chunk = None  # no mask of its own (model.forward reads these of every layer's mixer)

    def __init__(self, config, spec):
        super().__init__()
        C, self.kernel = config.n_embd, spec.conv
        self.reach = spec.conv - 1  # tokens back it reads at its own input (the KV cache feeds them again)
        self.in_proj = nn.Linear(C, 3 * C, bias=config.bias)  # B, C, h
        self.conv = nn.Conv1d(C, C, self.kernel, groups=C, bias=config.bias)  # depthwise, unpadded: padded left below
        nn.init.normal_(self.conv.weight, mean=0.0, std=0.02)  # transformers' init of a Conv1d (GPT's leaves it be)
        self.c_proj = nn.Linear(C, C, bias=config.bias)  # out_proj; named c_proj for GPT's scaled residual init
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, rope=None, attend=None):
        """x (B, T, C) -> (B, T, C); rope and attend are the attention's and unused: no position reaches the conv."""
        b, c, h = self.in_proj(x).transpose(1, 2).chunk(3, dim=1)  # each (B, C, T)
        z = self.conv(F.pad(b * h, (self.kernel - 1, 0)))  # causal: k - 1 zeros before the first token
        return self.resid_dropout(self.c_proj((c * z).transpose(1, 2)))


ATTENTION['conv'] = ShortConv
