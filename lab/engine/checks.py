"""
What the scripts refuse before they run, each as one line naming the setting and the fix (lab.engine.cli prints it
and exits 2): numbers out of range, a folder that cannot be written; train.py's start (an unknown init_from, a run
already in out_dir, a resumed checkpoint that contradicts itself or the command line, a model that does not fit the
data); eval.py's settings, and its data once the arms are known (a vocabulary that does not match, a smoothing wider
than the window, more windows than the held-out text holds).
"""
import os

from configurator import ConfigError
from data.common import check_vocab, window_slots


# the settings that build a GPT in train.py (a resumed run takes them from its checkpoint and refuses a change to them;
# a fine-tune's sweep stores its base's, with what --attention=logpos, --learned_freqs=True switch on: switched_on)
MODEL_KEYS = ('n_layer', 'n_head', 'n_embd', 'dropout', 'bias', 'pos_emb', 'rope_base', 'rope_scaling', 'attention',
              'layers', 'partial_rotary_factor', 'n_kv_head', 'learned_freqs')


def check_ranges(cfg, positive=(), nonneg=(), fraction=()):
    """Each named setting in its range: a whole number >= 1, a number >= 0, or a fraction in [0, 1); ConfigError
    naming the first that is not (NaN is out of every range)."""
    for keys, ok, want in ((positive, lambda v: v >= 1, 'a positive integer'), (nonneg, lambda v: v >= 0, '>= 0'),
                           (fraction, lambda v: 0 <= v < 1, 'in [0, 1), like 0.0, 0.1 or 0.99')):
        for key in keys:
            if not ok(cfg[key]):
                raise ConfigError(f"{key}={cfg[key]} is out of range; it must be {want}")


def check_out_dir(path, key='out_dir'):
    """A folder the run can write into: ConfigError naming `key` when it, or the nearest part of its path that exists,
    is a file or is not writable."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    if not os.path.isdir(p):
        raise ConfigError(f"{key}={path} is a file; pass a folder" if p == os.path.abspath(path) else
                          f"{key}={path} lies under {p}, which is a file; pass a folder")
    if not os.access(p, os.W_OK):
        raise ConfigError(f"{key}={path}: {p} is not writable (permission denied); pass a folder you can write to")


# ----------------------------------------------------------------------------- train.py (finetune_long.py through it)

def check_settings(cfg, world):
    """Checks that need no data, run before anything starts (world = number of DDP processes)."""
    check_ranges(cfg, positive=('block_size', 'batch_size', 'gradient_accumulation_steps', 'eval_interval',
                                'eval_iters', 'log_interval'),
                 nonneg=('max_iters', 'warmup_iters', 'lr_decay_iters', 'learning_rate', 'min_lr', 'weight_decay',
                         'grad_clip', 'pos_lr_scale'), fraction=('beta1', 'beta2', 'dropout'))
    accum = cfg['gradient_accumulation_steps']
    if accum % world:
        raise ConfigError(f"gradient_accumulation_steps={accum} is not divisible by the {world} processes; "
                          f"make it a multiple of {world}")
    check_out_dir(cfg['out_dir'])


def check_start(cfg):
    """train.py's own start: init_from is scratch or resume, and a new run does not overwrite one unasked."""
    if cfg['init_from'] not in ('scratch', 'resume'):
        raise ConfigError(f"init_from={cfg['init_from']!r} is unknown; use scratch or resume "
                          f"(finetune_long.py takes a run folder)")
    if cfg['init_from'] != 'resume' and os.path.exists(os.path.join(cfg['out_dir'], 'ckpt.pt')) and \
            not cfg['overwrite']:
        raise ConfigError(f"{cfg['out_dir']} already holds a run (ckpt.pt); pass --init_from=resume to continue it, "
                          f"--overwrite=True to replace it, or another --out_dir")


