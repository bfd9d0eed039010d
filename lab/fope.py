"""
FoPE, Fourier Position Embedding (Hua et al., ICML 2025, arXiv 2412.17739; Intern-S1-Pro ships it): clipped RoPE whose
cos and sin tables each key/value head mixes across the pairs that turn, attention='fope'.

    python train.py config/train_shakespeare_char_cpu.py --attention=fope \\
        "--rope_scaling={'rope_type': 'clip', 'original_max_position_embeddings': 128}" --out_dir=out/char-fope

The formula, as the code that trains it and the engines that serve it compute it (xtuner, Intern-S1-Pro's trainer:
xtuner/v1/module/rope/rope.py FourierEmbedding, read at InternLM/xtuner b934f462; vLLM:
vllm/model_executor/layers/rotary_embedding/fope.py FourierRotaryEmbedding, read at 151a2c74; SGLang:
python/sglang/srt/layers/rotary_embedding/rope_variant.py FourierRotaryEmbedding, read at 0b1fd02d):

    kept pairs   D = 0 .. F-1, those with theta_D > 2 pi / L (a full turn within L); the others stop (theta = 0)
    cos'_h(t)[d] = sum_D cos(t theta_D) C_h[D, d]      sin'_h(t)[d] = sum_D sin(t theta_D) S_h[D, d]      d < F
    cos'_h(t)[d] = 1,  sin'_h(t)[d] = 0                                                   d >= F (the stopped pairs)
    x' = x * cat(cos'_h, cos'_h) + rotate_half(x) * cat(sin'_h, sin'_h)    q and k of key/value head h (and of the
                                                                           query heads of its group), rope.apply_rope
    C_h, S_h = I + xavier_normal(gain = sigma) on the (H, F, F) tensor: N(0, sigma^2 * 2 / (F*F + H*F)) per entry

H = n_kv_head (fope_sep_head=True: a pair of F x F matrices per key/value head, Intern-S1-Pro's setting; one pair for
every head, fope_sep_head=False, is not offered). sigma = fope_init_factor: Intern-S1-Pro ships 0.5; the paper's
configs use 0.3 at 60M parameters (its smallest model), 0.4 at 180M, 0.6 at 1.2B; here 0.3 (INIT_FACTOR). The paper's
code (OLMo-based; read in yiju-zhao/Fourier-Position-Embedding at 3713108, olmo/model.py FourierEmbedding) mixes the F
inputs into min(F, d/4) outputs per query head; the square F x F per key/value head here is Intern-S1-Pro's.

Where the clip lives: in the model's rope config, rope_type 'clip' (rope.clipped_inv_freq, L its
original_max_position_embeddings), which the class requires. That is the one place the lab says which pairs turn:
every tool reads it from the checkpoint (lab.model_facts, lab.pairs, the HF export's refusal,
lab.measure.arm_specs.check_over_trained_in, which refuses a scaling that would turn the stopped pairs again), and the
tables reach the layer with the stopped pairs already at cos 1, sin 0. The class adds only the mixing, on the F pairs
the config leaves turning; with C = S = I the model is the clipped-RoPE model with the same weights, bit for bit.
(xtuner keeps theta_D > 2 pi / L, the clip wavelength <= L: they differ only at a wavelength of exactly L.)

Three things the sources disagree on, or that a reader would guess wrong:
  * Fixed, not learned. xtuner registers sin_coef and cos_coef as buffers and runs the forward under no_grad; the
    paper's code has fourier_learnable=False by default (olmo/config.py); the engines load them as weights.
    attention='fope' is that (C - I and S - I are buffers, saved in the checkpoint). attention='fope_learned' trains
    them (the paper code's fourier_learnable=True): weight decay, which train.py puts on every matrix, pulls C - I to
    0, toward clipped RoPE.
  * One draw. xtuner's model has one rotary module for all layers, its noise drawn from a generator seeded 123 (so
    every rank draws the same); here every layer draws from a generator seeded SEED, so all layers start equal (and
    stay so in 'fope'), and every training seed gets the same draw.
  * The stopped pairs. xtuner (the trainer, also at 0039151f), the paper's code, vLLM 0.34.0 and SGLang 0.5.23 (their
    wheels) pad them with cos 1 and sin 1, which maps such a pair (x1, x2) to (x1 - x2, x2 + x1): sqrt(2) times a fixed
    45-degree turn of q and of k, doubling that pair's share of every score (a trained W_q, W_k absorbs it). vLLM's
    later fope.py (151a2c74; issue #55204, PR #55243, open when read) pads sin with 0, no turn, calling sin 1 a bug: a
    model trained with sin 1 is then served with other scores. Here the clip's tables: cos 1, sin 0 (a model trained
    here is consistent with itself; lab/hf/engines.py warns on a config with use_fope).

Not relative. cos'(m) cos'(n) + sin'(m) sin'(n) mixes different frequencies, so a score depends on m and n, not only
on m - n (with C = S = I it is RoPE's again). Hence, in this lab:
  * the KV cache is exact: every token's keys are rotated once by its own position's tables (in qkv) and cached so;
  * PoSE's position ids run as given: the tables at those ids;
  * position maps are refused (rope_relative = False): they re-rotate q and k by plain RoPE, R(a) R(b) = R(a + b),
    which these tables do not obey; so is the sink-kept crop at=cache, which re-rotates its kept keys;
  * its own crop is the truncated one (crop:form=truncated, positions 0..L-1 as trained): the sliding crop puts
    queries at positions past L, whose tables training never ran, as an absolute encoding's would.
Scaling: vLLM's FourierRotaryEmbedding takes no scaling (it computes base^(-2i/d) itself), and Intern-S1-Pro's
config is rope_type 'default', rope_theta 5e6, max_position_embeddings 262,144 (the clip's L), fope_init_factor 0.5,
fope_sep_head true (xtuner's example config says the same); the paper's code offers YaRN after the clip as a
fine-tuning option. Here a scaling replaces 'clip' and would turn the stopped pairs again: refused (eval's and
finetune's check_over_trained_in, and this class if set_rope_scaling is called directly). Layer patterns compose (each
RoPE layer mixes its own base's kept pairs, a NoPE layer has nothing to mix), as do learned frequencies
(learned_freqs: the kept pairs' theta times exp(alpha), then mixed) and smeared keys (smear_keys_fope: the smear acts
on k before any rotation).
"""
import torch
import torch.nn as nn

