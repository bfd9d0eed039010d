"""
Which knobs for my length? Each extension method's settings for a target length T, given the trained length L, the
rotary head dim d and the RoPE base b (or a Hugging Face config.json, or a checkpoint), each with its formula and
where the formula comes from. The numbers come from rope.py's functions (and lab.position_maps' maps,
lab.longrope_search's bounds); the lab's own choices: config/eval_char_cpu.py, eval_real_model_cpu.py,
eval_frequencies_cpu.py.

    python -m lab.knobs --L=128 --T=1024 --head_dim=32 --base=10000
    python -m lab.knobs --config=path/to/config.json --T=32768   # L, base and head dim from a Hugging Face config
    python -m lab.knobs --ckpt=gguf:smollm2 --T=12288 --json=True  # or a run folder, gguf:<file>, hf:<folder>
    python -m lab.knobs --ckpt=gguf:smollm2 --T=32768 --export=out/hf/smollm2-32k   # and write the pick (below)

--export hands the recommended frequency arm to the exporter (lab/hf/export.py): YaRN at s = T/L with the band edges
set here (beta_fast, beta_slow; the table's YaRN rows), written as a Hugging Face folder of the model's own
architecture, and the vLLM and llama-server lines for it printed (lab/hf/serve.py). L, head_dim and base then come
from --ckpt alone.
"""
import json
import math
import os

import torch

from configurator import ConfigError, get_config
from lab.engine.cli import cli
from lab.longrope_search import START_TOKENS, UPPER, parse_start_tokens
from lab.position_maps import self_extend_positions
from rope import (base_bound, critical_dimension, dynamic_inv_freq, longrope_attention_factor, ntk_inv_freq,
                  wavelengths, yarn_attention_factor, yarn_correction_range, yarn_mscale)
from rope_config import check_bands, type_keys

DEFAULTS = dict(
    T=0,             # the target length, in tokens (> L); required
    L=0,             # the trained length; 0: from --config / --ckpt
    head_dim=0,      # the rotary dims per head (even); 0: from --config / --ckpt
    base=0.0,        # the RoPE base b; 0: from --config / --ckpt, else 10000
    config='',       # a Hugging Face config.json (max_position_embeddings, rope_theta, head_dim, ...)
    ckpt='',         # a run folder (out/...), gguf:smollm2, gguf:<file> or hf:<folder>
    beta_fast=type_keys('yarn')['beta_fast'][1],  # YaRN's band edges, in turns within L (32 and 1: the paper's, HF's)
    beta_slow=type_keys('yarn')['beta_slow'][1],
    window=0,        # ReRoPE's and Self-Extend's neighbour window w; 0: the lab's L/2
    json=False,      # print one JSON dict instead of the table
    export='',       # a folder: write the --ckpt model there with the pick, YaRN at s = T/L (lab/hf/export.py)
    overwrite=False,  # with --export: replace a folder that is not empty
)
HF_FIELDS = {'L': 'max_position_embeddings (or original_max_position_embeddings)',
             'head_dim': 'head_dim (or hidden_size and num_attention_heads)', 'base': 'rope_theta'}


def base_of(inv_freq, d):
    """The base b' of plain-RoPE-shaped frequencies, from pair 1: theta'_1 = b'^(-2/d). For rope.ntk_inv_freq it is
    b' = b * s^(d/(d-2)); for rope.dynamic_inv_freq at length l (factor 1), b * max(1, l/L)^(d/(d-2))."""
    return float(inv_freq[1]) ** (-d / 2)