def check_resume(cfg, ckpt, start):
    """A resumed run's checkpoint and settings (start: its stored ones, cfg: with the command line on top) say one
    model: a run built from its config stored the model it built (a base's fine-tune stores its base's settings, which
    the switch then changes), and a new shape on the command line would be stored, not used."""
    stored, args = ckpt['config'], ckpt['model_args']
    if not (ckpt.get('lineage') or {}).get('base_checkpoint'):
        k = next((k for k in MODEL_KEYS if k in stored and k in args and k != 'rope_scaling' and stored[k] != args[k]
                  and not (k == 'n_kv_head' and stored[k] is None)), None)
        if k:
            raise ConfigError(f"{cfg['out_dir']}/ckpt.pt is inconsistent: its model has {k}={args[k]!r} but its "
                              f"stored config says {stored[k]!r} (the file was edited or damaged); start a new run in "
                              f"another out_dir")
    k = next((k for k in MODEL_KEYS + ('pos_lr_scale',) if k in start and cfg[k] != start[k]), None)
    if k:  # (pos_lr_scale is kept in the saved optimizer's groups, which the resumed optimizer loads)
        raise ConfigError(f"--{k}={cfg[k]!r} differs from the run's own {start[k]!r}, and a resumed run keeps the model "
                          f"and optimizer it saved (out_dir={cfg['out_dir']}); drop --{k}, or start a new run in another "
                          f"out_dir")


def check_model(model, meta, data_dir, T):
    """The model to train fits the data (its vocabulary) and the length T (a learned position table)."""
    if model.config.vocab_size != meta['vocab_size']:
        raise ConfigError(f"the model has a vocabulary of {model.config.vocab_size} but {data_dir} has "
                          f"{meta['vocab_size']}; use the dataset the model was trained on")
    if model.config.pos_emb == 'learned' and T > model.config.block_size:
        raise ConfigError(f"block_size={T} is longer than the model's learned position table "
                          f"({model.config.block_size})")
    c = model.config
    if c.partial_rotary_factor != 1 and (c.pos_emb != 'rope' or model.rope_index.count(None) == c.n_layer):
        why = f"pos_emb={c.pos_emb!r}" if c.pos_emb != 'rope' else f"layers={c.layers!r}: no layer has RoPE"
        raise ConfigError(f"partial_rotary_factor={c.partial_rotary_factor} changes nothing: this model turns no "
                          f"pair ({why}); drop it, or give a layer RoPE")


# ----------------------------------------------------------------------------- eval.py

def check_eval_settings(cfg):
    """eval.py's settings alone, each in its range: ConfigError naming the first that is not."""
    check_ranges(cfg, positive=('num_windows', 'batch_size', 'entropy_chunk', 'retrieval_len', 'retrieval_cue',
                                'entropy_windows', 'grid', 'needle_key', 'needle_value', 'law_rows'),
                 nonneg=('retrieval_pos', 'eval_len', 'smooth', 'retrieval_examples', 'samples', 'depth_len', 'needles',
                         'recall_len', 'workers', 'moving_examples', 'word_needles', 'mv_values', 'passkey_text',
                         'law_windows'))
    for key in ('num_windows', 'retrieval_examples', 'passkey_text'):  # else the run fails at its end, in the tests
        if cfg[key] == 1:
            raise ConfigError(f"{key}=1: every verdict is a paired test, which needs at least 2 windows or examples; "
                              f"set {key}=2 or more" + (" (or 0 for none)" if key != 'num_windows' else ''))
    for key in ('entropy_windows', 'law_windows'):
        if cfg[key] > cfg['num_windows']:
            raise ConfigError(f"{key}={cfg[key]} is more than num_windows={cfg['num_windows']}; it uses the first eval "
                              f"windows")
    if cfg['factor'] and not cfg['factor'] >= 1:
        raise ConfigError(f"factor={cfg['factor']} must be >= 1 (s = T/L of the zero-shot rope arms), or 0 for T/L")
    for key in ('margin_loss', 'margin_exact'):
        if not cfg[key] > 0:
            raise ConfigError(f"{key}={cfg[key]} must be > 0 (the equivalence margin of a paired difference)")
    if cfg['split'] not in ('val', 'train'):
        raise ConfigError(f"split={cfg['split']!r} must be 'val' (the held-out plays) or 'train' (to choose a knob)")
    check_out_dir(cfg['out_dir'])


