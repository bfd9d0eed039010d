"""
What every exported Hugging Face folder needs, whatever its architecture (lab/hf/export.py writes GPT-NeoX,
lab/hf/export_llama.py the Llama family; both import this): the refusals every target shares (attention classes and
positions other than RoPE, rope types transformers has no type for), the lab's rope config in transformers' form
(hf_rope; rope_4x its 4.x twin), safetensors written with torch and the standard library, the tokenizer files of a
character or GPT-2 BPE run, and the folder written atomically with only the files an export may write.
"""
import json
import os
import struct
import sys

import torch

from data.common import atomic_write, atomic_write_text
from data.sources import CHAR_EOT, GPT2_EOT, gpt2_files_on_disk
from lab.hf.tokenizer import BYTE_LEVEL, bpe_tokenizer_json
from rope import plain_inv_freq
from rope_config import ROPE_SCALING, parse_layers, rope_inv_freq, scaled_theta

NATIVE = ('default', 'linear', 'dynamic', 'yarn', 'llama3', 'longrope')  # HF types with our name and our formulas
REFUSED = {  # rope types that transformers cannot express, and what to do instead
    'dynamic_yarn': "Dynamic YaRN (rope_type 'dynamic_yarn') has no Hugging Face counterpart: transformers' yarn is "
                    "static; export a static YaRN at the scale you need (--rope_type=yarn --factor=<s>), which is "
                    "Dynamic YaRN at l = s*L",
    **{t: f"rope_type {t!r} stops pairs from turning (theta = 0); GPT-NeoX's partial_rotary_factor rotates a share of "
          f"each head with the base spread over it, another function, so the export would change the model; "
          f"transformers' own 'proportional' (Gemma 4) is the model to port it to" for t in ('proportional', 'clip')},
}
ATTENTION_WHAT = {'gated': "gated attention: each head's output times a sigmoid gate, in neither GPT-NeoX nor Llama",
                  'smear_keys': 'smeared keys: each key mixed with the previous one',
                  'ssmax': "Scalable-Softmax: queries times a learned s ln n", 'sinks': 'a learned sink logit per head',
                  'logpos': "a learned log-position query scale, Mistral Large 4's own class"}
POS_EMB_FIX = {'alibi': 'ALiBi', 'fire': 'FIRE: a learned bias of the normalised distance',
               'cope': 'CoPE: positions that count the tokens gates open on', 'sinusoidal': 'sinusoidal positions',
               'learned': 'learned positions', 'none': 'no positions (NoPE)'}
FILES = ('config.json', 'generation_config.json', 'model.safetensors', 'README.md', 'vocab.json', 'merges.txt',
         'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json')  # what an export may write
def check_positions(args, arch):
    """Refuse (one line, naming it) an attention class other than causal, positions other than RoPE and learned
    RoPE frequencies: no export target (arch: the architecture written, for the message) has them."""
    attention = args.get('attention', 'causal')
    if attention != 'causal':
        what = next((w for k, w in ATTENTION_WHAT.items() if k in attention), 'its own attention class')
        raise ValueError(f"attention={attention!r} ({what}) has no {arch} counterpart; export a run trained with "
                         f"attention='causal'")
    pe = args.get('pos_emb', 'rope')
    if pe != 'rope':
        raise ValueError(f"pos_emb={pe!r} ({POS_EMB_FIX.get(pe, pe)}): {arch} has RoPE only; export a RoPE run "
                         f"(train.py --pos_emb=rope)")
    if args.get('learned_freqs'):
        raise ValueError(f"learned_freqs=True (RoPE's frequencies times a learned exp(alpha)) has no {arch} "
                         f"counterpart: no Hugging Face rope type carries alpha, only Mistral Large 4's own class; "
                         f"export a run without it")


def layer_kinds(args):
    """(the LayerSpecs of a run's layer pattern, {what it holds: present}): the per-layer designs an export target
    may have no counterpart for, each exporter refusing those its architecture cannot say (by these names)."""
    specs = parse_layers(args.get('layers'), args['n_layer'], args['rope_base'], args['block_size'])
    return specs, {'conv layers': any(s.conv for s in specs),  # (lab/conv.py)
                   'NoPE layers': any(not s.rope and not s.conv for s in specs),
                   'sliding windows': any(s.window for s in specs),
                   'chunked attention': any(s.chunk for s in specs),
                   'per-layer bases': any(s.base not in (None, args['rope_base']) for s in specs),
                   'windows on some layers only': len({s.window for s in specs}) > 1}


