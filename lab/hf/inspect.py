"""
What a model's rope config does: as this lab reads it, and as each inference engine will run it (issue 59).

    python -m lab.hf.inspect path/to/config.json       # a config.json, or an HF folder holding one
    python -m lab.hf.inspect hf:<folder> | gguf:smollm2 | file.gguf

For each kind of layer (a per-layer config has several: Gemma 3's local and global layers, Llama 4's chunked RoPE and
global NoPE layers, layer_rope_theta's bases): the rope type, the factor s, the training length L the method reads
and the declared length, theta'_i / theta_i per pair (as lab.rope_table shows it), the attention factor and where
transformers applies it, any position-dependent temperature on the queries, the critical dimension (the pairs that
turned within L), and the lab's measured verdicts for that method where a claims record holds one. Then each engine's
reading of the same config (lab/hf/engines.py: one row per engine and rope type, each citing the source file and
version it was read from), with a warning where an engine drops, double-applies or misreads a field. A GGUF is read as
llama.cpp reads it (its rope.* keys); the Python engines read config.json.

The lab's reading is lab.hf.config.from_hf / from_hf_layers (the same code that loads a real model), plus the facts a
rope dict does not carry: partial rotation (partial_rotary_factor, HF's int(head_dim * p) rotary dims), DeepSeek's
qk_rope_head_dim, layer_rope_theta (0 = NoPE), and the query temperatures transformers applies in the attention
(DeepSeek-V3's mscale_all_dim on the softmax scale, Llama 4's attn_temperature_tuning, Ministral 3's
llama_4_scaling_beta). Bad input: one line naming the file and the field, exit 2 (InspectError, lab.engine.cli).
"""
import argparse
import json
import math
import os
import reprlib
import sys

from lab.engine.cli import cli
from lab.hf.config import from_hf, from_hf_layers, hf_rotary_fraction, without
from lab.hf.engines import ENGINES, FOPE_FIELDS, applies, readings
from rope import critical_dimension, plain_inv_freq, yarn_mscale
from rope_config import parse_layers, rope_inv_freq, scaled_layers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLAIMS = 'assets/test/claims'
# the lab's records for a method, the real model's first (lab.verdicts.claims: each id a file in CLAIMS)
METHOD_CLAIMS = {
    'yarn': ['real-yarn-inside-L', 'real-yarn-vs-base-8192', 'real-yarn-vs-crop-8192', 'real-yarn-passkey-digits',
             'yarn-zero-shot-vs-crop-512'],
    'linear': ['real-yarn-vs-pi-8192'],
    'default': ['real-base-vs-crop-10240', 'base-vs-crop-512'],
    'dynamic': ['dynamic-vs-static-yarn-512'],
}
# keys transformers reads beside the rope frequencies (the query temperatures), not rope types of their own
TEMPERATURE_KEYS = ('llama_4_scaling_beta',)
PER_LAYER_KEYS = ('layer_types', 'no_rope_layers', 'layer_rope_theta')
NO_ROPE = {'gpt2': 'learned positions', 'opt': 'learned positions', 'bert': 'learned positions',
           'bloom': 'ALiBi', 'mpt': 'ALiBi', 't5': 'relative position buckets'}  # model types whose positions are not RoPE


class InspectError(ValueError):
    """A config the inspector cannot read: the message names the file and the field."""


# ----------------------------------------------------------------------------- reading the config


def load(ref):
    """(config dict, kind 'hf' | 'gguf', name) from a config.json, an HF folder, 'hf:<folder>', 'gguf:...' or a .gguf."""
    if ref.startswith('gguf:') or ref.endswith('.gguf'):
        return None, 'gguf', ref
    path = ref[3:] if ref.startswith('hf:') else ref
    path = os.path.join(path, 'config.json') if os.path.isdir(path) else path
    if not os.path.isfile(path):
        raise InspectError(f"{path}: not found; give a config.json, an HF folder holding one, or a GGUF file")
    try:
        with open(path, encoding='utf-8') as f:
            d = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise InspectError(f"{path}: not JSON ({e}); give the model's config.json") from None
    if not isinstance(d, dict):
        raise InspectError(f"{path}: a config.json holds one object, this holds a {type(d).__name__}")
    return d, 'hf', path


def text_config(d):
    """The text model's config (Llama 4, Gemma 3 and the multimodal ones nest it)."""
    return d['text_config'] if isinstance(d.get('text_config'), dict) else d