def frequency_knobs(L, T, d, b, beta_fast, beta_slow):
    """PI, NTK-aware, Dynamic NTK, YaRN and Llama 3.1 for s = T/L: rows (method, knob, value, formula, source)."""
    s, m = T / L, yarn_mscale(T / L)
    low, high = yarn_correction_range(d, b, L, beta_fast, beta_slow)
    lf, hf = (type_keys('llama3')[k][1] for k in ('low_freq_factor', 'high_freq_factor'))
    lam, dims = wavelengths(d, b).tolist(), 'YaRN correction dims; rope.yarn_correction_range'

    def band(keep):  # the pairs whose wavelength passes keep: 'first-last'
        ix = [i for i, x in enumerate(lam) if keep(x)]
        return f"{ix[0]}-{ix[-1]}" if ix else 'none'
    rows = [
        ('scale', 's', s, 's = T/L', 'ROPE_NOTES notation'),
        ('linear', 'factor', s, "PI: theta'_i = theta_i/s (positions m/s)", 'Chen et al. 2023; rope.linear_inv_freq'),
        ('ntk', 'factor', s, 's = T/L (in practice set somewhat above)', 'bloc97 2023; rope.ntk_inv_freq'),
        ('ntk', "base b'", base_of(ntk_inv_freq(d, b, s), d), "b' = b * s^(d/(d-2))", 'bloc97 2023; rope.ntk_inv_freq'),
        ('dynamic', 'factor', 1.0, 's_l = max(1, l/L) per forward length l (a*s_l - a + 1, a = factor)',
         'emozilla 2023, HF dynamic; rope.dynamic_inv_freq'),
        ('dynamic', "base at l = T", base_of(dynamic_inv_freq(d, b, 1.0, L, T), d),
         "b * (T/L)^(d/(d-2)); plain b for l <= L", 'rope.dynamic_inv_freq'),
        ('yarn', 'factor', s, 's = T/L', 'Peng et al. 2023 (YaRN)'),
        ('yarn', 'beta_fast', beta_fast, 'turns within L above which a pair is kept', 'YaRN (its beta); HF: 32'),
        ('yarn', 'low (pair)', int(low), 'floor(d*ln(L/(2pi*beta_fast))/(2 ln b)), clamped to [0, d-1]', dims),
        ('yarn', 'low (wavelength)', L / beta_fast, 'lambda <= L/beta_fast: theta kept', 'YaRN; rope.yarn_inv_freq'),
        ('yarn', 'beta_slow', beta_slow, 'turns within L below which a pair is pure PI', 'YaRN (its alpha); HF: 1'),
        ('yarn', 'high (pair)', int(high), 'ceil(d*ln(L/(2pi*beta_slow))/(2 ln b)), clamped to [0, d-1]', dims),
        ('yarn', 'high (wavelength)', L / beta_slow, 'lambda >= L/beta_slow: theta/s', 'YaRN; rope.yarn_inv_freq'),
        ('yarn', 'mscale', m, 'mscale = 0.1*ln(s) + 1', 'YaRN temperature sqrt(1/t); rope.yarn_mscale'),
        ('yarn', 'attention_factor', yarn_attention_factor(s, {}),
         "HF's name for the factor on cos AND sin (default: mscale); an explicit one overrides it",
         'HF rope_scaling; rope.yarn_attention_factor'),
        ('yarn', 'logit scale', m * m, "attention_factor^2 = 1/t in softmax(q.k/(t*sqrt(d)))", 'YaRN (its t)')]
    if L / (2 * math.pi) < beta_fast:
        rows.append(('yarn', 'caution', L / (2 * math.pi), 'L/2pi (turns of pair 0) < beta_fast: no pair kept; '
                     'try 4-8', 'ROPE_NOTES small L; eval_char_cpu.py arms: beta_fast=8'))
    return rows + [
        ('llama3', 'factor', s, 's = T/L (Llama 3.1 ships 8 at L = 8192)', 'Llama 3.1; rope.llama3_inv_freq'),
        ('llama3', 'low_freq_factor', lf, 'default', 'Llama 3.1; rope_config llama3 row'),
        ('llama3', 'high_freq_factor', hf, 'default', 'Llama 3.1; rope_config llama3 row'),
        ('llama3', 'high_freq_wavelen', L / hf, f'L/high_freq_factor: shorter keep theta (pairs '
         f'{band(lambda x: x < L / hf)})', 'rope.llama3_inv_freq'),
        ('llama3', 'low_freq_wavelen', L / lf, f'L/low_freq_factor: longer get theta/s (pairs '
         f'{band(lambda x: x > L / lf)})', 'rope.llama3_inv_freq')]