def check_rope_type(args):
    """Refuse (one line, with what to do instead) a rope config transformers has no type for (REFUSED, LongRoPE's
    n-hat, a length-dependent type of the lab's own): every export target reads transformers' types."""
    t = (args.get('rope_scaling') or {}).get('rope_type', 'default')
    if t in REFUSED:
        raise ValueError(REFUSED[t])
    n_hat = (args.get('rope_scaling') or {}).get('start_token_idx', 0)
    if n_hat:
        raise ValueError(f"rope_scaling['start_token_idx'] = {n_hat} (LongRoPE's n-hat: positions below it keep plain "
                         f"RoPE) has no Hugging Face counterpart: transformers' longrope scales every position; "
                         f"export a search run without it (search_longrope.py --search_start_tokens=0)")
    if t not in NATIVE and ROPE_SCALING[t].dynamic:
        raise ValueError(f"rope_type {t!r} depends on the input length in a way transformers has no type for; "
                         f"export a static type (--rope_type=...)")


def hf_rope(head_dim, base, scaling, L, block_size):
    """The lab's rope (base, rope_scaling, training length L) -> (rope_parameters, max_position_embeddings) for
    transformers 5, so that HF computes the frequencies and attention factor of rope_config.rope_inv_freq."""
    sc = scaling or {'rope_type': 'default'}
    t, s = sc['rope_type'], sc.get('factor', 1.0)
    L = sc.get('original_max_position_embeddings', L)
    rp = {'rope_type': t, 'rope_theta': float(base), 'partial_rotary_factor': 1.0}
    if t == 'default':
        return rp, block_size
    if t in ('ntk', 'abf'):  # NTK-aware and ABF are plain RoPE with a raised base
        rp.update(rope_type='default', rope_theta=sc['new_base'] if t == 'abf' else
                  float(base) * s ** (head_dim / (head_dim - 2)))
        return rp, round(s * L)
    if t in ('linear', 'dynamic'):
        rp['factor'] = s
        return rp, (L if t == 'dynamic' else round(s * L))  # dynamic: HF's L is max_position_embeddings
    rp.update(factor=s, original_max_position_embeddings=L)
    if t in NATIVE:  # yarn, llama3, longrope: the type's own keys as they are
        rp.update({k: v for k, v in sc.items() if k in ROPE_SCALING[t].keys
                   and k not in ('start_token_idx', 'attention_factor_on')})  # (the placement: HF's, checked)
        if t == 'longrope':
            rp['attention_factor'] = rope_inv_freq(head_dim, base, sc)[1]
        return rp, round(s * L)
    theta_new, af = scaled_theta(head_dim, base, sc, L)  # float64: a static per-pair curve
    f = (plain_inv_freq(head_dim, base) / theta_new).tolist()
    rp.update(rope_type='longrope', short_factor=f, long_factor=list(f), attention_factor=float(af))
    return rp, round(s * L)


def rope_4x(rp):
    """transformers 4.x's rope_scaling for 5.x rope_parameters rp (None for plain RoPE; rope_theta goes at the top)."""
    return None if rp['rope_type'] == 'default' else \
        {'type': rp['rope_type'], **{k: v for k, v in rp.items() if k not in ('rope_theta', 'partial_rotary_factor')}}


ST_DTYPES = {torch.float32: ('F32', torch.int32), torch.float16: ('F16', torch.int16),
             torch.bfloat16: ('BF16', torch.int16), torch.float64: ('F64', torch.int64)}
def write_safetensors(path, tensors, metadata=None):
    """The safetensors format by hand: 8-byte little-endian header length, a JSON header {name: dtype, shape,
    data_offsets}, then each tensor's raw little-endian bytes in order. Written atomically."""
    header, offset = {}, 0
    for name, t in tensors.items():
        if t.dtype not in ST_DTYPES:
            raise ValueError(f"weight {name} is {t.dtype}; safetensors export takes {', '.join(map(str, ST_DTYPES))}")
        n = t.numel() * t.element_size()
        header[name] = {'dtype': ST_DTYPES[t.dtype][0], 'shape': list(t.shape), 'data_offsets': [offset, offset + n]}
        offset += n
    header['__metadata__'] = {'format': 'pt', **(metadata or {})}
    head = json.dumps(header, separators=(',', ':')).encode('utf-8')
    head += b' ' * (-len(head) % 8)  # the data starts 8-byte aligned

    def write(f):
        f.write(struct.pack('<Q', len(head)) + head)
        for t in tensors.values():
            a = t.contiguous().view(ST_DTYPES[t.dtype][1]).numpy()
            f.write((a.byteswap() if sys.byteorder == 'big' else a).tobytes())
    atomic_write(path, write)


