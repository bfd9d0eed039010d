"""
A real model's own tokenizer, built from its GGUF file (SmolLM2-135M's: tokenizer.ggml.model = gpt2, a byte-level
BPE of 49,152 tokens and 48,900 merges) or from a Hugging Face folder's tokenizer.json, run by tiktoken: no
hand-written BPE. Both readers feed one class, ByteLevelBPE (tokens by id, merges, special ids, pre-split regex, eos).

  the tokens     are written in GPT-2's bytes-to-unicode spelling ('Ġthe' is b' the'); spelled back to bytes
  the merges     Hugging Face applies the merge list in its order; tiktoken merges by the rank of the merged bytes. So
                 each single byte gets a rank first, then each merge's result the rank of its place in the list, and
                 tiktoken's ranks are mapped back to the model's ids (for SmolLM2 a shift: its ids are already in
                 merge order, the 17 control tokens, then the 235 bytes at 17-251, then merge k at 252 + k)
  the pre-split  the regex tokenizer.ggml.pre names. For 'smollm' that is GPT-2's regex with every digit split off
                 first (\\p{N} alone), as llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM does (checked there against SmolLM's
                 own Hugging Face tokenizer, whose tokenizer.json runs Digits(individual_digits) before ByteLevel);
                 transformers 5.24's GGUF converter knows no 'smollm' and keeps GPT-2's regex. The vocabulary agrees:
                 no token but '0'-'9' holds a digit, as a tokenizer trained on digits split one by one leaves it.
                 The two differ only where whitespace precedes a digit ('a  12': ['a', '  ', '1', '2'] here, ['a',
                 ' ', ' ', '1', '2'] in transformers); tests/test_tokenizer.py
  special tokens the control tokens (<|endoftext|>, <|im_start|>, ...) are never made by encode: text that spells one
                 stays text (encode_ordinary, as data/shakespeare encodes); decode writes them out

A tokenizer.json (what an hf:<folder> checkpoint names in 'tokenizer_file') is read when it is byte-level BPE:

  model          type 'BPE', vocab {token: id} in the same byte spelling, merges as 'a b' strings or [a, b] pairs
                 (newer files write pairs); byte_fallback, a subword prefix / word suffix or dropout are refused
  added_tokens   the special tokens (special or not): written out by decode as their content, never made by encode.
                 (Hugging Face's encode matches them in the text even with add_special_tokens=False; here text that
                 spells one stays text, as for the GGUF's control tokens)
  pre_tokenizer  ByteLevel(use_regex=true) -> GPT-2's regex; Sequence[Digits(individual_digits=true),
                 ByteLevel(use_regex=true)] (SmolLM / SmolLM2) -> the digit-split regex; Sequence[Split(pattern
                 {Regex: R}, behavior Isolated), ByteLevel(use_regex=false)] (Llama 3, Qwen2) -> R itself, checked
                 on every encode to cover the whole text (tiktoken drops what its regex does not match)
  normalizer     none, or a Unicode normal form (Qwen2's NFC), applied with unicodedata before the split
Anything else (a WordPiece or Unigram model, Metaspace and other sentencepiece-style pre-tokenizers, normalizers that
rewrite text) is refused in one line naming the file and the field.

The other way, gguf_tokenizer_files writes a GGUF's byte-level BPE as a Hugging Face tokenizer.json (its pre-split as
the pre_tokenizer that pre_split reads back) with tokenizer_config.json, for lab/hf/export_llama.py.

This module fills data.sources.TOKENIZERS with 'gguf' and 'hf' (get_tokenizer imports it on first use; a dataset's meta
names the file in 'tokenizer_file'; a GGUF by its absolute path and 'tokenizer_sha256', found from any folder: at that
path, else in the cache dir by name or sha256, data.sources.find_gguf), which is how the rooms and sample.py reach
them. run_tokenizer fills the file in for a run that does not record it (from its data's meta.json or its base).
"""
import functools
import json
import os
import unicodedata

import numpy as np