def bound_knobs(L, T, d, b):
    """Where plain RoPE breaks (critical dimension for L) and the base a context T needs (base bound), as rows; the
    longest context b suffices for is base_bound inverted: (b/0.0424)^(1/1.628)."""
    d_extra, t_extra = critical_dimension(d, b, L)
    liu, men = 'Liu et al. 2023; rope.critical_dimension', 'Men et al. 2024; rope.base_bound'
    return [('plain', 'd_extra', d_extra, '2*ceil((d/2)*log_b(L/2pi)): dims that turn within L', liu),
            ('plain', 'T_extra', t_extra, '2pi * b^(d_extra/d): plain RoPE breaks near here', liu),
            ('abf', 'base bound at T', base_bound(T), "b' >= 0.0424 * T^1.628 (raise the base, fine-tune)", men),
            ('abf', 'b suffices up to', (b / 0.0424) ** (1 / 1.628), '(b/0.0424)^(1/1.628) tokens', men)]


def self_extend_group(L, T, w):
    """Self-Extend's smallest group G with w + (T - w)/G <= L: G = ceil((T - w)/(L - w)); the lab also needs G | w,
    so the smallest divisor of w at or above it (None: none is; lower w)."""
    g = math.ceil((T - w) / (L - w))
    return g, next((k for k in range(max(g, 1), w + 1) if w % k == 0), None)


def map_knobs(L, T, w, s):
    """Self-Extend (self_extend_group), ReRoPE's w < L, Leaky ReRoPE's k >= (T-1-w)/(L-1-w), DCA's chunk 3L/4 and
    window L/16 (ChunkLlama's defaults), LongRoPE's search bounds [1, 1.25 s] and n-hat set, as rows."""
    g, gd = self_extend_group(L, T, w)
    reach = None if gd is None else float(self_extend_positions(torch.tensor([T - 1]), w, gd)[0])
    S, wd = 3 * L // 4, max(1, L // 16)
    lab = 'config/eval_char_cpu.py (w=64=L/2, G=32), eval_real_model_cpu.py (w=L/4, G=4)'
    return [
        ('self_extend', 'window w', w, 'neighbour window kept exact (the lab: L/2)', lab),
        ('self_extend', 'group G (rule)', g, 'smallest G with w + (T-w)/G <= L: ceil((T-w)/(L-w))',
         'Jin et al. 2024; ROPE_NOTES'),
        ('self_extend', 'group G (divides w)', gd, 'smallest divisor of w >= that (LongLM prefill/decode agree)',
         'lab.position_maps.check_position_map'),
        ('self_extend', 'farthest position', reach, '(T-1)//G + w - w/G <= L-1', 'position_maps.self_extend_positions'),
        ('rerope', 'window w', w, 'w < L; every key farther than w sits at w (the lab: L/2)',
         'Su 2023; config/eval_char_cpu.py (64), eval_real_model_cpu.py (4096)'),
        ('leaky_rerope', 'k', math.ceil((T - 1 - w) / (L - 1 - w)) if w < L - 1 else None,
         'ceil((T-1-w)/(L-1-w)): w + (T-1-w)/k <= L-1', 'lab.position_maps.leaky_rerope_positions (lab arm: k=16)'),
        ('dca', 'chunk S', S, '3L/4 (< L); no distance exceeds S at any length',
         'An et al. 2024; ChunkLlama chunkllama_attn_replace.py'),
        ('dca', 'local window w', wd, 'L/16 (< S); chunks of S - w tokens',
         'ChunkLlama default; config/studies/eval_frequencies_cpu.py dca:chunk=96:window=8'),
        ('longrope', 'factor', s, 's = T/L: candidates scored at s*L tokens', 'Ding et al. 2024; search_longrope.py'),
        ('longrope', 'f_i lower', 1.0, 'theta_i/theta\'_i >= 1, non-decreasing over pairs', 'lab.longrope_search'),
        ('longrope', 'f_i upper', UPPER * s, f'{UPPER:g}*s (the paper; the released code: 1 + s)',
         'lab.longrope_search.UPPER'),
        ('longrope', 'n-hat candidates', list(parse_start_tokens(START_TOKENS, T)), 'the paper\'s set, those < T',
         'lab.longrope_search.START_TOKENS'),
        ('longrope', 'attention factor', longrope_attention_factor(s, L), 'sqrt(1 + ln s / ln L)',
         'rope.longrope_attention_factor')]


