"""lab/hf/tokenizer.py's tokenizer.json reader (the 'hf' tokenizer of an hf:<folder> checkpoint): one small byte-level
BPE written both as a GGUF and as tokenizer.json gives the same ids; the tokenizers library reads the same
tokenizer.json to the same ids for each pre-tokenizer shape the reader knows (ByteLevel; Digits + ByteLevel, as
SmolLM's; Split(Regex) + ByteLevel(use_regex=false), as Llama 3's and Qwen2's); what it cannot run exactly is refused in
one line; sample.py --ckpt=hf:<folder> writes text with the folder's tokenizer."""
import copy
import json
import os
import random

import pytest

from configurator import ConfigError
from data.common import DataError
from data.checkpoints import load_checkpoint
from data.sources import get_tokenizer
from lab.hf.tokenizer import GGUFTokenizer, HFTokenizer, byte_spelling, hf_tokenizer
from test_real_model import LLAMA_CONFIG, add_meta, hf_weights, write_folder

gguf = pytest.importorskip('gguf')

SPELL = byte_spelling()
# merges in the order a BPE trainer could have learnt them (each token made by the one merge the list reaches it by,
# so that Hugging Face's merge-by-pair and tiktoken's merge-by-bytes agree): words, whitespace runs, digits, é
MERGES = ['Ġ t', 'h e', 'Ġt he', 'm e', 'Ġthe me', 'Ġ a', 'a n', 'Ġa n', 'Ġan d', 'i n', 'Ġ Ġ', 'ĠĠ ĠĠ', 'Ċ Ċ',
          '1 2', '12 3', 'Ġ 1', 'Ġ 12', 'Ã ©', 'h Ã©', 'l l', 'll o', "' s", 'I t']
SPECIALS = ['<|endoftext|>', '<|im_start|>']  # the first in the vocab too (as SmolLM2's), the second added only
ORDER = list(range(256))
random.Random(0).shuffle(ORDER)  # ids not in merge order: the rank map has work to do
TOKENS = [SPECIALS[0]] + [sorted(SPELL, key=SPELL.get)[b] for b in ORDER] + [m.replace(' ', '') for m in MERGES][::-1] \
    + [SPECIALS[1]]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
BYTE_LEVEL = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
PRE = {  # the three pre-tokenizer shapes, as the model authors' files write them
    'gpt2': BYTE_LEVEL,
    'digits': {'type': 'Sequence', 'pretokenizers': [{'type': 'Digits', 'individual_digits': True}, BYTE_LEVEL]},
    'split': {'type': 'Sequence', 'pretokenizers': [
        {'type': 'Split', 'pattern': {'Regex': LLAMA3_SPLIT}, 'behavior': 'Isolated', 'invert': False},
        dict(BYTE_LEVEL, use_regex=False)]}}
TEXTS = ['the theme and 123', 'a  12', 'x 1599 y\n\n  1. z', "It's  in\n\nthe end 2024\t 7 ", 'héllo 日本 🚀 naïve',
         '    hello\n\n\n', "12345 1 12 123 ' s"]


def tokenizer_json(pre='gpt2', pairs=True, model=None, normalizer=None):
    """A tokenizer.json of TOKENS and MERGES as Hugging Face's tokenizers library writes one (merges as [a, b] pairs,
    or as 'a b' strings); model updates the model object."""
    added = [dict(id=TOKENS.index(t), content=t, single_word=False, lstrip=False, rstrip=False, normalized=False,
                  special=True) for t in SPECIALS]
    return {'version': '1.0', 'truncation': None, 'padding': None, 'added_tokens': added, 'normalizer': normalizer,
            'pre_tokenizer': PRE[pre] if isinstance(pre, str) else pre, 'post_processor': None,
            'decoder': {'type': 'ByteLevel', 'add_prefix_space': True, 'trim_offsets': True, 'use_regex': True},
            'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None,
                      'end_of_word_suffix': None, 'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
                      'vocab': {t: i for i, t in enumerate(TOKENS) if t != SPECIALS[1]},
                      'merges': [m.split(' ') for m in MERGES] if pairs else list(MERGES), **(model or {})}}


def write_json(folder, d):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, 'tokenizer.json')
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(d, f, ensure_ascii=False)
    return path