from data.common import DataError
from data.sources import TOKENIZERS, find_gguf, gguf_identity

# GPT-2's pre-tokenizer regex (tiktoken's r50k form: possessive quantifiers, the same splits)
GPT2_SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
# the same with every digit a piece of its own first: a whitespace run before a digit is then one piece, as it is at
# the end of the text (\s+(?=\p{N})), and no piece holds a digit and anything else
DIGITS_SPLIT = r"""\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?[^\s\p{L}\p{N}]++|\s+(?=\p{N})|\s++$|\s+(?!\S)|\s"""
PRE_SPLITS = {'gpt2': GPT2_SPLIT, 'smollm': DIGITS_SPLIT}  # tokenizer.ggml.pre -> its regex
CONTROL = 3  # tokenizer.ggml.token_type of a control (special) token


def byte_spelling():
    """GPT-2's bytes-to-unicode table {character: byte}: printable bytes stand for themselves, the others for
    chr(256 + n) in byte order (' ' is 'Ġ', '\\n' is 'Ċ')."""
    keep = [*range(ord('!'), ord('~') + 1), *range(ord('¡'), ord('¬') + 1), *range(ord('®'), ord('ÿ') + 1)]
    moved = [b for b in range(256) if b not in keep]
    return {**{chr(b): b for b in keep}, **{chr(256 + n): b for n, b in enumerate(moved)}}


def spelled_bytes(token, spell):
    """A vocabulary entry's bytes: spelled back when every character is in the spelling (as transformers' GGUF
    converter reads them), else its own UTF-8 (a control token such as '<|endoftext|>' is written as it reads)."""
    return bytes(spell[c] for c in token) if all(c in spell for c in token) else token.encode('utf-8')


def read_gguf_vocab(path):
    """The tokenizer metadata of a GGUF file: dict(tokens [str], merges [str 'a b'], types [int], model, pre, fields:
    the reader's fields, for the other keys), read with gguf.GGUFReader. DataError naming the file when it is not a
    GGUF or holds no byte-level BPE."""
    from gguf import GGUFReader
    try:
        fields = GGUFReader(path).fields
    except Exception as e:  # not a GGUF, truncated, ...
        raise DataError(f"{path} could not be read as a GGUF file ({str(e)[:120] or type(e).__name__}); "
                        f"pass a GGUF file, or none for the pinned SmolLM2 one") from None

    def strings(key):
        f = fields.get(key)
        return None if f is None else [bytes(f.parts[i]).decode('utf-8') for i in f.data]
    model = (strings('tokenizer.ggml.model') or [None])[0]
    if model != 'gpt2' or 'tokenizer.ggml.merges' not in fields:
        raise DataError(f"{path} holds no byte-level BPE (tokenizer.ggml.model {model!r}, merges "
                        f"{'tokenizer.ggml.merges' in fields}); only model 'gpt2' with its merges can be read here")
    types, eos = fields.get('tokenizer.ggml.token_type'), fields.get('tokenizer.ggml.eos_token_id')
    tokens = strings('tokenizer.ggml.tokens')
    return dict(tokens=tokens, merges=strings('tokenizer.ggml.merges'), model=model,
                pre=(strings('tokenizer.ggml.pre') or ['gpt2'])[0], eos=None if eos is None else int(eos.parts[-1][0]),
                types=[int(types.parts[i][0]) for i in types.data] if types else [1] * len(tokens), fields=fields)


def bpe_ranks(tokens, merges, special):
    """tiktoken's mergeable ranks from a merge list ('a b' strings or (a, b) pairs): {token bytes: rank}, the
    single-byte tokens first (in id order), then the result of merge k at rank n_bytes + k, and ids [rank] -> the
    model's token id. ValueError when a merge makes a token that is not in the vocabulary."""
    spell = byte_spelling()
    index = {t: i for i, t in enumerate(tokens)}
    order = [i for i, t in enumerate(tokens) if len(spelled_bytes(t, spell)) == 1 and i not in special]
    for m in merges:
        a, b = m.split(' ') if isinstance(m, str) else m  # 'a b', or a pair [a, b] as newer tokenizer.json files write
        if a + b not in index:
            raise ValueError(f"merge {m!r} makes {a + b!r}, which is not a token")
        order.append(index[a + b])
    ranks = {spelled_bytes(tokens[i], spell): r for r, i in enumerate(order)}
    return ranks, np.array(order, dtype=np.int64)


