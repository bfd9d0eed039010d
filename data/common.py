"""
The on-disk format of a prepared dataset (below) and what every script needs at run time: DataError,
atomic file writes, loading and validating a prepared dataset (load_meta, load_split), and drawing
windows out of it. Where the documents come from and how they are tokenized is data/sources.py; a run's
checkpoint read back (and real models' weights through their loaders) is data/checkpoints.py.

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

import bisect
import json
import os
import tempfile

import numpy as np

GPT2_VOCAB_SIZE = 50257  # the vocab_size of a 'gpt2' dataset (load_meta checks it)
SPLITS = ('train', 'val')


class DataError(ValueError):
    """Bad or missing data: the message names the file or input and says how to fix it."""


# -----------------------------------------------------------------------------
# atomic writes: a kill at any moment leaves the old file or the new one, never a torn one

def atomic_write(path, write_fn, mode='wb'):
    """Write path through write_fn(f) on a temp file renamed into place. A write that fails (disk full, a file-size
    limit, permissions) raises DataError naming the file and the cause: the previous file is kept, no temp file left."""
    path, tmp = os.fspath(path), None
    d = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix='.' + os.path.basename(path) + '.', suffix='.tmp')
        with os.fdopen(fd, mode, **({} if 'b' in mode else {'encoding': 'utf-8'})) as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass
        cause = write_failure(e)
        if cause:
            raise DataError(f"could not write {path} ({cause}); " + ("the previous file is kept" if os.path.exists(path)
                            else "nothing was written") + ": free some space or fix the folder's permissions") from None
        raise
    try:  # make the rename itself durable
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def write_failure(e):
    """The cause of a failed write in a few words, or None when e is not one: an OSError (its strerror), or torch.save's
    RuntimeError around one (its zip writer reports a failed write as '... file write failed')."""
    if isinstance(e, OSError):
        return e.strerror or str(e) or type(e).__name__
    if isinstance(e, RuntimeError):
        inner = e.__cause__ or e.__context__
        if isinstance(inner, OSError):
            return write_failure(inner)
        if 'write' in str(e):
            return str(e).strip().splitlines()[0][:160]
    return None


def atomic_write_text(path, text):
    atomic_write(path, lambda f: f.write(text), mode='w')


def atomic_torch_save(obj, path):
    import torch
    atomic_write(path, lambda f: torch.save(obj, f))


# -----------------------------------------------------------------------------
# reading the JSON files runs write (arms.json, search_state.json, log.jsonl): errors name the file and the line

def read_json(path, fix):
    """The value in a JSON file; DataError naming the file (and the place in it) when it is missing or not valid JSON.
    fix says what to do about it."""
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except FileNotFoundError:
        raise DataError(f"{path} not found; {fix}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not valid JSON ({e}); {fix}") from None


def read_jsonl(path, fix, check=None):
    """The rows (JSON values, one per non-empty line) of a JSONL file, each passed to check(row) -> what is wrong with
    it or None; DataError naming the file and the line when one is not valid JSON or check finds a fault."""
    rows, i = [], 0
    try:
        with open(path, encoding='utf-8') as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    rows.append(json.loads(line))
                    wrong = check(rows[-1]) if check else None
                    if wrong:
                        raise DataError(f"{path} line {i}: {wrong}; {fix}")
    except json.JSONDecodeError as e:
        raise DataError(f"{path} line {i}: not valid JSON ({e.msg}, column {e.colno}); {fix}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path} is unreadable ({e}); {fix}") from None
    return rows


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
    elif meta['tokenizer'] in ('gguf', 'hf'):  # a model's own BPE, read from the file named (lab/hf/tokenizer.py)
        if not isinstance(meta.get('tokenizer_file'), str) or not meta['tokenizer_file']:
            raise bad("'tokenizer_file' (the GGUF's path) missing for a gguf tokenizer" if meta['tokenizer'] ==
                      'gguf' else "'tokenizer_file' (the path of the tokenizer.json) missing for an hf tokenizer")
        sha = meta.get('tokenizer_sha256')
        if sha is not None and not (isinstance(sha, str) and len(sha) == 64 and set(sha) <= set('0123456789abcdef')):
            raise bad(f"'tokenizer_sha256' {str(sha)[:80]!r} is not a sha256 (64 lowercase hex digits) of the GGUF")
    else:
        raise bad(f"unknown tokenizer {meta['tokenizer']!r} (expected 'char', 'gpt2', 'gguf' or 'hf')")
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


def window_slots(docs, T):
    """How many windows of T tokens that share no token the documents hold: sum of len // T."""
    return int(sum((end - start) // T for _, start, end in docs))


def doc_windows(docs, T, n, seed):
    """n windows [start, start+T) lying inside single documents and sharing no token with one another, drawn with a
    fixed seed: the same windows for the same (docs, T, n, seed). Callers pass T = their length + 1 (the inputs and the
    next-token target), so no token is scored, or seen as context, by two windows. A document of length len holds
    len // T such windows (window_slots, the count eval.py checks num_windows against); DataError when the documents hold fewer
    than n.

    The draw is the former one (with replacement: a document in proportion to how many starts it holds, then a start
    in it) with every window that would overlap one already kept drawn again, so a draw that had no overlap is
    unchanged. When that keeps failing (n close to what fits), the windows are placed instead: n of the len // T slots
    chosen at random, then spread at random within each document."""
    lens = np.array([end - start for _, start, end in docs], dtype=np.int64)
    fits = lens // T
    if fits.sum() == 0:
        raise DataError(f"no document of the split is longer than {T - 1} tokens (longest: {lens.max()}), so none "
                        f"holds a window of {T}; use a shorter length")
    if n > fits.sum():
        raise DataError(f"{n} windows of {T} tokens that share no token do not fit: the split's documents hold "
                        f"{fits.sum()} such windows; ask for fewer (--num_windows; in training --eval_iters x "
                        f"--batch_size) or shorter ones (--eval_len; in training --block_size)")
    rng = np.random.default_rng(seed)
    room = np.array([max(0, end - start - T) for _, start, end in docs], dtype=np.float64)
    starts = _drawn_apart(docs, T, n, rng, room) if room.sum() > 0 else None
    return starts if starts is not None else _placed_apart(docs, T, n, rng, lens, fits)


def docs_without(docs, spans):
    """The documents [(title, start, end)] with the token spans [(start, end)] cut out: the pieces between them (a
    test split drawn from these shares no token with the spans, e.g. every window of a dev eval)."""
    out = []
    for title, a, b in docs:
        cuts = sorted((max(a, s), min(b, e)) for s, e in spans if s < b and e > a)
        for s, e in cuts:
            if s > a:
                out.append((title, a, s))
            a = max(a, e)
        if a < b:
            out.append((title, a, b))
    return out


def _drawn_apart(docs, T, n, rng, room, tries=20):
    """doc_windows' draw: the former draw of n starts, each one overlapping a kept window drawn again (at most
    tries x n draws again in all); None when that is not enough."""
    p = room / room.sum()
    kept, order = [], []  # sorted starts, and the starts in the order drawn

    def offer(d):
        s = int(docs[d][1] + rng.integers(0, room[d] + 1))
        i = bisect.bisect(kept, s)
        if (i == 0 or kept[i - 1] + T <= s) and (i == len(kept) or s + T <= kept[i]):
            kept.insert(i, s)
            order.append(s)
    for d in rng.choice(len(docs), size=n, p=p):
        offer(d)
    for _ in range(tries * n):
        if len(order) == n:
            break
        offer(rng.choice(len(docs), p=p))
    return order if len(order) == n else None


def _placed_apart(docs, T, n, rng, lens, fits):
    """n windows of T that share no token, whenever n <= fits.sum(): n of the slots chosen at random (k of them in a
    document), then k starts spread at random in it (k distinct gaps out of len - k*T + k, the i-th start shifted by
    i*(T - 1), so consecutive starts are at least T apart and the last window ends by the document's end)."""
    slots = rng.choice(int(fits.sum()), size=n, replace=False)
    k = np.bincount(np.searchsorted(np.cumsum(fits), slots, side='right'), minlength=len(docs))
    starts = []
    for d in np.flatnonzero(k):
        gaps = np.sort(rng.choice(int(lens[d] - k[d] * T + k[d]), size=int(k[d]), replace=False))
        starts += [int(docs[d][1] + g + i * (T - 1)) for i, g in enumerate(gaps)]
    return [starts[i] for i in rng.permutation(n)]


def fetch_windows(data, starts, T, device):
    """Inputs x = data[s : s+T] and targets y = data[s+1 : s+T+1] for each start s, as int64 tensors on device."""
    import torch
    x = torch.from_numpy(np.stack([data[s:s + T] for s in starts]).astype(np.int64))
    y = torch.from_numpy(np.stack([data[s + 1:s + 1 + T] for s in starts]).astype(np.int64))
    return to_device(x, y, device)


def to_device(x, y, device):
    if str(device).startswith('cuda'):
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


def check_vocab(stored, meta, data_dir, source):
    """The model's vocabulary (a checkpoint's 'dataset' entry) must be the data's: same tokenizer, size and,
    for characters, the same characters in the same order, for a GGUF's BPE the same file (its sha256 where both
    record one, else its name; a Hugging Face folder's: the same tokenizer.json); otherwise the token ids mean
    different things."""
    why = {'itos': ' (different characters)', 'tokenizer_file': ' (a different tokenizer.json)'
           if stored.get('tokenizer') == 'hf' else ' (a different GGUF file)'}
    for key in ('tokenizer', 'vocab_size', 'itos', 'tokenizer_file'):
        mine, theirs = stored.get(key), meta.get(key)
        if key == 'tokenizer_file' and stored.get('tokenizer') == 'gguf' and mine is not None:
            # a GGUF by its sha256 where both record one (the same file in another folder), else by its file name
            a, b = stored.get('tokenizer_sha256'), meta.get('tokenizer_sha256')
            mine, theirs = (a, b) if a and b else (os.path.basename(mine), os.path.basename(str(theirs)))
        if mine is not None and mine != theirs:
            raise DataError(f"{source} was trained on a {stored.get('tokenizer')} vocabulary of {stored.get('vocab_size')} "
                            f"tokens but {data_dir} has a {meta['tokenizer']} vocabulary of {meta['vocab_size']}"
                            f"{why.get(key, '')}; pass --dataset=<the data the model was trained on>")