def rope_dict(d):
    """The flat rope dict transformers 5 reads first (rope_scaling over rope_parameters); {} when none."""
    rp = d.get('rope_scaling') or d.get('rope_parameters') or {}
    return rp if isinstance(rp, dict) else {}


def head_dims(d, name):
    """(head_dim, rotary_dim) as transformers computes them: head_dim (DeepSeek: qk_rope_head_dim) or hidden_size /
    heads; the rotary dims int(head_dim * partial_rotary_factor), p at the top or in the rope dict."""
    hd = d.get('qk_rope_head_dim') or d.get('head_dim')
    if hd is None:
        h, n = d.get('hidden_size'), d.get('num_attention_heads')
        if not isinstance(h, int) or not isinstance(n, int) or n < 1:
            raise InspectError(f"{name}: no head_dim, and hidden_size / num_attention_heads ({h!r} / {n!r}) cannot "
                               f"give one; the config needs both (whole numbers)")
        hd = h // n
    if isinstance(hd, bool) or not isinstance(hd, int) or hd < 2 or hd % 2:
        raise InspectError(f"{name}: head_dim = {hd!r} must be an even whole number >= 2")
    rp = rope_dict(d)
    if (rp.get('rope_type') or rp.get('type')) == 'proportional':  # p-RoPE: its p picks pairs over the whole head
        return hd, hd
    try:
        p = hf_rotary_fraction(d)
    except ValueError as e:
        raise InspectError(f"{name}: {e}") from None
    return hd, int(hd * p) // 2 * 2


def temperatures(d):
    """The query temperatures transformers applies inside the attention, as (where, what, value at a few positions)."""
    out, rp, mt = [], rope_dict(d), str(d.get('model_type', ''))
    if mt.startswith('deepseek') and rp.get('mscale_all_dim'):
        s = rp.get('factor') or 1.0
        m = yarn_mscale(s, rp['mscale_all_dim'])
        out.append(('softmax scale', f"x mscale(s, mscale_all_dim)^2 = (0.1 x {rp['mscale_all_dim']:g} ln {s:g} + 1)^2 "
                    f"= {m * m:.4f}, on every dim (DeepseekV3Attention.scaling; the cos/sin factor is the ratio "
                    f"mscale / mscale_all_dim)", m * m))
    if d.get('attn_temperature_tuning') and mt.startswith('llama4'):
        fs, a = d.get('floor_scale', 8192), d.get('attn_scale', 0.1)
        out.append(('queries of NoPE layers', f"x (1 + {a:g} ln(floor((p + 1) / {fs}) + 1)): 1 below {fs:,}, "
                    f"{1 + a * math.log(2):.4f} from {fs - 1:,}, {1 + a * math.log(5):.4f} from {4 * fs - 1:,} "
                    f"(Llama4TextAttention)", None))
    if rp.get('llama_4_scaling_beta'):
        b, L = rp['llama_4_scaling_beta'], rp.get('original_max_position_embeddings')
        out.append(('queries, every layer', f"x (1 + {b:g} ln(1 + floor(p / {L}))): 1 inside L, "
                    f"{1 + b * math.log(2):.4f} from L (Ministral3Attention, get_llama_4_attn_scale)", None))
    return out


def layer_groups(d, name):
    """The lab's reading, one entry per kind of layer: dict(layers, rope, window, chunk, base, scaling)."""
    d = without(text_config(d), ('partial_rotary_factor', 'rotary_pct') + TEMPERATURE_KEYS + FOPE_FIELDS)
    if d.get('model_type') == 'gpt_neox':  # its rotation read apart (rotary_dims), not from_hf's GPTNeoXConfig default
        d['partial_rotary_factor'] = 1.0
    n = d.get('num_hidden_layers')
    try:
        if any(d.get(k) for k in PER_LAYER_KEYS) or str(d.get('model_type', '')).startswith(('gemma3', 'llama4')):
            thetas = d.get('layer_rope_theta')
            if thetas is not None:  # granitemoe_swa (transformers 5.25): a base per layer, 0 = NoPE
                if not isinstance(thetas, list) or len(thetas) != n or any(
                        isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0 for t in thetas):
                    raise InspectError(f"{name}: layer_rope_theta = {reprlib.repr(thetas)} must be one base >= 0 per "
                                       f"layer ({n}; 0 = NoPE)")
                d = dict(d, no_rope_layers=[int(t > 0) for t in thetas],
                         layer_types=d.get('layer_types') or ['full_attention'] * n)
            pattern, sc = from_hf_layers(d)
            block = max(d.get('sliding_window') or 0, d.get('attention_chunk_size') or 0, 8192) + 2
            specs = parse_layers(pattern, len(pattern.split(',')), 10000.0, block)
            if thetas is not None:
                specs = [s._replace(base=float(t)) if t else s for s, t in zip(specs, thetas)]
            on = scaled_layers(specs, sc)
        else:
            sc, theta = from_hf(d)
            base = theta or d.get('rope_theta') or 10000.0
            specs, on = None, None
    except ValueError as e:
        raise InspectError(f"{name}: {e}") from None
    if specs is None:
        return [dict(layers=list(range(n or 1)), rope=True, window=d.get('sliding_window'), chunk=None, base=float(base),
                     scaling=sc)]
    groups = {}
    for i, (s, scaled) in enumerate(zip(specs, on)):
        key = (s.rope, s.window, s.chunk, s.base, scaled)
        groups.setdefault(key, dict(layers=[], rope=s.rope, window=s.window, chunk=s.chunk, base=s.base,
                                    scaling=sc if scaled else None))['layers'].append(i)
    return list(groups.values())