class ByteLevelBPE:
    """A byte-level BPE run by tiktoken: encode(text) -> list[int] (plain text: specials stay text), decode(ids) -> str
    (invalid UTF-8 replaced), token_bytes(id), vocab_size, eot_token (<|endoftext|>'s id, else eos, else None),
    special_tokens {text: id}, pre (the name of the pre-split), name.

    Built from tokens (by id, in GPT-2's byte spelling; '' for an id that holds none), merges ('a b' or (a, b), in
    order), special (the ids written as their own text and never made by encode), pat_str (the pre-split regex),
    eos (an id or None). normalize: a function applied to the text first (None: none); check_cover: check that the
    regex left no text out (see encode)."""
    kind = 'bpe'  # the prefix of the tiktoken Encoding's name

    def __init__(self, name, tokens, merges, special, pat_str, eos=None, pre=None, normalize=None, check_cover=False):
        import tiktoken
        spell, special = byte_spelling(), set(special)
        self.name, self.pre, self.vocab_size = name, pre, len(tokens)
        self.special_tokens = {tokens[i]: i for i in sorted(special)}
        ranks, self._ids = bpe_ranks(tokens, merges, special)
        self._enc = tiktoken.Encoding(f'{self.kind}:{name}', pat_str=pat_str, mergeable_ranks=ranks, special_tokens={})
        self._bytes = [t.encode('utf-8') if i in special else spelled_bytes(t, spell) for i, t in enumerate(tokens)]
        have = {b[0] for b in ranks if len(b) == 1}
        self._missing = [bytes([b]) for b in range(256) if b not in have]  # no token spells them: tiktoken would panic
        self.eot_token = self.special_tokens.get('<|endoftext|>', eos)
        self._normalize = normalize
        self._lengths = np.array([len(b) for b in self._bytes], dtype=np.int64) if check_cover else None

    def encode(self, text):
        """The token ids of text as plain text (a special token's spelling is encoded as text). DataError naming the
        character when the text needs a byte that no token spells (the vocabulary cannot write it), and, with
        check_cover, when the pre-split regex matched less than the whole text (tiktoken would drop the rest)."""
        if self._normalize is not None:
            text = self._normalize(text)
        data = text.encode('utf-8', 'surrogatepass')
        if any(b in data for b in self._missing):
            c = next(c for c in text if any(b in c.encode('utf-8', 'surrogatepass') for b in self._missing))
            raise DataError(f"character {c!r} (U+{ord(c):04X}) cannot be written in the vocabulary of {self.name} "
                            f"(no token holds its UTF-8 bytes); remove it from the text")
        ids = self._ids[self._enc.encode_ordinary(text)]
        if self._lengths is not None and int(self._lengths[ids].sum()) != len(data):
            raise DataError(f"the pre-tokenizer regex of {self.name} leaves part of the text {text[:40]!r} "
                            f"unmatched (tiktoken would drop it, Hugging Face keeps it as a piece); tiktoken cannot run "
                            f"this regex")
        return ids.tolist()

    encode_ordinary = encode

    def token_bytes(self, i):
        return self._bytes[int(i)]

    def decode(self, ids):
        """The text of ids (bytes joined, then UTF-8 with invalid sequences replaced); special tokens as written."""
        return b''.join(self._bytes[int(i)] for i in ids).decode('utf-8', errors='replace')


