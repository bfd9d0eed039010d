"""
RoPE and the ways to stretch it past the training length L, as small pure functions, in the order of the story:
the rotation, then plain RoPE -> PI -> NTK-aware -> Dynamic NTK -> NTK-by-parts -> YaRN (+ its temperature) ->
Dynamic YaRN -> Llama 3.1 -> LongRoPE. The table that names them (ROPE_SCALING) is in rope_config.py.
At the end, four variants that only the inference engines ship (vLLM, SGLang), each with the file it was read from.

Notation: head dim d (even), pair i = 0 .. d/2-1, base b, training length L, scale s = L'/L >= 1, current length l.
Plain RoPE turns pair i by m*theta_i at position m, theta_i = b^(-2i/d). Wavelength lambda_i = 2*pi/theta_i;
rotations within L: r_i = L/lambda_i. The pairs fall in three bands:
  high   r_i > beta_fast (32): many full turns inside L; every angle was seen, extrapolating is safe.
  middle in between.
  low    r_i < beta_slow (1): not even one turn inside L; angles past L were never seen -> squeeze.
Example d=128, b=1e4, L=4096: pair 0 turns 57.2958 deg/token (~652 turns in L); the last pair turns
0.0066164 deg/token (27.10 deg in all of L); pairs 0..45 complete a turn (boundary d*ln(L/2pi)/(2 ln b) = 45.03).
Each method returns theta'_i in float64. rope_config.py (beside this file) holds the table of types, checks a config
against it and dispatches through it (rope_inv_freq); `python -m lab.rope_table` prints the methods pair by pair.
"""
import math

import torch

# --------------------------------------------------------------------------- the rotation

def rope_cos_sin(inv_freq, positions, attention_factor=1.0, dtype=None, rotary_only=False):
    """cos, sin tables [..., T, head_dim] in rotate-half layout (cat(freqs, freqs)), each multiplied by
    attention_factor. positions: a tensor of positions (ints or floats; may have batch dims) or an int T for
    0..T-1. Built in float32 with autocast off (in bf16, positions 256 and 257 are the same number), then cast
    to dtype if given. Build them for the length actually run; nothing here assumes a maximum.
    Where the temperature goes: q and k both pass through these tables, so the factor multiplies the logit by
    attention_factor^2 on every dimension (the softmax scale of DeepSeek-V3 and torchtitan), pairs that never
    turn (theta = 0) included; rotary_only=True leaves those pairs at 1, as Hugging Face's cos/sin do under a
    partial rotation, whose pass-through dims never meet them. With every pair turning the two are one table."""
    device = inv_freq.device
    if isinstance(positions, int):
        positions = torch.arange(positions, device=device)
    with torch.autocast(device_type=device.type, enabled=False):
        freqs = positions.to(device=device, dtype=torch.float32)[..., None] * inv_freq.to(torch.float32)
        emb = torch.cat((freqs, freqs), dim=-1)
        f = torch.where(inv_freq != 0, attention_factor, 1.0).repeat(2) if rotary_only else attention_factor
        cos, sin = emb.cos() * f, emb.sin() * f
    return (cos, sin) if dtype is None else (cos.to(dtype), sin.to(dtype))

def apply_rope(x, cos, sin):
    """Rotate x [..., T, head_dim] (rotate-half: pair i is (x[i], x[i + d/2]), as in HF Llama and litgpt):
    out = x*cos + cat(-x2, x1)*sin. The interleaved (complex) layout, pairs (x[2i], x[2i+1]), is the same
    function after permuting each head's q/k rows to cat(w[0::2], w[1::2]). Returns x's dtype."""
    if x.shape[-1] != cos.shape[-1]:
        raise ValueError(f"apply_rope: x has head_dim {x.shape[-1]} but cos/sin have {cos.shape[-1]}")
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)

# --------------------------------------------------------------------------- the methods, in story order

def plain_inv_freq(head_dim, base):
    """Plain RoPE: theta_i = b^(-2i/d). Pair 0 is the fastest (1 rad/token), the last the slowest."""
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)