def read_safetensors_header(path):
    """{name: {dtype, shape, data_offsets}} of a safetensors file (for checks; no weights are read)."""
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        return json.loads(f.read(n))


def char_tokenizer_json(itos):
    """A tokenizers-library tokenizer.json for a character vocabulary: BPE without merges over the whole text, so
    every character is its own token; the Fuse decoder joins them back without spaces."""
    return {'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': [], 'normalizer': None,
            'pre_tokenizer': None, 'post_processor': None, 'decoder': {'type': 'Fuse'},
            'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None,
                      'end_of_word_suffix': None, 'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                      'vocab': {c: i for i, c in enumerate(itos)}, 'merges': []}}


def gpt2_tokenizer_json(found):
    """GPT-2's BPE (its encoder.json and vocab.bpe, as gpt2_files_on_disk gives them) as one tokenizer.json: GPT-2's
    split (ByteLevel, use_regex) and <|endoftext|> as a special token."""
    merges = [m for m in found['vocab.bpe'].decode('utf-8').split('\n')[1:] if m.strip()]  # (line 0: #version)
    return bpe_tokenizer_json(json.loads(found['encoder.json']), merges, [(GPT2_EOT, '<|endoftext|>')], BYTE_LEVEL)


def tokenizer_files(ds, M):
    """({file name: text or bytes}, eot id or None, README lines) for a checkpoint's 'dataset' entry."""
    kind = ds.get('tokenizer')
    if kind == 'char' and ds.get('itos'):
        itos = ds['itos']
        eot = itos.index(CHAR_EOT) if CHAR_EOT in itos else None
        js = lambda o: json.dumps(o, ensure_ascii=False, indent=1) + '\n'
        special = {'eos_token': CHAR_EOT} if eot is not None else {}
        files = {'vocab.json': js({c: i for i, c in enumerate(itos)}), 'tokenizer.json': js(char_tokenizer_json(itos)),
                 'tokenizer_config.json': js({'tokenizer_class': 'PreTrainedTokenizerFast', 'model_max_length': M,
                                              'clean_up_tokenization_spaces': False, **special})}
        return files, eot, ['Characters: `vocab.json` maps each character to its id (id 0, "\\u0000", ends a '
                            'document); `AutoTokenizer` reads `tokenizer.json` (one token per character).']
    if kind == 'gpt2':
        found = gpt2_files_on_disk()
        if found is None:
            return {}, GPT2_EOT, ["GPT-2 BPE: this machine had no copy of GPT-2's tokenizer files, so none are "
                                  "here. Use `AutoTokenizer.from_pretrained('openai-community/gpt2')`, or copy its "
                                  "`vocab.json` and `merges.txt` into this folder (or run `python data/shakespeare/"
                                  "prepare.py`, which fetches them, and export again)."]
        tok = '<|endoftext|>'
        cfg = {'tokenizer_class': 'GPT2Tokenizer', 'bos_token': tok, 'eos_token': tok, 'unk_token': tok,
               'add_prefix_space': False, 'add_bos_token': False, 'model_max_length': M,
               'clean_up_tokenization_spaces': False}
        special = json.dumps({k: tok for k in ('bos_token', 'eos_token', 'unk_token')}) + '\n'
        return {'vocab.json': found['encoder.json'], 'merges.txt': found['vocab.bpe'],
                'tokenizer.json': json.dumps(gpt2_tokenizer_json(found), ensure_ascii=False) + '\n',
                'tokenizer_config.json': json.dumps(cfg, indent=1) + '\n', 'special_tokens_map.json': special}, \
            GPT2_EOT, ["GPT-2 BPE: `vocab.json` and `merges.txt` are GPT-2's own files (sha256-verified), and "
                       "`tokenizer.json` the same BPE in one file (which `hf:` loading in this lab reads); "
                       "`AutoTokenizer` reads them."]
    return {}, None, ["The checkpoint does not record its tokenizer; token ids are the training data's."]


def write_folder(out_dir, weights, files, may_write=FILES):
    """Write an export: model.safetensors and files ({name: text or bytes}), each atomically; a previous export's
    files (of may_write) that this one does not write are removed."""
    os.makedirs(out_dir, exist_ok=True)
    for stale in set(may_write) - set(files) - {'model.safetensors'}:  # a previous export's files we do not write now
        if os.path.isfile(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    write_safetensors(os.path.join(out_dir, 'model.safetensors'), weights, {'source': 'longctx lab.hf.export'})
    for name, content in files.items():
        path = os.path.join(out_dir, name)
        if isinstance(content, bytes):
            atomic_write(path, lambda f, c=content: f.write(c))
        else:
            atomic_write_text(path, content)