class GGUFTokenizer(ByteLevelBPE):
    """A GGUF's byte-level BPE (ByteLevelBPE; pre is the tokenizer.ggml.pre it splits text as, name the file's
    basename); the control tokens (token_type 3) are its special tokens."""
    kind = 'gguf'

    def __init__(self, path):
        v = read_gguf_vocab(path)
        if v['pre'] not in PRE_SPLITS:
            raise DataError(f"{path}: tokenizer.ggml.pre {v['pre']!r} is not one this tokenizer knows "
                            f"({', '.join(sorted(PRE_SPLITS))}); add its regex to lab/hf/tokenizer.py PRE_SPLITS")
        super().__init__(os.path.basename(path), v['tokens'], v['merges'],
                         [i for i, k in enumerate(v['types']) if k == CONTROL], PRE_SPLITS[v['pre']], v['eos'],
                         pre=v['pre'])
        if self.eot_token is None:
            raise DataError(f"{path} has no <|endoftext|> token and no tokenizer.ggml.eos_token_id; "
                            f"there is no end-of-document token to separate documents with")


# ----------------------------------------------------------------------------- a Hugging Face folder's tokenizer.json

NORMAL_FORMS = ('NFC', 'NFD', 'NFKC', 'NFKD')  # normalizers that unicodedata applies exactly
SUPPORTED_PRE = ("ByteLevel(use_regex=true), Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)] or "
                 "Sequence[Split(pattern {Regex}, behavior Isolated), ByteLevel(use_regex=false)]")


def shape(node):
    """A pre-tokenizer or normalizer as a short name: 'Metaspace', 'Sequence[Split, ByteLevel]', 'null'."""
    if not isinstance(node, dict):
        return json.dumps(node)[:40]
    parts = node.get('pretokenizers', node.get('normalizers'))
    return f"{node.get('type')}[{', '.join(shape(p) for p in parts)}]" if isinstance(parts, list) else \
        str(node.get('type'))


def pre_split(pre, path):
    """(name, regex, whether the regex is the file's own) for a tokenizer.json's pre_tokenizer; DataError otherwise."""
    def refuse(why):
        return DataError(f"{path}: pre_tokenizer {why}; supported: {SUPPORTED_PRE} (byte-level BPE as GPT-2, SmolLM, "
                         f"Llama 3 and Qwen2 write it)")

    def byte_level(p, regex):
        return (isinstance(p, dict) and p.get('type') == 'ByteLevel' and not p.get('add_prefix_space', False)
                and bool(p.get('use_regex', True)) == regex)
    parts = pre.get('pretokenizers') if isinstance(pre, dict) and pre.get('type') == 'Sequence' else None
    first, last = (parts[0] if isinstance(parts[0], dict) else {}, parts[1]) \
        if isinstance(parts, list) and len(parts) == 2 else ({}, None)
    if byte_level(pre, True):
        return 'gpt2', GPT2_SPLIT, False
    if first.get('type') == 'Digits' and first.get('individual_digits') is True and byte_level(last, True):
        return 'digits', DIGITS_SPLIT, False
    if first.get('type') == 'Split' and byte_level(last, False):
        split, pattern = first, first.get('pattern')
        if not (isinstance(pattern, dict) and isinstance(pattern.get('Regex'), str)):
            raise refuse(f"Split pattern {json.dumps(pattern)[:60]} is not {{\"Regex\": ...}}")
        if split.get('behavior') != 'Isolated' or split.get('invert', False):
            raise refuse(f"Split behavior {split.get('behavior')!r}, invert {split.get('invert')!r} (only Isolated, "
                         f"not inverted)")
        return 'split', pattern['Regex'], True
    extra = ''
    if isinstance(pre, dict) and pre.get('type') == 'ByteLevel':
        extra = f" (add_prefix_space {pre.get('add_prefix_space')}, use_regex {pre.get('use_regex', True)})"
    raise refuse(f"{shape(pre)}{extra} is not one this reader knows")