def describe(d, name='config.json'):
    """The lab's reading of a whole config.json: dict(head_dim, rotary_dim, max_position_embeddings, groups) with each
    group's inv_freq (theta'_i), plain theta_i, attention factor, L, s and critical dimension; and the temperatures."""
    if not isinstance(d, dict):
        raise InspectError(f"{name}: a config must be a dict, got {type(d).__name__}")
    t = text_config(d)
    no_rope = NO_ROPE.get(str(t.get('model_type', ''))) or ('ALiBi' if t.get('alibi') else None)
    if no_rope and not any(t.get(k) for k in ('rope_theta', 'rope_scaling', 'rope_parameters', 'rotary_pct')):
        raise InspectError(f"{name}: model_type {t.get('model_type')!r} has no rope ({no_rope}); nothing to inspect: "
                           f"give a RoPE model's config.json")
    hd, rot = head_dims(t, name)
    groups = layer_groups(d, name)
    for g in groups:
        sc = g['scaling']
        if not g['rope']:
            g.update(inv_freq=None, theta=None, attention_factor=1.0, L=None, factor=None, critical=None)
            continue
        try:
            inv, af = rope_inv_freq(hd, g['base'], sc, None, rot)
        except ValueError as e:
            raise InspectError(f"{name}: {e}") from None
        L = (sc or {}).get('original_max_position_embeddings') or t.get('max_position_embeddings')
        g.update(inv_freq=inv.tolist()[:rot // 2], theta=plain_inv_freq(rot, g['base']).tolist(),
                 attention_factor=af, L=L, factor=(sc or {}).get('factor'),
                 critical=critical_dimension(rot, g['base'], L) if L else None)
    return dict(model_type=t.get('model_type'), head_dim=hd, rotary_dim=rot,
                max_position_embeddings=t.get('max_position_embeddings'), groups=groups, temperatures=temperatures(t),
                fope=fope_reading(t, rot, groups[0].get('base'), name))


def fope_reading(d, rot, base, name):
    """FoPE's settings (Intern-S1-Pro; lab/fope.py) or None: how many of the rot / 2 pairs keep turning (num_inv_freq,
    else those with theta_i > 2 pi / max_position_embeddings: a full turn within the declared length) and its init."""
    rp = rope_dict(d)
    if not any(rp.get(k) is not None for k in FOPE_FIELDS):
        return None
    n, M = rp.get('num_inv_freq'), d.get('max_position_embeddings')
    if n is None and not (isinstance(M, int) and M > 0 and base):
        raise InspectError(f"{name}: FoPE keeps the pairs that turn within max_position_embeddings, which is "
                           f"{M!r}; the config needs it (a whole number) or num_inv_freq")
    kept = n if n is not None else sum(t > 2 * math.pi / M for t in plain_inv_freq(rot, base).tolist())
    return dict(kept=kept, pairs=rot // 2, init=rp.get('fope_init_factor'), sep_head=rp.get('fope_sep_head'))


# ----------------------------------------------------------------------------- the engines


def engine_readings(d):
    """[(engine, Reading or None, [warnings])] for the config's rope type, every engine of lab/hf/engines.py."""
    t = text_config(d)
    rp = rope_dict(t)
    per_type = rp and all(isinstance(v, dict) for v in rp.values())
    types = sorted({(v.get('rope_type') or v.get('type') or 'default') for v in rp.values()}) if per_type else \
        [rp.get('rope_type') or rp.get('type') or 'default']
    out = []
    for engine in ENGINES:
        for rtype in types:
            rows = readings(engine, rtype)
            row = rows[0] if rows else None
            fields = set(rp) if not per_type else {k for v in rp.values() for k in v}
            out.append((engine, rtype, row, warnings(row, fields, one_form(t))))
    return out


def one_form(d):
    """The config as the engines' precedence warnings should see it: when rope_scaling and rope_parameters say the same
    (lab.hf.export writes both), rope_parameters is left out, so no 'which one wins' warning fires."""
    a, b = d.get('rope_scaling'), d.get('rope_parameters')
    if not isinstance(a, dict) or not isinstance(b, dict):
        return d
    norm = lambda r: {('rope_type' if k == 'type' else k): v for k, v in r.items()  # noqa: E731
                      if k not in ('rope_theta', 'partial_rotary_factor') and v is not None}
    same = norm(a) == norm(b) and b.get('rope_theta', d.get('rope_theta')) == d.get('rope_theta', b.get('rope_theta'))
    return {k: v for k, v in d.items() if k != 'rope_parameters'} if same else d


def warnings(row, fields, top):
    """The row's warnings whose condition the config meets (lab.hf.engines.applies), and the fields it does not read."""
    if row is None:
        return ['no row in lab/hf/engines.py: the lab has not read how this engine treats this type']
    out = [msg for cond, msg in row.warn if applies(cond, fields, top)]
    ignored = sorted(fields - set(row.reads) - {'rope_type', 'type', 'rope_theta', 'partial_rotary_factor'})
    if row.supported and ignored:
        out.append(f"does not read {', '.join(ignored)}")
    return out


def claims_for(rope_type):
    """[(id, one line)] of the lab's records for a method (assets/test/claims/<id>.json)."""
    out = []
    for cid in METHOD_CLAIMS.get(rope_type or 'default', []):
        path = os.path.join(ROOT, CLAIMS, cid + '.json')
        if not os.path.isfile(path):
            continue
        with open(path, encoding='utf-8') as f:
            c = json.load(f)
        r, cmp = c['result'], c['comparison']
        word = r['verdict'] + (', inside the margin' if r.get('inside_margin') else '')
        out.append((cid, f"{cmp['a']} − {cmp['b']} at {cmp['column']}: {r['diff']:+.3f} [{r['ci'][0]:+.3f}, "
                         f"{r['ci'][1]:+.3f}] {word} ({os.path.basename(os.path.dirname(c['file']))})"))
    return out


# ----------------------------------------------------------------------------- printing


def layers_text(g, n):
    ls = g['layers']
    where = 'every layer' if len(ls) == n else f"{len(ls)} of {n} layers ({reprlib.repr(ls)})"
    kind = 'NoPE' if not g['rope'] else f"RoPE base {g['base']:g}"
    local = f", window {g['window']:,}" if g['window'] else f", chunk {g['chunk']:,}" if g['chunk'] else ''
    return f"{where}: {kind}{local}"


def report(info, engines=(), name=''):
    n = sum(len(g['layers']) for g in info['groups'])
    lines = [f"# {name}: {info['model_type'] or '?'}; head_dim {info['head_dim']}, rotary dims {info['rotary_dim']}"
             f"{' (partial rotation: the rest never turn)' if info['rotary_dim'] < info['head_dim'] else ''}; "
             f"max_position_embeddings {info['max_position_embeddings']}", '']
    for g in info['groups']:
        lines.append(f"## {layers_text(g, n)}")
        if not g['rope']:
            lines += ['no rotation: nothing to scale', '']
            continue
        sc = g['scaling'] or {'rope_type': 'default'}
        extra = {k: v for k, v in sc.items() if k not in ('rope_type', 'factor', 'original_max_position_embeddings',
                                                          'short_factor', 'long_factor')}
        lines.append(f"rope_type {sc['rope_type']}, factor s = {g['factor']}, L = {g['L']} (the length it reads), "
                     f"declared {info['max_position_embeddings']}" + (f"; {extra}" if extra else ''))
        M, s_, L_ = info['max_position_embeddings'], g['factor'], g['L']
        if sc['rope_type'] in ('yarn', 'longrope', 'llama3', 'linear') and M and s_ and L_ and abs(M - s_ * L_) > 0.5:
            lines.append(f"note: max_position_embeddings {M:,} is not s x L = {s_ * L_:,.0f}: transformers 5 warns for "
                         f"yarn; an engine sizes its context from max_position_embeddings (vLLM's max_model_len)")
        lines.append(f"attention factor {g['attention_factor']:.4f}: transformers multiplies cos and sin by it, so "
                     f"q.k on the rotary dims is x {g['attention_factor'] ** 2:.4f}")
        if g['critical']:
            d_extra, t_extra = g['critical']
            lines.append(f"critical dimension: {d_extra} of {info['rotary_dim']} rotary dims turn within L "
                         f"(plain RoPE is expected to break near {t_extra:,.0f} tokens)")
        ratio = [a / b for a, b in zip(g['inv_freq'], g['theta'])]
        lines.append("theta'/theta per pair (1 = kept, 1/s = interpolated): " + ' '.join(
            f"{r:.3g}" for r in ratio[:8]) + (' ... ' + ' '.join(f"{r:.3g}" for r in ratio[-4:]) if len(ratio) > 12
                                              else ' ' + ' '.join(f"{r:.3g}" for r in ratio[8:])))
        for cid, text in claims_for(sc['rope_type']):
            lines.append(f"measured here: {text}; {CLAIMS}/{cid}.json")
        lines.append('')
    for where, what, _ in info['temperatures']:
        lines.append(f"temperature on the {where}: {what}")
    if info['temperatures']:
        lines.append('')
    fope = info.get('fope')
    if fope:
        lines += [f"FoPE: {fope['kept']} of {fope['pairs']} pairs turn; each key/value head mixes their cos and sin "
                  f"through fixed matrices stored with the weights (fope_init_factor {fope['init']}, fope_sep_head "
                  f"{fope['sep_head']}); the other pairs stop. In this lab: attention='fope' over rope_type 'clip' "
                  f"(lab/fope.py). The engines differ on the stopped pairs (below).", '']
    if engines:
        lines.append('## how each engine reads it (lab/hf/engines.py)')
        for engine, rtype, row, warns in engines:
            if row is None:
                lines.append(f"- {engine}, {rtype}: " + '; '.join(warns))
                continue
            state = 'reads' if row.supported else 'HAS NO SUCH TYPE'
            lines.append(f"- {engine}, {rtype}: {state}; L from {row.L_from}; attention factor on {row.factor_on}. "
                         f"{row.note} [{row.source}; {row.checked}]")
            lines += [f"  WARNING: {w}" for w in warns]
    return '\n'.join(lines) + '\n'


def gguf_report(ref):
    """A GGUF as the lab (and llama.cpp) read it: its rope keys and the lab's reading of them."""
    from lab.hf.gguf import gguf_config, read_gguf
    from data.sources import gguf_file
    path = gguf_file() if ref in ('gguf:', 'gguf:smollm2') else ref[5:] if ref.startswith('gguf:') else ref
    try:
        reader = read_gguf(path)
        config, ctx = gguf_config(reader, os.path.basename(path))
    except (ValueError, OSError) as e:
        raise InspectError(f"{path}: {e}") from None
    hd = config.n_embd // config.n_head
    sc = config.rope_scaling
    inv, af = rope_inv_freq(hd, config.rope_base, sc)
    L = (sc or {}).get('original_max_position_embeddings') or ctx
    keys = {f.name: f for f in reader.fields.values() if '.rope.' in f.name or f.name.endswith('context_length')}
    lines = [f"# {os.path.basename(path)}: GGUF, head_dim {hd}, rope base {config.rope_base:g}, context {ctx:,}",
             f"rope keys: {', '.join(sorted(keys)) or 'none'}",
             f"the lab's reading: {sc['rope_type'] if sc else 'plain RoPE'} (attention factor {af:.4f}); "
             f"critical dimension {critical_dimension(hd, config.rope_base, L)[0]} of {hd} dims turn within {L:,}"]
    for cid, text in claims_for((sc or {}).get('rope_type', 'default')):
        lines.append(f"measured here: {text}; {CLAIMS}/{cid}.json")
    lines.append("llama.cpp reads these keys, and its flags override them (python -m lab.hf.export prints the "
                 "invocation for a chosen method); the Python engines read an HF folder's config.json instead")
    return '\n'.join(lines) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('config', help='config.json, an HF folder, hf:<folder>, gguf:smollm2 or a .gguf file')
    ap.add_argument('--json', action='store_true', help="print the lab's reading as JSON (no engines)")
    a = ap.parse_args(argv)
    d, kind, name = load(a.config)
    if kind == 'gguf':
        sys.stdout.write(gguf_report(name))
    elif a.json:
        print(json.dumps(describe(d, name), indent=1))
    else:
        sys.stdout.write(report(describe(d, name), engine_readings(d), name))
    return 0


if __name__ == '__main__':
    cli(main)
