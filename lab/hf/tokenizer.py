"""
A real model's own tokenizer, built from its GGUF file (SmolLM2-135M's: tokenizer.ggml.model = gpt2, a byte-level
BPE of 49,152 tokens and 48,900 merges), run by tiktoken: no hand-written BPE.

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

Importing this module registers the tokenizer 'gguf' with data.sources.get_tokenizer (a dataset's meta names its
file in 'tokenizer_file'), which is how the rooms and sample.py reach it.
"""
import functools
import os

import numpy as np

from data.common import DataError
from data.sources import TOKENIZERS, gguf_file

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
    """The tokenizer metadata of a GGUF file: dict(tokens [str], merges [str 'a b'], types [int], model, pre), read
    with gguf.GGUFReader. DataError naming the file when it is not a GGUF or holds no byte-level BPE."""
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
                types=[int(types.parts[i][0]) for i in types.data] if types else [1] * len(tokens))


def bpe_ranks(tokens, merges, special):
    """tiktoken's mergeable ranks from a merge list: {token bytes: rank}, the single-byte tokens first (in id order),
    then the result of merge k at rank n_bytes + k, and ids [rank] -> the model's token id. ValueError when a merge
    makes a token that is not in the vocabulary."""
    spell = byte_spelling()
    index = {t: i for i, t in enumerate(tokens)}
    order = [i for i, t in enumerate(tokens) if len(spelled_bytes(t, spell)) == 1 and i not in special]
    for m in merges:
        a, b = m.split(' ')
        if a + b not in index:
            raise ValueError(f"merge {m!r} makes {a + b!r}, which is not a token")
        order.append(index[a + b])
    ranks = {spelled_bytes(tokens[i], spell): r for r, i in enumerate(order)}
    return ranks, np.array(order, dtype=np.int64)


class GGUFTokenizer:
    """A GGUF's byte-level BPE: encode(text) -> list[int] (plain text: specials stay text), decode(ids) -> str
    (invalid UTF-8 replaced), token_bytes(id), vocab_size, eot_token (<|endoftext|>'s id, else the eos id),
    special_tokens {text: id}, pre (the tokenizer.ggml.pre it splits text as), name (the file's basename)."""

    def __init__(self, path):
        import tiktoken
        v = read_gguf_vocab(path)
        if v['pre'] not in PRE_SPLITS:
            raise DataError(f"{path}: tokenizer.ggml.pre {v['pre']!r} is not one this tokenizer knows "
                            f"({', '.join(sorted(PRE_SPLITS))}); add its regex to lab/hf/tokenizer.py PRE_SPLITS")
        tokens, spell = v['tokens'], byte_spelling()
        self.name, self.pre, self.vocab_size = os.path.basename(path), v['pre'], len(tokens)
        self.special_tokens = {t: i for i, (t, k) in enumerate(zip(tokens, v['types'])) if k == CONTROL}
        ranks, self._ids = bpe_ranks(tokens, v['merges'], set(self.special_tokens.values()))
        self._enc = tiktoken.Encoding(f'gguf:{self.name}', pat_str=PRE_SPLITS[v['pre']], mergeable_ranks=ranks,
                                      special_tokens={})
        self._bytes = [t.encode('utf-8') if i in self.special_tokens.values() else spelled_bytes(t, spell)
                       for i, t in enumerate(tokens)]
        have = {b[0] for b in ranks if len(b) == 1}
        self._missing = [bytes([b]) for b in range(256) if b not in have]  # no token spells them: tiktoken would panic
        self.eot_token = self.special_tokens.get('<|endoftext|>', v['eos'])
        if self.eot_token is None:
            raise DataError(f"{path} has no <|endoftext|> token and no tokenizer.ggml.eos_token_id; "
                            f"there is no end-of-document token to separate documents with")

    def encode(self, text):
        """The token ids of text as plain text (a special token's spelling is encoded as text). DataError naming the
        character when the text needs a byte that no token spells (the vocabulary cannot write it)."""
        data = text.encode('utf-8', 'surrogatepass')
        if any(b in data for b in self._missing):
            c = next(c for c in text if any(b in c.encode('utf-8', 'surrogatepass') for b in self._missing))
            raise DataError(f"character {c!r} (U+{ord(c):04X}) cannot be written in the vocabulary of {self.name} "
                            f"(no token holds its UTF-8 bytes); remove it from the text")
        return self._ids[self._enc.encode_ordinary(text)].tolist()

    encode_ordinary = encode

    def token_bytes(self, i):
        return self._bytes[int(i)]

    def decode(self, ids):
        """The text of ids (bytes joined, then UTF-8 with invalid sequences replaced); special tokens as written."""
        return b''.join(self._bytes[int(i)] for i in ids).decode('utf-8', errors='replace')


@functools.lru_cache(maxsize=4)
def _tokenizer_at(path, mtime):
    return GGUFTokenizer(path)


def gguf_tokenizer(path=None, cache_dir=None):
    """The tokenizer of a GGUF file (built once per file and process): path as data.sources.gguf_file takes it (None
    or 'smollm2': the pinned SmolLM2 file, fetched and checked; a path; a file name in the cache dir)."""
    path = os.path.abspath(gguf_file(path, cache_dir))
    return _tokenizer_at(path, os.path.getmtime(path))


def meta_tokenizer(meta, cache_dir=None):
    """data.sources.get_tokenizer's entry for meta['tokenizer'] == 'gguf': (encode, decode) of meta['tokenizer_file'],
    checked against the meta's vocab_size."""
    tok = gguf_tokenizer(meta['tokenizer_file'], cache_dir)
    if meta.get('vocab_size') not in (None, tok.vocab_size):
        raise DataError(f"{tok.name} has {tok.vocab_size} tokens but dataset {meta.get('dataset')!r} says vocab_size "
                        f"{meta['vocab_size']}; prepare the data again with this file")
    return tok.encode, tok.decode


TOKENIZERS['gguf'] = meta_tokenizer