def knobs(L, T, d, b, beta_fast=32.0, beta_slow=1.0, window=0):
    """Every method's knobs for the target T: [(method, knob, value, formula, source)]; window 0 means L/2."""
    return (frequency_knobs(L, T, d, b, beta_fast, beta_slow) + bound_knobs(L, T, d, b)
            + map_knobs(L, T, window or L // 2, T / L))


def read_hf_config(path):
    """L, base and rotary dims of a Hugging Face config.json (text_config if nested). The rope dict and rope_theta as
    lab.hf.config.from_hf reads them; L = its original_max_position_embeddings, else max_position_embeddings;
    head_dim, else hidden_size / num_attention_heads; rotary dims = int(head_dim * partial_rotary_factor) (GPT-NeoX:
    rotary_pct, 0.25 by default; its base spreads over the rotary dims, as in HF). Missing fields come back None."""
    from data.common import read_json
    from lab.hf.config import from_hf, hf_rotary_fraction, without
    if not os.path.isfile(path):
        raise ConfigError(f"config={path} does not exist; pass the path of a Hugging Face config.json")
    d = read_json(path, "pass a Hugging Face config.json (--config=...)")
    if not isinstance(d, dict):
        raise ConfigError(f"config={path} holds no JSON object; pass a Hugging Face config.json")
    d = d['text_config'] if isinstance(d.get('text_config'), dict) else d
    try:
        p = hf_rotary_fraction(d)  # (GPT-NeoX: rotary_pct, 0.25 by default)
    except ValueError as e:
        raise ConfigError(f"config={path}: {e}") from None
    sc, theta = from_hf({**without(d, ('partial_rotary_factor', 'rotary_pct')), 'model_type': None,
                         'max_position_embeddings': d.get('max_position_embeddings')})  # a whole config
    heads, width = d.get('num_attention_heads'), d.get('hidden_size')
    hd = d.get('head_dim') or (width // heads if isinstance(width, int) and isinstance(heads, int) and heads else None)
    L = (sc or {}).get('original_max_position_embeddings') or d.get('original_max_position_embeddings') \
        or d.get('max_position_embeddings')
    return dict(L=L, head_dim=int(hd * p) if isinstance(hd, int) else hd, base=theta)


def read_checkpoint(ref):
    """L, base and rotary dims of a model reference (lab.model_facts.describe: a run folder, gguf:<file> or
    gguf:smollm2 by its metadata alone, hf:<folder> by its config.json)."""
    from lab.model_facts import describe
    facts = describe(ref)
    facts.need_rope(f"ckpt={ref}")
    return dict(L=facts.L, head_dim=facts.rotary_dim, base=facts.base)


def inputs(cfg):
    """(L, T, head_dim, base, where from): the settings, filled from --config or --ckpt, checked (one-line errors)."""
    if cfg['config'] and cfg['ckpt']:
        raise ConfigError("config= and ckpt= are both set; pass one of them (or --L, --head_dim, --base)")
    src = cfg['config'] or cfg['ckpt']
    got = read_hf_config(src) if cfg['config'] else read_checkpoint(src) if src else dict(base=10000.0)
    L, d, b = (cfg[k] or got.get(k) for k in ('L', 'head_dim', 'base'))
    for k, v in (('L', L), ('head_dim', d), ('base', b)):
        if v is None:
            field = HF_FIELDS[k] if cfg['config'] else k
            raise ConfigError(f"{src} gives no {field}; add it there or pass --{k}=<value>" if src else
                              f"{k} is not set: pass --{k}=<value> (or --config= / --ckpt=)")
    T, whole = cfg['T'], lambda x: isinstance(x, int) and not isinstance(x, bool)  # noqa: E731
    for bad, msg in ((not whole(L) or L < 2, f"L={L!r} must be a whole number >= 2 (the trained length)"),
                     (not whole(d) or d < 4 or d % 2, f"head_dim={d!r} must be a positive even number >= 4 (the "
                                                      f"rotary dims per head, n_embd / n_head)"),
                     (not isinstance(b, (int, float)) or not 1 < b < math.inf,
                      f"base={b!r} must be a finite number > 1 (the RoPE base, rope_theta)"),
                     (whole(L) and T <= L, f"T={T} must be above L={L}: pass --T=<the target length> (nothing "
                                           f"to extend up to L)")):
        if bad:
            raise ConfigError(msg)
    if cfg['window'] and not 0 < cfg['window'] < L:
        raise ConfigError(f"window={cfg['window']} must be in 1..{L - 1} (the neighbour window is shorter than L)")
    wrong = check_bands(cfg)
    if wrong:
        raise ConfigError(f"{wrong[0]}={cfg[wrong[0]]}: {wrong[1]}")
    return L, T, d, float(b), src or 'the settings'


def fmt(v):
    """A value for the table: 91895.87 -> '91,895.9', 8192.0 -> '8,192', 1.20794 -> '1.2079', None -> '-', a list
    '0, 1, ..., 256 (14)'."""
    if isinstance(v, (list, tuple)):
        return ', '.join(map(fmt, v)) if len(v) < 5 else f"{fmt(v[0])}, {fmt(v[1])}, ..., {fmt(v[-1])} ({len(v)})"
    if v is None:
        return '-'
    if isinstance(v, int) or v == int(v):
        return f"{int(v):,}"
    return f"{v:,.1f}" if abs(v) >= 1000 else f"{v:.5g}"


def export_pick(cfg, L, T, rows):
    """--export: the recommended frequency arm, YaRN at s = T/L with this table's band edges, written by the exporter
    from --ckpt; returns (what was chosen, the exporter's printed lines)."""
    from lab.hf.export import export
    t = {(m, k): v for m, k, v, _, _ in rows}
    spec = f"yarn:beta_fast={cfg['beta_fast']:g}:beta_slow={cfg['beta_slow']:g}"
    notes = []
    _, config, _ = export(cfg['ckpt'], cfg['export'], cfg['overwrite'], spec, T / L, notes)
    rp = config['rope_parameters']
    if (rp.get('original_max_position_embeddings'), rp.get('factor')) != (L, T / L):  # (one L on both sides)
        raise ValueError(f"the export read L = {rp.get('original_max_position_embeddings')} from {cfg['ckpt']}, "
                         f"the knobs L = {L}; report this")
    chose = (f"export: {spec} factor={T / L:g} (s = T/L = {T:,}/{L:,}; pairs 0-{t['yarn', 'low (pair)']} kept, pure PI "
             f"from pair {t['yarn', 'high (pair)']}, attention factor {t['yarn', 'attention_factor']:.5g}) "
             f"-> {cfg['export']}")
    return chose, notes


def main(argv=None):
    cfg = get_config(argv or [], DEFAULTS)
    if cfg['export'] and (not cfg['ckpt'] or any(cfg[k] for k in ('L', 'head_dim', 'base'))):
        raise ConfigError(f"export={cfg['export']} writes a model: pass --ckpt=<run folder, gguf:<file> or "
                          f"hf:<folder>> and no --L, --head_dim or --base (the export reads them from the checkpoint)")
    if cfg['overwrite'] and not cfg['export']:
        raise ConfigError("--overwrite is used with --export only; drop it or name the folder to write")
    L, T, d, b, src = inputs(cfg)
    rows = knobs(L, T, d, b, cfg['beta_fast'], cfg['beta_slow'], cfg['window'])
    chose, notes = export_pick(cfg, L, T, rows) if cfg['export'] else (None, [])
    if cfg['json']:
        out = {}
        for method, knob, value, formula, source in rows:
            out.setdefault(method, {})[knob] = dict(value=value, formula=formula, source=source)
        print(json.dumps(dict(L=L, T=T, head_dim=d, base=b, source=src, knobs=out,
                              **({'export': dict(chose=chose, lines=notes)} if chose else {})), indent=1))
        return 0
    print(f"L={L:,} -> T={T:,} (s = {T / L:g}), head_dim={d} ({d // 2} pairs), base={b:g}; from {src}")
    table = [('method', 'knob', 'value', 'formula', 'source')] + [(m, k, fmt(v), f, s) for m, k, v, f, s in rows]
    width = [max(len(r[i]) for r in table) for i in range(4)]
    for r in table:
        print(' | '.join(x.ljust(w) for x, w in zip(r, width)) + ' | ' + r[4])
    if chose:
        print('\n'.join([chose, *notes]))
    return 0


if __name__ == '__main__':
    cli(main)