from lab.smeared_keys import SmearedKeyAttention
from model import ATTENTION, CausalSelfAttention
from rope import apply_rope
from rope_config import rope_inv_freq

INIT_FACTOR = 0.3  # sigma, fope_init_factor (the paper's value for its smallest model; Intern-S1-Pro: 0.5)
SEED = 123         # xtuner's: one draw for every layer (and every rank)


def kept_pairs(config, spec):
    """F, the pairs that turn in this layer under the config's clip (a prefix: pairs 0..F-1; 0 in a NoPE layer), or
    ValueError in one line when the model has no clip on every RoPE layer, or one that leaves no pair turning."""
    sc, name = config.rope_scaling or {}, config.attention
    if config.pos_emb != 'rope' or sc.get('rope_type') != 'clip':
        raise ValueError(f"attention={name!r} mixes the cos/sin of clipped RoPE, and this model has pos_emb="
                         f"{config.pos_emb!r}, rope_scaling={config.rope_scaling}: train it with pos_emb='rope' and "
                         f"--rope_scaling=\"{{'rope_type': 'clip', 'original_max_position_embeddings': "
                         f"{config.block_size}}}\"")
    if sc.get('layers', 'all') != 'all':
        raise ValueError(f"attention={name!r} needs the clip on every RoPE layer, and rope_scaling['layers'] = "
                         f"{sc['layers']!r} leaves some plain; drop the 'layers' key")
    if not spec.rope:
        return 0
    theta = rope_inv_freq(config.n_embd // config.n_head, spec.base if spec.base is not None else config.rope_base,
                          config.rope_scaling, None, config.rotary_dim)[0]
    F = int((theta != 0).sum())
    if F == 0 or not bool((theta[:F] != 0).all()):
        raise ValueError(f"attention={name!r}: the clip leaves {F} pairs turning (need a first run of at least one); "
                         f"raise the clip's length (max_wavelength or original_max_position_embeddings)")
    return F