def wavelengths(head_dim, base):
    """lambda_i = 2*pi / theta_i: tokens per full turn of pair i."""
    return 2 * math.pi / plain_inv_freq(head_dim, base)

def rotations_within(head_dim, base, L):
    """r_i = L / lambda_i: full turns pair i makes within L tokens."""
    return L / wavelengths(head_dim, base)

def critical_dimension(head_dim, base, L):
    """Where plain RoPE breaks (Liu et al. 2023): the pairs that turn at least once within L have seen every angle;
    they span d_extra = 2*ceil((d/2) * log_b(L / 2pi)) dimensions, and extrapolation is bounded near
    T_extra = 2pi * b^(d_extra / d), the wavelength of the first pair that never completed a turn.
    Returns (d_extra, T_extra); d = 32, b = 1e4, L = 128 gives (12, 198.7)."""
    d_extra = 2 * math.ceil(head_dim / 2 * math.log(L / (2 * math.pi)) / math.log(base))
    return d_extra, 2 * math.pi * base ** (d_extra / head_dim)

def base_bound(L):
    """Men et al. 2024: retrieving over L tokens needs b >= 0.0424 L^1.628 (below it perplexity may look fine while
    retrieval fails): 114 for L = 128; b = 1e4 is enough up to L ~ 2,000."""
    return 0.0424 * L ** 1.628

def linear_inv_freq(head_dim, base, s):
    """PI (linear): theta'_i = theta_i / s, i.e. position m becomes m/s. Squeezes EVERY band: the low band
    is saved, but neighbouring tokens in the high band now differ by 1/s of the angle, hence fine-tuning."""
    return plain_inv_freq(head_dim, base) / s

def ntk_inv_freq(head_dim, base, s):
    """NTK-aware: raise the base, b' = b * s^(d/(d-2)), theta'_i = b'^(-2i/d). Pair 0 is unchanged and the
    last pair is exactly PI's (theta' = theta/s); in between the squeeze grows smoothly. It also squeezes
    the middle pairs that already turned fully within L (no need to)."""
    return plain_inv_freq(head_dim, base * s ** (head_dim / (head_dim - 2)))

def abf_inv_freq(head_dim, new_base):
    """ABF (Xiong et al. 2023; Llama 3, Qwen): plain RoPE at a base b' raised by hand, then fine-tune. NTK: b' from s."""
    return plain_inv_freq(head_dim, new_base)

def dynamic_inv_freq(head_dim, base, factor, L, seq_len):
    """Dynamic NTK: NTK-aware recomputed for every forward length l: s_l = max(1, l/L),
    b' = b * (a*s_l - a + 1)^(d/(d-2)) with a = factor (a = 1 is the plain rule s = l/L). For l <= L this
    is plain RoPE again. With a KV cache, keys rotated with an old base are wrong once the base changes:
    cache keys before rotation, or recompute them."""
    s_l = max(1.0, seq_len / L)
    return ntk_inv_freq(head_dim, base, factor * s_l - factor + 1)

def _ramp(x, lo, hi):
    """0 below lo, 1 above hi, linear in between."""
    return ((x - lo) / (hi - lo)).clamp(0.0, 1.0)

def _blend(theta, s, keep):
    """keep = 1: theta untouched (extrapolate); keep = 0: theta / s (PI); in between a mix."""
    return keep * theta + (1 - keep) * theta / s

def ntk_by_parts_inv_freq(head_dim, base, s, L, beta_fast=32.0, beta_slow=1.0):
    """NTK-by-parts (paper form): gamma(r) = ramp of the rotations r_i between alpha = beta_slow and
    beta = beta_fast; theta'_i = (1-gamma)*theta_i/s + gamma*theta_i. High band kept, low band pure PI,
    the middle ramps linearly in rotations. No temperature."""
    return _blend(plain_inv_freq(head_dim, base), s, _ramp(rotations_within(head_dim, base, L), beta_slow, beta_fast))

