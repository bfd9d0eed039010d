"""
The natural-language passkey of the literature (Mohtashami & Jaggi 2023; the form YaRN and LongLoRA report): an
instruction, filler sentences repeated, a five-digit pass key said at some depth, the filler continuing, and the
question at the end, the key's digits scored (greedy exact match of every answer token, and their mean loss):

  There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. I will quiz you about
  the important information there. The grass is green. The sky is blue. The sun is yellow. Here we go. There and
  back again. The grass is ... The pass key is 48213. Remember it. 48213 is the pass key. The grass is green. ...
  What is the pass key? The pass key is 48213

Unlike lab/measure/retrieval.py's rooms it reads no held-out text: it asks a model that follows instructions (a real
one, e.g. SmolLM2 loaded from its GGUF) to find a fact in text it can read, where the lab's own bases are trained to
copy. The rows are built in tokens, each part encoded on its own (the filler cycle cut at a token, the parts joined
at a space, so a BPE splits them as it splits the whole text) with the run's tokenizer (data.sources.get_tokenizer:
characters, where the vocabulary has them, GPT-2 BPE, a GGUF's BPE). The distance d runs from the key sentence's
first token to the question's first token and falls in the eval's distance buckets (lab.measure.placement); the
question's place is uniform over what fits, the key sits d before it, and the examples are the same for every arm
(the room's own seed stream). lab.measure.outcomes.room_scores scores them; rooms() is the room for eval.py's
settings (passkey_text = examples per bucket, 0 = off).
"""
import numpy as np

from data.sources import get_tokenizer
from lab.measure.placement import check_fit, distance_buckets, room_rng

INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about the important information there.")
FILLER = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
KEY = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = " What is the pass key? The pass key is"
DIGITS = 5  # the key: a five-digit number, 10000-99999
DEFAULTS = dict(passkey_text=0)  # eval.py's setting: examples per distance bucket (0 = the room is off)


def parts(meta):
    """The fixed parts in the run's tokens: dict(intro, filler (one cycle), question) as int64 arrays. ValueError when
    the vocabulary cannot write them (a char vocabulary without some of their characters)."""
    encode = get_tokenizer(meta)[0]
    try:
        return {k: np.array(encode(t), dtype=np.int64) for k, t in (('intro', INTRO), ('filler', FILLER),
                                                                     ('question', QUESTION))}
    except ValueError as e:
        raise ValueError(f"passkey_text: the vocabulary cannot write the passkey text ({e})") from None


def key_tokens(meta, key):
    """(sentence, lead, answer) for a key (str): the key sentence's tokens, then the answer ' <key>' after the
    question, split into its leading tokens that write only whitespace (they belong to the prompt: ' ' of a char
    vocabulary, SmolLM2's 'Ġ' before digits split one by one) and the tokens scored."""
    encode, decode = get_tokenizer(meta)
    try:
        sentence, answer = encode(KEY.format(key=key)), encode(' ' + key)
    except ValueError as e:
        raise ValueError(f"passkey_text: the vocabulary cannot write the pass key ({e})") from None
    n = next(i for i in range(len(answer)) if decode(answer[:i + 1]).strip())
    return tuple(np.array(ids, dtype=np.int64) for ids in (sentence, answer[:n], answer[n:]))


def filler(cycle, n):
    """The first n tokens of the filler repeated (cut at a token, as the reference cuts its text at a character)."""
    return np.resize(cycle, n) if n else np.zeros(0, dtype=np.int64)


def passkey_text_examples(meta, starts, T, L, seed, n):
    """n examples per distance bucket, the same for every arm (room_rng(seed, 'passkey_text')): per example a key
    (uniform five digits), the distance d uniform in the bucket, the question's start q uniform over [len(intro) + d,
    limit - span] (span: question, whitespace lead and answer), the key sentence at q - d. Example j of a bucket
    carries start = starts[j], the j-th retrieval window, so that eval's moving_examples (the examples of the first
    windows) keeps the same slots in every room. Returns buckets [(label, lo, hi)] and examples [dict(bucket,
    distance, depth (the key sentence's first token), query, key, answer (its tokens), seq, where, start)]."""
    if not 0 < n <= len(starts):
        raise ValueError(f"passkey_text={n}: needs 1..{len(starts)} examples per bucket (one per retrieval window)")
    p, rng = parts(meta), room_rng(seed, 'passkey_text')
    head, ask = len(p['intro']), len(p['question'])
    # the keys first, n for each bucket there can be, so that the buckets can leave room for the longest
    keys = [str(k) for k in rng.integers(10 ** (DIGITS - 1), 10 ** DIGITS, size=n * len(distance_buckets(L, T, 0, 0)))]
    made = [key_tokens(meta, k) for k in keys]
    span = ask + max(len(lead) + len(ans) for _, lead, ans in made)
    buckets = distance_buckets(L, T, head + span, max(len(s) for s, _, _ in made))
    check_fit(buckets, f"the passkey text (an instruction of {head} tokens, a question and answer of {span})", L)
    examples = []
    for b, (_, a, z, limit) in enumerate(buckets):
        for j in range(n):
            key, (sentence, lead, answer) = keys[b * n + j], made[b * n + j]
            d = int(rng.integers(a, z))
            q = int(rng.integers(head + d, limit - ask - len(lead) - len(answer) + 1))
            k = q - d
            seq = np.concatenate([p['intro'], filler(p['filler'], k - head), sentence,
                                  filler(p['filler'], d - len(sentence)), p['question'], lead, answer])
            first = q + ask + len(lead)  # the first answer token
            examples.append(dict(bucket=b, distance=d, depth=k, query=q, key=key, answer=answer.tolist(), seq=seq,
                                 where=list(range(first - 1, first - 1 + len(answer))), start=starts[j]))
    return [bk[:3] for bk in buckets], examples


def rooms(cfg, val, starts, T, L, meta):
    """The room for eval.py's settings (passkey_text: examples per bucket; 0 / missing: left out), as
    lab.measure.retrieval.make_rooms' extra: [(name, build, settings)] (val is unused: the filler is the room's own)."""
    n = cfg.get('passkey_text', 0)
    if not n:
        return []
    return [('passkey_text', lambda: passkey_text_examples(meta, starts, T, L, cfg['seed'], n),
             dict(examples=n, digits=DIGITS, format='Mohtashami & Jaggi 2023 (YaRN, LongLoRA)'))]