def write_gguf_tokenizer(path, pre):
    """The same vocabulary as a GGUF's tokenizer metadata (tokenizer.ggml.pre 'gpt2' or 'smollm')."""
    w = gguf.GGUFWriter(str(path), 'llama')
    for key, value in {'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': pre, 'tokenizer.ggml.tokens': TOKENS,
                       'tokenizer.ggml.merges': MERGES, 'tokenizer.ggml.eos_token_id': 0,
                       'tokenizer.ggml.token_type': [3 if t in SPECIALS else 1 for t in TOKENS]}.items():
        add_meta(w, key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.mark.parametrize('pre, gguf_pre', [('gpt2', 'gpt2'), ('digits', 'smollm')])
def test_the_same_vocabulary_as_gguf_and_tokenizer_json_gives_the_same_ids(tmp_path, pre, gguf_pre):
    ours = HFTokenizer(write_json(tmp_path / 'f', tokenizer_json(pre)))
    theirs = GGUFTokenizer(write_gguf_tokenizer(tmp_path / 'tok.gguf', gguf_pre))
    assert (ours.vocab_size, ours.eot_token, ours.pre) == (len(TOKENS), 0, pre)
    assert ours.name == os.path.join('f', 'tokenizer.json')
    assert ours.special_tokens == theirs.special_tokens == {SPECIALS[0]: 0, SPECIALS[1]: len(TOKENS) - 1}
    for text in TEXTS + ['<|endoftext|> stays text']:
        assert ours.encode(text) == theirs.encode(text), text
        assert ours.decode(ours.encode(text)) == text
    assert ours.decode([0, len(TOKENS) - 1]) == '<|endoftext|><|im_start|>'


@pytest.mark.parametrize('pre', list(PRE))
def test_the_tokenizers_library_reads_the_same_file_to_the_same_ids(tmp_path, pre):
    tokenizers = pytest.importorskip('tokenizers')
    path = write_json(tmp_path, tokenizer_json(pre))
    ours, theirs = HFTokenizer(path), tokenizers.Tokenizer.from_file(path)
    alphabet = list('ab Z  \n\n\t.,\'-0123456789') + ['the', 'me', 'and', 'é', '日本', "'s", ' 12', '٣', '½', '🚀']
    rng = random.Random(1)
    texts = TEXTS + [''.join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(300)]
    for text in texts:
        assert ours.encode(text) == theirs.encode(text, add_special_tokens=False).ids, repr(text)


def test_the_three_shapes_split_digits_differently(tmp_path):
    """Each shape reaches its own regex: ' 12' is one piece with GPT-2's, ' ', '1', '2' with the digits split off,
    ' ' and '12' with Llama 3's (\\p{N}{1,3}, a space before it a piece of its own)."""
    spelt = {pre: [TOKENS[i] for i in HFTokenizer(write_json(tmp_path / pre, tokenizer_json(pre))).encode(' 12')]
             for pre in PRE}
    assert spelt == {'gpt2': ['Ġ12'], 'digits': ['Ġ', '1', '2'], 'split': ['Ġ', '12']}


def test_merges_as_pairs_or_strings_and_a_normal_form(tmp_path):
    a = HFTokenizer(write_json(tmp_path / 'pairs', tokenizer_json('split', pairs=True)))
    b = HFTokenizer(write_json(tmp_path / 'strings', tokenizer_json('split', pairs=False)))
    for text in TEXTS:
        assert a.encode(text) == b.encode(text), text
    nfc = HFTokenizer(write_json(tmp_path / 'nfc', tokenizer_json('gpt2', normalizer={'type': 'NFC'})))
    assert nfc.encode('he\u0301llo') == nfc.encode('héllo') != a.encode('he\u0301llo')
    tokenizers = pytest.importorskip('tokenizers')
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / 'nfc' / 'tokenizer.json'))
    assert nfc.encode('he\u0301llo ﬁ') == theirs.encode('he\u0301llo ﬁ', add_special_tokens=False).ids


def refusal(tmp_path, d):
    path = write_json(tmp_path, d)
    with pytest.raises(DataError) as e:
        HFTokenizer(path)
    msg = str(e.value)
    assert '\n' not in msg and msg.startswith(path), msg
    return msg