def init_deltas(n_kv_head, F, sigma=INIT_FACTOR, seed=SEED):
    """(S - I, C - I), each (n_kv_head, F, F), drawn as xtuner draws them: xavier_normal_(gain=sigma) on the 3-D
    tensor (fan_in F*F, fan_out H*F, so std = sigma sqrt(2 / (F*F + H*F))), sin's first, from one generator."""
    g = torch.Generator().manual_seed(seed)
    draw = lambda: nn.init.xavier_normal_(torch.empty(n_kv_head, F, F), gain=sigma, generator=g)  # noqa: E731
    sin = draw()
    return sin, draw()


def fope_tables(cos, sin, cos_mix, sin_mix):
    """The per-head tables of FoPE from the layer's clipped (cos, sin) [..., T, d] (rope_tables: (T, d) or
    (B, 1, T, d)), in rotate-half layout: the first F pairs' cos and sin times C_h and S_h (cos_mix, sin_mix: (H, F, F),
    float32), the stopped pairs' entries as given (1, 0) -> (H, T, d) or (B, H, T, d). Float32, autocast off (as
    xtuner mixes them)."""
    F, half = cos_mix.size(-1), cos.size(-1) // 2

    def mixed(t, m):
        head = t[..., :F] @ m  # (T, F) @ (H, F, F) -> (H, T, F); (B, 1, T, F) @ (H, F, F) -> (B, H, T, F)
        rest = t[..., F:half]
        rest = (rest[None] if rest.dim() == 2 else rest).expand(*head.shape[:-1], -1)
        return torch.cat((head, rest) * 2, dim=-1)  # cat(h, h): pair i is (x[i], x[i + d/2])
    with torch.autocast(device_type=cos.device.type, enabled=False):
        return mixed(cos.float(), cos_mix.float()), mixed(sin.float(), sin_mix.float())


def fope_class(base, learned=False):
    """base attention (causal, or smeared keys) with FoPE's per key/value head mixing of the clipped tables; the
    mixing C = I + cos_delta, S = I + sin_delta, buffers (as shipped) or, learned=True, parameters."""

    class FoPE(base):
        rope_relative = False  # its scores depend on m and n, not on m - n: nothing may re-rotate q, k (position maps)

        def __init__(self, config, spec):
            super().__init__(config, spec)
            self._config, self.clip = config, config.rope_scaling  # (set_rope_scaling replaces config.rope_scaling)
            self.group = config.n_head // config.n_kv_head
            self.n_pairs = kept_pairs(config, spec)  # (a NoPE layer has nothing to mix)
            if not self.n_pairs:
                return
            sin, cos = init_deltas(config.n_kv_head, self.n_pairs)
            for name, t in (('sin_delta', sin), ('cos_delta', cos)):
                if learned:
                    setattr(self, name, nn.Parameter(t))
                else:
                    self.register_buffer(name, t)

        def mixing(self):
            """(C, S), each (n_kv_head, F, F): the identity plus the deltas."""
            eye = torch.eye(self.n_pairs, device=self.cos_delta.device)
            return eye + self.cos_delta.float(), eye + self.sin_delta.float()

        def qkv(self, x, rope):
            q, k, v = super().qkv(x, None)  # unrotated; k, v repeated to n_head (smeared keys: smeared)
            if rope is None:  # a NoPE layer
                return q, k, v
            if self._config.rope_scaling != self.clip:
                raise ValueError(f"attention={self._config.attention!r} was built on rope_scaling={self.clip} and "
                                 f"the model now has {self._config.rope_scaling}, which would turn its stopped pairs "
                                 f"again; evaluate FoPE as trained (set_rope_scaling back)")
            cos, sin = fope_tables(*rope, *self.mixing())  # per key/value head, then per query head of its group
            cos, sin = (t.repeat_interleave(self.group, dim=-3).to(q.dtype) for t in (cos, sin))
            return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v
    return FoPE


ATTENTION['fope'] = fope_class(CausalSelfAttention)
ATTENTION['fope_learned'] = fope_class(CausalSelfAttention, learned=True)
ATTENTION['smear_keys_fope'] = fope_class(SmearedKeyAttention)  # the copy mix's bases (lab/copy_mix.py)
ATTENTION['smear_keys_fope_learned'] = fope_class(SmearedKeyAttention, learned=True)