def read_tokenizer_json(path):
    """A tokenizer.json's byte-level BPE as ByteLevelBPE's arguments: dict(tokens, merges, special, pat_str, pre,
    normalize, check_cover). DataError naming the file and the field for anything it cannot run exactly."""
    try:
        with open(path, encoding='utf-8') as f:
            d = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} could not be read as JSON ({str(e)[:120]}); restore the folder's tokenizer.json") \
            from None
    model = d.get('model') if isinstance(d, dict) else None
    if not isinstance(model, dict):
        raise DataError(f"{path}: no 'model' object; this is not a Hugging Face tokenizer.json")
    only = ("only byte-level BPE (model.type 'BPE' with a ByteLevel pre-tokenizer, as GPT-2, SmolLM, Llama 3 and "
            "Qwen2 write) is supported")
    kind = model.get('type', 'BPE' if 'merges' in model else None)
    if kind != 'BPE':
        raise DataError(f"{path}: model.type {kind!r}; {only}")
    if model.get('byte_fallback'):
        raise DataError(f"{path}: model.byte_fallback is true (a sentencepiece-style BPE, as Llama 2 and Mistral "
                        f"write); {only}")
    for key in ('continuing_subword_prefix', 'end_of_word_suffix', 'dropout'):
        if model.get(key):
            raise DataError(f"{path}: model.{key} is {model[key]!r}; {only}, without it")
    vocab, merges = model.get('vocab'), model.get('merges')
    if not isinstance(vocab, dict) or not vocab or not all(isinstance(i, int) and i >= 0 for i in vocab.values()):
        raise DataError(f"{path}: model.vocab is not an object of token -> id (ids >= 0)")
    if not isinstance(merges, list) or not all(
            isinstance(m, str) and m.count(' ') == 1 or isinstance(m, list) and len(m) == 2 and
            all(isinstance(x, str) for x in m) for m in merges):
        raise DataError(f"{path}: model.merges is not a list of 'a b' strings or [a, b] pairs")
    added = d.get('added_tokens') or []
    if not isinstance(added, list) or not all(isinstance(a, dict) and isinstance(a.get('id'), int) and a['id'] >= 0
                                              and isinstance(a.get('content'), str) for a in added):
        raise DataError(f"{path}: added_tokens is not a list of {{id, content, special}} objects")
    norm = d.get('normalizer')
    if norm is not None and not (isinstance(norm, dict) and norm.get('type') in NORMAL_FORMS):
        raise DataError(f"{path}: normalizer {shape(norm)} changes the text before it is split; supported: none or "
                        f"a Unicode normal form ({', '.join(NORMAL_FORMS)})")
    pre, pat_str, own = pre_split(d.get('pre_tokenizer'), path)
    special = {a['id']: a['content'] for a in added}
    tokens = [''] * (max([*vocab.values(), *special]) + 1)
    for t, i in vocab.items():
        if tokens[i]:
            raise DataError(f"{path}: model.vocab gives id {i} to both {tokens[i]!r} and {t!r}")
        tokens[i] = t
    for i, t in special.items():
        tokens[i] = t
    return dict(tokens=tokens, merges=merges, special=sorted(special), pat_str=pat_str, pre=pre, check_cover=own,
                normalize=None if norm is None else functools.partial(unicodedata.normalize, norm['type']))


def char_vocabulary(path):
    """The characters of a character-level tokenizer.json (lab/hf/folder.py's char_tokenizer_json: BPE with no
    merges, no pre-tokenizer, normalizer or added tokens, every token one character, ids 0..n-1), as the itos list a
    character run's 'dataset' entry holds; None for any other tokenizer.json (read_tokenizer_json reads those)."""
    try:
        with open(path, encoding='utf-8') as f:
            d = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    model = d.get('model') if isinstance(d, dict) else None
    if not isinstance(model, dict) or model.get('type') != 'BPE' or model.get('merges') != [] or any(
            d.get(k) for k in ('pre_tokenizer', 'normalizer', 'added_tokens', 'post_processor')):
        return None
    vocab = model.get('vocab')
    if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))) or any(
            not isinstance(c, str) or len(c) != 1 for c in vocab):
        return None
    return sorted(vocab, key=vocab.get)