def test_what_it_cannot_run_is_refused_in_one_line(tmp_path):
    d = tokenizer_json()
    unigram = copy.deepcopy(d)
    unigram['model'] = {'type': 'Unigram', 'unk_id': 0, 'vocab': [['<unk>', 0.0]]}
    assert "model.type 'Unigram'; only byte-level BPE" in refusal(tmp_path / 'u', unigram)
    fallback = tokenizer_json(model={'byte_fallback': True})
    assert 'model.byte_fallback is true (a sentencepiece-style BPE' in refusal(tmp_path / 'b', fallback)
    metaspace = tokenizer_json(pre={'type': 'Metaspace', 'replacement': '▁', 'prepend_scheme': 'first'})
    msg = refusal(tmp_path / 'm', metaspace)
    assert 'pre_tokenizer Metaspace is not one this reader knows; supported: ByteLevel(use_regex=true)' in msg
    prefix = tokenizer_json(pre=dict(BYTE_LEVEL, add_prefix_space=True))
    assert 'pre_tokenizer ByteLevel (add_prefix_space True' in refusal(tmp_path / 'p', prefix)
    lower = tokenizer_json(normalizer={'type': 'Sequence', 'normalizers': [{'type': 'Lowercase'}]})
    assert 'normalizer Sequence[Lowercase] changes the text' in refusal(tmp_path / 'l', lower)
    bad_regex = copy.deepcopy(tokenizer_json('split'))
    bad_regex['pre_tokenizer']['pretokenizers'][0]['pattern'] = {'Regex': '(unclosed'}
    assert 'pre_tokenizer Split pattern: ' in refusal(tmp_path / 'r', bad_regex)
    bad_merge = tokenizer_json(model={'merges': [['Ġ', 'q']]})
    assert "model.merges: merge ['Ġ', 'q'] makes 'Ġq', which is not a token" in refusal(tmp_path / 'g', bad_merge)
    os.makedirs(tmp_path / 'empty')
    with pytest.raises(DataError, match=r"^\S*empty has no tokenizer.json; copy the model's tokenizer.json"):
        hf_tokenizer(str(tmp_path / 'empty'))


def test_an_incomplete_regex_is_caught_not_dropped(tmp_path):
    """tiktoken drops the text a pre-split regex does not match (Hugging Face keeps it as a piece): a Split regex that
    misses some of the text is refused on encode rather than losing it."""
    d = copy.deepcopy(tokenizer_json('split'))
    d['pre_tokenizer']['pretokenizers'][0]['pattern'] = {'Regex': r'\p{L}+'}
    tok = HFTokenizer(write_json(tmp_path, d))
    assert tok.decode(tok.encode('hello')) == 'hello'
    with pytest.raises(DataError, match='leaves part of the text .* unmatched'):
        tok.encode('hello world')


def test_an_hf_folder_records_its_tokenizer_json_and_sample_writes_text(tmp_path, capsys):
    """load_checkpoint('hf:<folder>') names the folder's tokenizer.json by its absolute path; get_tokenizer and
    sample.py's tokenizer() read it; sample.py generates with it. Without tokenizer.json, sample.py says so."""
    import sample
    folder = write_folder(tmp_path / 'model', dict(LLAMA_CONFIG, vocab_size=len(TOKENS)),
                          hf_weights(vocab=len(TOKENS)))
    json_path = write_json(folder, tokenizer_json('digits'))
    ds = load_checkpoint('hf:' + folder)['dataset']
    assert ds == {'dataset': None, 'tokenizer': 'hf', 'vocab_size': len(TOKENS), 'tokenizer_file': json_path,
                  'eot_token': 0} and os.path.isabs(ds['tokenizer_file'])
    encode, decode = sample.tokenizer({'dataset': ds}, 'hf:' + folder)
    assert decode(encode('the theme 12')) == 'the theme 12' and encode('the theme 12') == HFTokenizer(json_path).encode(
        'the theme 12')
    encode, decode = get_tokenizer(dict(ds, vocab_size=len(TOKENS) + 64))  # padded embedding rows (as Qwen2's)
    assert decode([*encode(' the'), len(TOKENS) + 5]) == ' the'  # a padding id writes nothing
    with pytest.raises(DataError, match=f'has {len(TOKENS)} tokens but dataset None says vocab_size 100'):
        get_tokenizer(dict(ds, vocab_size=100))
    sample.main([f'--ckpt=hf:{folder}', '--start=the theme', '--max_new_tokens=8', '--num_samples=1',
                 '--temperature=0', '--progress=False', '--device=cpu'])
    out = capsys.readouterr()
    assert out.out.startswith('the theme') and len(out.out.splitlines()[0]) > len('the theme'), out
    os.remove(json_path)
    ds = load_checkpoint('hf:' + folder)['dataset']
    assert ds['tokenizer_file'] is None
    with pytest.raises(ConfigError) as e:
        sample.tokenizer({'dataset': ds}, 'hf:' + folder)
    assert f"the folder {folder} has no tokenizer.json" in str(e.value) and '--ckpt=gguf:' in str(e.value)
    assert '\n' not in str(e.value)