def yarn_correction_range(head_dim, base, L, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """Pair indices where YaRN's ramp starts/ends: dim(n) = d*ln(L/(2*pi*n)) / (2 ln b) is the (fractional)
    pair that turns n times in L. low = floor(dim(beta_fast)), high = ceil(dim(beta_slow)) (no floor/ceil
    when truncate=False), clamped to [0, d-1]. L is always the ORIGINAL length. (20, 46) for d=128, L=4096."""
    dim = lambda n: head_dim * math.log(L / (2 * math.pi * n)) / (2 * math.log(base))
    low, high = dim(beta_fast), dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return float(max(low, 0)), float(min(high, head_dim - 1))

def yarn_inv_freq(head_dim, base, s, L, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """YaRN frequencies (the form the authors and HF ship): ramp_i = clamp((i-low)/(high-low), 0, 1) over the
    pair index with (low, high) = yarn_correction_range; theta'_i = theta_i/s * ramp_i + theta_i * (1-ramp_i).
    Pairs i <= low (> beta_fast turns in L) untouched, i >= high (< beta_slow turns) pure PI.
    Small L: at L=128, d=32 pair 0 turns only L/2pi ~ 20 times, so with beta_fast=32 the high band is empty
    (only pair 0 survives, via the floor at 0); beta_fast ~ 4-8 works much better zero-shot there."""
    low, high = yarn_correction_range(head_dim, base, L, beta_fast, beta_slow, truncate)
    if high <= low:
        high = low + 0.001
    ramp = _ramp(torch.arange(head_dim // 2, dtype=torch.float64), low, high)
    return _blend(plain_inv_freq(head_dim, base), s, 1 - ramp)

def yarn_mscale(s, mscale=1.0):
    """YaRN temperature: 0.1 * mscale * ln(s) + 1 (1 for s <= 1); 1.2079442 at s=8. It multiplies cos AND
    sin, so every q.k logit grows by mscale^2 (= 1/t in softmax(q.k / (t*sqrt(d)))): longer inputs spread
    attention over more tokens, a sharper softmax counters that. Free at run time."""
    return 1.0 if s <= 1 else 0.1 * mscale * math.log(s) + 1.0

def yarn_attention_factor(s, scaling):
    """An explicit attention_factor wins; else DeepSeek-style yarn_mscale(s, mscale)/yarn_mscale(s, mscale_all_dim)
    when that pair is given and both are non-zero; else yarn_mscale(s). (Hugging Face falls back the same way
    when either is 0.)"""
    if 'attention_factor' in scaling:
        return float(scaling['attention_factor'])
    if scaling.get('mscale') and scaling.get('mscale_all_dim'):
        return yarn_mscale(s, scaling['mscale']) / yarn_mscale(s, scaling['mscale_all_dim'])
    return yarn_mscale(s)

def dynamic_yarn_scale(factor, L, seq_len):
    """Dynamic YaRN: YaRN (frequencies and mscale) with s_l = max(factor, l/L) recomputed per forward length.
    factor = 1 for a model never fine-tuned (plain up to L), the fine-tuned scale otherwise. This is how a
    model goes past the length it was scaled for; static YaRN degrades beyond s*L."""
    return max(factor, seq_len / L)

def llama3_inv_freq(head_dim, base, s, L, low_freq_factor=1.0, high_freq_factor=4.0):
    """Llama 3.1, in wavelengths: lambda < L/high_freq_factor keeps theta; lambda > L/low_freq_factor uses theta/s;
    in between smooth = (L/lambda - low)/(high - low), theta' = (1-smooth)*theta/s + smooth*theta.
    The same as NTK-by-parts with alpha = 1, beta = 4. No temperature. low = high (Llama 4 Scout: 1 and 1) has no
    ramp: a step at lambda = L/low (a pair exactly there keeps theta)."""
    theta = plain_inv_freq(head_dim, base)
    wavelen = 2 * math.pi / theta
    if high_freq_factor == low_freq_factor:
        return torch.where(wavelen > L / low_freq_factor, theta / s, theta)
    smooth = (L / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    out = torch.where(wavelen > L / low_freq_factor, theta / s, (1 - smooth) * theta / s + smooth * theta)
    return torch.where(wavelen < L / high_freq_factor, theta, out)

def longrope_inv_freq(head_dim, base, short_factor, long_factor, L, seq_len):
    """LongRoPE (Ding et al. 2024; Phi-3; Hugging Face 'longrope'): one rescale factor per pair, searched rather
    than drawn by a formula: theta'_i = theta_i / f_i with f = long_factor when the current length l > L, else
    short_factor (l <= L). The switch moves EVERY pair at once, so it is a dynamic type: keys cached with the
    short factors are stale once an input grows past L. search_longrope.py finds long_factor for a model.
    The optional start_token_idx (n-hat) acts on the cos/sin rows, not on theta: see longrope_start_tokens."""
    f = long_factor if seq_len > L else short_factor
    for name, fs in (('short_factor', short_factor), ('long_factor', long_factor)):
        if len(fs) != head_dim // 2:
            raise ValueError(f"rope_scaling['{name}'] has {len(fs)} values but head_dim = {head_dim} has "
                             f"{head_dim // 2} pairs; give one factor per pair")
    return plain_inv_freq(head_dim, base) / torch.tensor(f, dtype=torch.float64)

def longrope_start_tokens(cos, sin, positions, plain_inv_freq, start_token_idx):
    """LongRoPE's n-hat (retained start tokens; the reference's MixedLongRoPEScaledRotaryEmbedding): rows of positions
    < n-hat take plain RoPE's cos/sin WITHOUT the attention factor (the reference copies the unscaled table in), the
    rest keep the scaled rows. positions: an int T (0..T-1) or the table's position ids; 0 leaves the tables as they are."""
    if not start_token_idx:
        return cos, sin
    if isinstance(positions, int):
        positions = torch.arange(positions, device=cos.device)
    plain_cos, plain_sin = rope_cos_sin(plain_inv_freq.to(device=cos.device, dtype=torch.float32), positions)
    keep = (positions.to(cos.device) < start_token_idx)[..., None]
    return torch.where(keep, plain_cos.to(cos.dtype), cos), torch.where(keep, plain_sin.to(sin.dtype), sin)

def longrope_attention_factor(s, L):
    """LongRoPE's temperature: sqrt(1 + ln s / ln L) (1 for s <= 1); sqrt(9/7) = 1.1338934 at s=4, L=128.
    Like YaRN's mscale it multiplies cos and sin; as in Hugging Face and Phi-3 it depends on s alone, so it
    applies with the short factors too (l <= L). An explicit attention_factor overrides it."""
    return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L))

# --------------------------------------------------------------------------- which pairs rotate at all (2024-26)

def partial_inv_freq(head_dim, base, keep):
    """Partial RoPE: pairs i < keep turn at plain theta_i, the rest theta = 0 (NoPE channels in a RoPE head)."""
    theta = plain_inv_freq(head_dim, base)
    return torch.where(torch.arange(head_dim // 2) < keep, theta, torch.zeros_like(theta))

def proportional_inv_freq(head_dim, base, p, s=1.0):
    """p-RoPE (Barbero et al. 2025; HF 'proportional', Gemma 4): the fastest r = floor(p*d/2) pairs keep theta_i =
    b^(-2i/d) (over d, unlike GPT-NeoX's partial rotation), the rest theta = 0, all / s. d = 32, p = 0.25: pairs 0-3."""
    return partial_inv_freq(head_dim, base, int(p * head_dim // 2)) / s

def neox_partial_inv_freq(theta, head_dim):
    """GPT-NeoX's partial rotation (rotary_pct; Pythia 0.25, Qwen3-Next 0.25, GLM-4.5 0.5): any method's theta' for
    the first r = p*d dims alone (its base spread over r, not d: theta_i = b^(-2i/r)), padded with theta = 0 to d/2
    pairs. Not p-RoPE: d = 32, p = 0.25 turns pairs 0-3 at 1, 0.1, 0.01, 0.001 where p-RoPE turns them at 1 ... 0.18."""
    return torch.cat((theta, theta.new_zeros(head_dim // 2 - theta.numel())))

def clipped_inv_freq(head_dim, base, max_wavelength):
    """Clipped RoPE (FoPE, HoPE): theta_i = 0 where the wavelength exceeds max_wavelength (L): the pairs that never
    turned once in training stop instead of being squeezed. d = 32, L = 128: pairs 6-15 (critical_dimension's 12 dims)."""
    return partial_inv_freq(head_dim, base, int((wavelengths(head_dim, base) <= max_wavelength).sum()))

# --------------------------------------------------------------------------- engine-only variants (vLLM, SGLang)

def yarn_log_inv_freq(head_dim, base, s, L, beta_fast=32.0, beta_slow=1.0):
    """Grok's 'yarn_log' (SGLang python/sglang/srt/models/grok.py, ScalingRotaryEmbedding, read at commit 031ad4ce;
    vLLM's grok1_scaling_rope.py is the same): YaRN's ramp, but the kept theta_i and PI's theta_i/s are blended in log
    space, ln theta'_i = (1-ramp_i) ln theta_i + ramp_i ln(theta_i/s), i.e. theta'_i = theta_i / s^ramp_i: the same
    ends as yarn_inv_freq, the ramp pairs squeezed more (a geometric mean, not an arithmetic one). (low, high) from
    yarn_correction_range, always truncated; low == high moves low down by 0.001 (HF's yarn moves high up), so the
    edge pair is PI's here. No temperature: the engine computes mscale and leaves it off cos/sin."""
    low, high = yarn_correction_range(head_dim, base, L, beta_fast, beta_slow)
    if high <= low:
        low = high - 0.001
    ramp = _ramp(torch.arange(head_dim // 2, dtype=torch.float64), low, high)
    return plain_inv_freq(head_dim, base) / s ** ramp

def telechat3_mscale(s):
    """TeleChat3's YaRN temperature (vLLM vllm/model_executor/layers/rotary_embedding/telechat3_scaling_rope.py,
    TeleChat3RoPEScaledRotaryEmbedding, read at commit d5a17e05): 0.07*ln(s) + 1 (1 for s <= 1), YaRN's 0.1 made 0.07;
    1.1455609 at s=8. Its frequencies are YaRN's (yarn_inv_freq). It keeps YaRN's cos/sin cache, which multiplies cos
    AND sin by it (yarn_scaling_rope.py), so the logit grows by its square, as with yarn_mscale."""
    return 1.0 if s <= 1 else 0.07 * math.log(s) + 1.0

def ntk_mixed_inv_freq(head_dim, base, s, mixed_b=1.0):
    """NTK-mixed (Su 2023, kexue.fm/archives/9706; vLLM's 'ntk' with mixed_b, vllm/model_executor/layers/rotary_embedding/
    ntk_scaling_rope.py, read at commit 91b4f8fb): theta'_i = theta_i / lambda_m with lambda_m = exp(a*m^b), m = i+1
    (pairs counted from 1), a = ln(s)/(d/2)^b, b = mixed_b; the base stays b. The last pair (m = d/2) gets lambda = s,
    PI's; pair 0 gets s^((2/d)^b), not 1. b = 1 is vLLM's 'ntk' without mixed_b, theta_i * s^(-2(i+1)/d) (not
    ntk_inv_freq, which keeps pair 0); a smaller b squeezes the early pairs more (b -> 0: PI), a larger b less."""
    m = torch.arange(1, head_dim // 2 + 1, dtype=torch.float64)
    return plain_inv_freq(head_dim, base) / torch.exp(math.log(s) / (head_dim / 2) ** mixed_b * m ** mixed_b)

def ntk_alpha_inv_freq(head_dim, base, alpha):
    """Hunyuan's alpha-NTK (vLLM DynamicNTKAlphaRotaryEmbedding, vllm/model_executor/layers/rotary_embedding/
    dynamic_ntk_alpha_rope.py, read at commit a42938c2; SGLang's rope_variant.py the same): b' = b * alpha^(d/(d-2)),
    theta'_i = b'^(-2i/d): NTK-aware with alpha set by hand in place of s (Hunyuan: {'type': 'dynamic', 'alpha': 1000,
    'factor': 1}). Static despite the name: both engines build the cos/sin table once and never recompute it."""
    return ntk_inv_freq(head_dim, base, alpha)