class HFTokenizer(ByteLevelBPE):
    """A Hugging Face tokenizer.json's byte-level BPE (ByteLevelBPE; see the module docstring). name: '<folder>/
    tokenizer.json'; pre: 'gpt2', 'digits' or 'split'; eot_token: <|endoftext|>, else eos (the folder's config.json
    eos_token_id when not given), else None. Ids past its tokens (a model's padded embedding rows, as Qwen2's) decode
    to nothing."""
    kind = 'hf'

    def __init__(self, path, eos=None):
        v = read_tokenizer_json(path)
        if eos is None:
            eos = folder_eos(os.path.dirname(path))
        name = os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
        try:
            super().__init__(name, v['tokens'], v['merges'], v['special'], v['pat_str'], eos, pre=v['pre'],
                             normalize=v['normalize'], check_cover=v['check_cover'])
        except DataError:
            raise
        except ValueError as e:  # a merge that makes no token; a regex tiktoken cannot compile
            field = 'model.merges' if 'which is not a token' in str(e) else 'pre_tokenizer Split pattern'
            raise DataError(f"{path}: {field}: {str(e).splitlines()[0][:160]}") from None

    def decode(self, ids):
        n = self.vocab_size
        return b''.join(self._bytes[int(i)] for i in ids if int(i) < n).decode('utf-8', errors='replace')


def folder_eos(folder):
    """config.json's eos_token_id in folder (the first of a list), or None when there is none to read."""
    try:
        with open(os.path.join(folder, 'config.json'), encoding='utf-8') as f:
            eos = json.load(f).get('eos_token_id')
    except (OSError, ValueError, AttributeError):
        return None
    eos = eos[0] if isinstance(eos, list) and eos else eos
    return eos if isinstance(eos, int) and not isinstance(eos, bool) else None


@functools.lru_cache(maxsize=4)
def _hf_tokenizer_at(path, mtime):
    return HFTokenizer(path)


def hf_tokenizer(path):
    """The tokenizer of a tokenizer.json, or of a Hugging Face folder holding one (built once per file and process).
    DataError naming the folder when there is no tokenizer.json."""
    if os.path.isdir(path) or not path.endswith('.json'):
        path = os.path.join(path, 'tokenizer.json')
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{os.path.dirname(path)} has no {os.path.basename(path)}; copy the model's tokenizer.json "
                        f"beside its config.json")
    return _hf_tokenizer_at(path, os.path.getmtime(path))


def hf_meta_tokenizer(meta, cache_dir=None):
    """data.sources.get_tokenizer's entry for meta['tokenizer'] == 'hf' (an hf:<folder> checkpoint): (encode, decode)
    of meta['tokenizer_file'] (the folder's tokenizer.json). Its tokens must fit the meta's vocab_size, the model's
    embedding rows, which may be more (Qwen2 pads them)."""
    if not meta.get('tokenizer_file'):
        raise DataError(f"dataset {meta.get('dataset')!r} (tokenizer 'hf') names no tokenizer_file: the Hugging Face "
                        f"folder it came from has no tokenizer.json; copy the model's tokenizer.json there")
    tok = hf_tokenizer(meta['tokenizer_file'])
    if meta.get('vocab_size') is not None and tok.vocab_size > meta['vocab_size']:
        raise DataError(f"{tok.name} has {tok.vocab_size} tokens but dataset {meta.get('dataset')!r} says vocab_size "
                        f"{meta['vocab_size']} (the model's embedding rows); use the tokenizer.json of this model")
    return tok.encode, tok.decode


@functools.lru_cache(maxsize=4)
def _tokenizer_at(path, mtime):
    return GGUFTokenizer(path)


