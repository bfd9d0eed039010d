"""
eval.py's retrieval rooms, built from its settings once for every arm: the passkey on its own windows, then the
depth passkey, needles and recall (lab/measure/retrieval.py) and RULER's harder needles (lab/measure/ruler.py) on the
same windows, and the natural-language passkey (lab/measure/passkey_text.py, its own examples count); a room that
does not fit the run is skipped with a line saying why.
"""
from configurator import ConfigError
from data.common import doc_windows
from lab.measure import passkey_text, ruler
from lab.measure.retrieval import make_rooms, passkey_examples
from lab.measure.scoring import bucket_ends


def eval_rooms(cfg, val, docs, T, L, meta):
    """eval.py's retrieval rooms from its settings: the passkey test on its own windows (drawn with seed + 1) and
    make_rooms' depth passkey, needles and recall on the same windows; a room that does not fit is skipped with a line
    saying why. ConfigError when the passkey cannot fit in L. Returns (passkey windows, passkey buckets, passkey
    examples, the other rooms, {skipped room: why})."""
    K, cue, pos, R = cfg['retrieval_len'], cfg['retrieval_cue'], cfg['retrieval_pos'], cfg['retrieval_examples']
    if R and (cue >= K or pos + 2 * K > L):
        raise ConfigError(f"passkey test: retrieval_cue={cue} must be < retrieval_len={K}, and retrieval_pos + "
                          f"2 x retrieval_len = {pos + 2 * K} must fit in L={L}; change them or set retrieval_examples=0")
    n = max(R, cfg['passkey_text'])  # the natural-language passkey may run alone (a real model: the rest off)
    ret_starts = doc_windows(docs, T + 1, n, cfg['seed'] + 1) if n else []
    own = ret_starts[:R]  # the held-out-text rooms' windows, as without the natural-language passkey
    buckets, examples = passkey_examples(val, own, bucket_ends(L, T), T, L, K, pos, meta['vocab_size'],
                                         meta['eot_token'], cfg['seed'])
    extra = (ruler.rooms(cfg, val, own, T, L, meta) if R else []) + passkey_text.rooms(cfg, val, ret_starts, T, L, meta)
    rooms, skipped = make_rooms(val, own, T, L, meta, cfg['seed'], cue, R, depth_len=cfg['depth_len'] if R else 0,
                                needles=cfg['needles'] if R else 0, key_len=cfg['needle_key'],
                                value_len=cfg['needle_value'], recall_len=cfg['recall_len'] if R else 0, strict=False,
                                extra=extra) if n else ({}, {})
    if 'passkey_text' in skipped:  # (off unless asked for: asked and skipped, it would change nothing)
        raise ConfigError(f"passkey_text={cfg['passkey_text']}: {skipped['passkey_text']}; set passkey_text=0 for "
                          f"this model")
    for name, why in skipped.items():
        print(f"eval: skipped the {name} test: {why}")
    return ret_starts, buckets, examples, rooms, skipped