def check_eval_data(cfg, first, meta, data_dir, docs, T):
    """The data against the arms (first: the first arm, or the base) and the window length T."""
    vocab = first['ckpt']['model_args']['vocab_size']
    if meta['vocab_size'] != vocab:
        raise ConfigError(f"{data_dir} has a vocabulary of {meta['vocab_size']} but the models have {vocab}; "
                          f"evaluate on the dataset they were trained on")
    check_vocab(first['ckpt'].get('dataset') or {}, meta, data_dir, first['checkpoint'])  # the mapping, not only its size
    if cfg['smooth'] > T:
        raise ConfigError(f"smooth={cfg['smooth']} is wider than the {T} positions evaluated; pass --smooth <= {T} "
                          f"(0: T/32)")
    room = window_slots(docs, T + 1)
    if cfg['num_windows'] > room:
        raise ConfigError(f"num_windows={cfg['num_windows']} windows of {T + 1} tokens need more held-out text than "
                          f"{data_dir} has (its validation documents hold {room} such windows without overlap); "
                          f"lower --num_windows or --eval_len")


def excluded_settings(exclude, path, split, meta, docs):
    """The settings of --exclude's summary.json (path), checked against this eval: an eval's summary (its window
    length T, windows, split, dataset, tokenizer, vocabulary and the play of each window, as eval.py writes them), of
    the same split of the same data: each window inside a document of the title it names (docs: this split's
    documents, none cut yet), so that its offsets are tokens of this text. ConfigError naming the file otherwise."""
    from data.common import read_json
    fix = "--exclude names an eval folder (or its summary.json) whose windows this eval must avoid"
    value = read_json(path, fix)
    st = value.get('settings') if isinstance(value, dict) else None
    if not isinstance(st, dict):
        raise ConfigError(f"exclude={exclude}: {path} is not an eval's summary.json (no 'settings' object); {fix}")
    ints = lambda v: isinstance(v, list) and all(type(x) is int and x >= 0 for x in v)  # noqa: E731
    ret = st.get('retrieval')
    for key, ok in (('T', type(st.get('T')) is int and st['T'] >= 1), ('windows', ints(st.get('windows'))),
                    ('retrieval', ret is None or isinstance(ret, dict) and ints(ret.get('windows') or [])),
                    *((k, isinstance(st.get(k), str)) for k in ('split', 'dataset', 'tokenizer')),
                    ('vocab_size', type(st.get('vocab_size')) is int),
                    ('window_docs', isinstance(st.get('window_docs'), list) and
                     len(st['window_docs']) == len(st.get('windows') or []))):
        if not ok:
            raise ConfigError(f"exclude={exclude}: {path} is not an eval's summary.json (settings {key!r} is missing "
                              f"or not what eval.py writes); {fix}")
    if st['split'] != split:
        raise ConfigError(f"exclude={exclude!r} was evaluated on split {st.get('split')!r}, this eval on {split!r}; "
                          f"exclude an eval of the same split")
    theirs, mine = (f"dataset {d['dataset']!r}, tokenizer {d['tokenizer']!r}, vocab_size {d['vocab_size']}"
                    for d in (st, meta))
    if theirs != mine:
        raise ConfigError(f"exclude={exclude}: {path} is an eval of {theirs}, this eval of {mine}: its windows are "
                          f"offsets into other text; exclude an eval of the same data")
    for w, title in zip(st['windows'], st['window_docs']):
        if not any(t == title and a <= w and w + st['T'] + 1 <= b for t, a, b in docs):
            raise ConfigError(f"exclude={exclude}: {path} has a window at token {w} in {title!r}, which this eval's "
                              f"{split} split does not hold there (another preparation of the data?); exclude an "
                              f"eval of these data files")
    return st


def without_windows_of(exclude, docs, split, meta):
    """--exclude=<eval folder or its summary.json>: the documents with every window of that eval cut out (its loss
    windows and retrieval windows, each T + 1 tokens), so that this eval's windows share no token with them: a test
    split beside a dev one (data.common.docs_without). ConfigError when the file is missing, damaged, or of another
    split or data (excluded_settings; meta: this eval's data's meta.json)."""
    if not exclude:
        return docs
    from data.common import docs_without
    path = exclude if exclude.endswith('.json') else os.path.join(exclude, 'summary.json')
    st = excluded_settings(exclude, path, split, meta, docs)
    n = st['T'] + 1
    return docs_without(docs, [(w, w + n) for w in st['windows'] + list((st.get('retrieval') or {}).get('windows')
                                                                      or [])])