def gguf_tokenizer(path=None, cache_dir=None, sha256=None):
    """The tokenizer of a GGUF file (built once per file and process): path as data.sources.gguf_file takes it (None
    or 'smollm2': the pinned SmolLM2 file, fetched and checked; a path; a file name in the cache dir); with sha256 (a
    recorded tokenizer: data.sources.gguf_identity), the file of that sha256 at path or in the cache dir
    (data.sources.find_gguf)."""
    path = os.path.abspath(find_gguf(path, sha256, cache_dir))
    return _tokenizer_at(path, os.path.getmtime(path))


def meta_tokenizer(meta, cache_dir=None):
    """data.sources.get_tokenizer's entry for meta['tokenizer'] == 'gguf': (encode, decode) of meta['tokenizer_file']
    (found by its path and meta['tokenizer_sha256'] when recorded), checked against the meta's vocab_size."""
    tok = gguf_tokenizer(meta['tokenizer_file'], cache_dir, meta.get('tokenizer_sha256'))
    if meta.get('vocab_size') not in (None, tok.vocab_size):
        raise DataError(f"{tok.name} has {tok.vocab_size} tokens but dataset {meta.get('dataset')!r} says vocab_size "
                        f"{meta['vocab_size']}; prepare the data again with this file")
    return tok.encode, tok.decode


def run_tokenizer(ckpt):
    """A checkpoint's 'dataset' entry with a model's own tokenizer file filled in where the entry lacks it (a run saved
    before train.py recorded it): from the meta.json of the data it trained on ('data_dir'), else from the base its
    lineage names (gguf:<file>: that file; hf:<folder>: its tokenizer.json). Any other entry is returned as it is."""
    ds = dict(ckpt.get('dataset') or {})
    if ds.get('tokenizer') not in ('gguf', 'hf') or ds.get('tokenizer_file'):
        return ds
    prefix, sep, rest = str((ckpt.get('lineage') or {}).get('base_checkpoint') or '').partition(':')
    if ds['tokenizer'] == 'hf':
        tok = os.path.join(rest, 'tokenizer.json')
        return dict(ds, tokenizer_file=os.path.abspath(tok)) if sep and prefix == 'hf' and os.path.isfile(tok) else ds
    meta = os.path.join(ds.get('data_dir') or '', 'meta.json')
    if ds.get('data_dir') and os.path.isfile(meta):
        try:
            with open(meta, encoding='utf-8') as f:
                got = json.load(f)
        except (OSError, ValueError):
            got = {}
        if isinstance(got, dict) and got.get('tokenizer') == 'gguf' and got.get('tokenizer_file'):
            return dict(ds, **{k: got[k] for k in ('tokenizer_file', 'tokenizer_sha256') if got.get(k)})
    if sep and prefix == 'gguf':
        from data.sources import gguf_file
        return dict(ds, **gguf_identity(gguf_file(rest or None)))
    return ds


def gguf_path(ds, cache_dir=None):
    """The GGUF file a 'dataset' entry's tokenizer names (its path and sha256; data.sources.find_gguf), or None when
    the entry is not a GGUF tokenizer or names no file."""
    if ds.get('tokenizer') != 'gguf' or not ds.get('tokenizer_file'):
        return None
    return os.path.abspath(find_gguf(ds['tokenizer_file'], ds.get('tokenizer_sha256'), cache_dir))


# ----------------------------------------------------------------------------- a GGUF's BPE as a tokenizer.json

BYTE_LEVEL = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
HF_PRE_TOKENIZERS = {  # tokenizer.ggml.pre -> the pre_tokenizer that splits as PRE_SPLITS' regex (pre_split reads it)
    'gpt2': BYTE_LEVEL,
    'smollm': {'type': 'Sequence', 'pretokenizers': [{'type': 'Digits', 'individual_digits': True}, BYTE_LEVEL]}}


def bpe_tokenizer_json(vocab, merges, special, pre_tokenizer):
    """A byte-level BPE as a tokenizers-library tokenizer.json object (what read_tokenizer_json reads back): vocab
    {token: id}, merges in order, special [(id, content)] as special added tokens, the pre_tokenizer that splits the
    text; ByteLevel post-processing and decoding. A GGUF's BPE (gguf_tokenizer_files) and GPT-2's (an export of a GPT-2
    run, lab/hf/folder.py) are written by it."""
    added = [{'id': i, 'content': c, 'single_word': False, 'lstrip': False, 'rstrip': False, 'normalized': False,
              'special': True} for i, c in special]
    return {'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': added, 'normalizer': None,
            'pre_tokenizer': pre_tokenizer,
            'post_processor': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': False, 'use_regex': True},
            'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True, 'use_regex': True},
            'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None,
                      'end_of_word_suffix': None, 'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                      'vocab': vocab, 'merges': merges}}


def gguf_tokenizer_files(path, model_max_length):
    """A GGUF's byte-level BPE as the files of a Hugging Face folder that AutoTokenizer loads: ({'tokenizer.json':
    text, 'tokenizer_config.json': text}, {bos_token_id, eos_token_id, pad_token_id: id or None}). tokenizer.json:
    the BPE model with the file's tokens (by id) and merges in order, the control tokens (token_type 3) as special
    added tokens, the pre_tokenizer of its tokenizer.ggml.pre (HF_PRE_TOKENIZERS: SmolLM's digits split off first, as
    SmolLM's own tokenizer.json has it), ByteLevel decoding; tokenizer_config.json: its bos/eos/pad/unk tokens and
    chat template. DataError naming the field when the file holds something else (read_gguf_vocab's refusals, an
    unknown pre, a token spelled twice)."""
    v = read_gguf_vocab(path)
    if v['pre'] not in HF_PRE_TOKENIZERS:
        raise DataError(f"{path}: tokenizer.ggml.pre {v['pre']!r} has no tokenizer.json form here "
                        f"({', '.join(HF_PRE_TOKENIZERS)}); add it to lab/hf/tokenizer.py HF_PRE_TOKENIZERS")
    tokens = v['tokens']
    vocab = {t: i for i, t in enumerate(tokens)}
    if len(vocab) != len(tokens):
        twice = next(t for i, t in enumerate(tokens) if vocab[t] != i)
        raise DataError(f"{path}: tokenizer.ggml.tokens holds {twice!r} twice; a tokenizer.json vocabulary maps each "
                        f"token to one id")
    fields = v['fields']

    def meta(key):
        f = fields.get(key)
        if f is None:
            return None
        value = f.parts[f.data[0]]
        return bytes(value).decode('utf-8') if f.types[0].name == 'STRING' else value.tolist()[0]
    ids = {k: meta(f'tokenizer.ggml.{k}') for k in ('bos_token_id', 'eos_token_id', 'padding_token_id',
                                                   'unknown_token_id')}
    tok = bpe_tokenizer_json(vocab, v['merges'], [(i, tokens[i]) for i, k in enumerate(v['types']) if k == CONTROL],
                             HF_PRE_TOKENIZERS[v['pre']])
    names = {'bos_token': 'bos_token_id', 'eos_token': 'eos_token_id', 'pad_token': 'padding_token_id',
             'unk_token': 'unknown_token_id'}
    cfg = {'tokenizer_class': 'PreTrainedTokenizerFast', 'model_max_length': model_max_length,
           'clean_up_tokenization_spaces': False, 'add_bos_token': bool(meta('tokenizer.ggml.add_bos_token')),
           **{name: tokens[ids[k]] for name, k in names.items() if ids[k] is not None and 0 <= ids[k] < len(tokens)}}
    if meta('tokenizer.chat_template'):
        cfg['chat_template'] = meta('tokenizer.chat_template')
    files = {'tokenizer.json': json.dumps(tok, ensure_ascii=False) + '\n',
             'tokenizer_config.json': json.dumps(cfg, ensure_ascii=False, indent=1) + '\n'}
    return files, {'bos_token_id': ids['bos_token_id'], 'eos_token_id': ids['eos_token_id'],
                   'pad_token_id': ids['padding_token_id']}


TOKENIZERS['gguf'] = meta_tokenizer
TOKENIZERS['hf'] = hf_meta_tokenizer
