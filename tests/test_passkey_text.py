"""lab/measure/passkey_text.py: the literature's natural-language passkey, on a char vocabulary (the fixture corpus'
characters with the digits and '?' added) and on SmolLM2's own tokenizer (skipped without its GGUF): the same
examples for a seed, the key at the stated distance, the answer tokens the key's digits, no digit in the filler, and
room_scores' outcomes with a model that copies (every key found) and one that ignores the context (none)."""
import os

import numpy as np
import pytest
import torch

from data.sources import DEFAULT_CACHE_DIR, SMOLLM2_GGUF, get_tokenizer
from lab.measure import passkey_text as pt
from lab.measure.outcomes import room_scores
from lab.measure.retrieval import make_rooms
from test_retrieval import CopyOracle, corpus, scorer  # noqa: F401  (corpus: the fixture)

GGUF = os.path.join(DEFAULT_CACHE_DIR, SMOLLM2_GGUF)
SMOL = dict(dataset='shakespeare_smollm2', tokenizer='gguf', tokenizer_file=SMOLLM2_GGUF, vocab_size=49152,
            eot_token=0)
STARTS = list(range(0, 800, 100))  # eight window starts: the slots the examples are tagged with


@pytest.fixture(scope='module')
def chars(corpus):
    """The fixture's char vocabulary with the characters of the passkey text it lacks ('?' and the digits)."""
    need = set(pt.INTRO + pt.FILLER + pt.KEY + pt.QUESTION + '0123456789')
    itos = corpus['meta']['itos'] + sorted(need - set(corpus['meta']['itos']))
    return dict(corpus['meta'], itos=itos, vocab_size=len(itos))


@pytest.fixture(scope='module')
def smol():
    if not os.path.isfile(GGUF):
        pytest.skip(f"no {GGUF} (python data/shakespeare_smollm2/prepare.py fetches it)")
    return SMOL


def check_layout(meta, buckets, examples, n, L, T):
    """Every example: the text is the passkey's, the key sentence at depth = query - distance, the distance inside its
    bucket, the row inside its bucket's limit, the scored tokens the key's digits, and no other digit in the row."""
    encode, decode = get_tokenizer(meta)
    p = pt.parts(meta)
    assert [sum(e['bucket'] == b for e in examples) for b in range(len(buckets))] == [n] * len(buckets)
    for e in examples:
        seq, q, k, d, key = e['seq'], e['query'], e['depth'], e['distance'], e['key']
        sentence = encode(pt.KEY.format(key=key))
        assert q - k == d and buckets[e['bucket']][1] <= d < buckets[e['bucket']][2]
        assert seq[:len(p['intro'])].tolist() == p['intro'].tolist()
        assert seq[k:k + len(sentence)].tolist() == sentence
        assert seq[q:q + len(p['question'])].tolist() == p['question'].tolist()
        assert decode(seq[q:]).startswith(pt.QUESTION) and decode(seq).endswith('The pass key is ' + key)
        assert [int(seq[w + 1]) for w in e['where']] == e['answer'] and e['where'][-1] == len(seq) - 2
        assert decode(e['answer']) == key and len(key) == 5 and key.isdigit()
        text = decode(seq)
        assert sum(c.isdigit() for c in text) == 15  # the key twice in its sentence, once as the answer
        assert not any(c.isdigit() for c in decode(np.concatenate([seq[:k], seq[k + len(sentence):q]])))
        assert len(seq) <= (T if d >= L else L) and e['start'] in STARTS
    return examples


def test_char_vocabulary(chars):
    L, T = 512, 2048
    buckets, ex = pt.passkey_text_examples(chars, STARTS, T, L, 7, 3)
    # the instruction is 146 characters, question and answer 38 + 1 + 5, the key sentence 59: every distance in a
    # bucket leaves room for them (384-467 would not, so that bucket is empty)
    assert buckets == [('59-322', 59, 323), ('512-1024', 512, 1024), ('1024-2048', 1024, 1859)]
    check_layout(chars, buckets, ex, 3, L, T)
    again = pt.passkey_text_examples(chars, STARTS, T, L, 7, 3)[1]
    assert all(np.array_equal(a['seq'], b['seq']) and a['where'] == b['where'] for a, b in zip(ex, again))
    other = pt.passkey_text_examples(chars, STARTS, T, L, 8, 3)[1]
    assert [e['key'] for e in other] != [e['key'] for e in ex]
    assert [e['start'] for e in ex[:3]] == STARTS[:3]


def test_needs_the_characters_and_room_inside_L(corpus, chars):
    with pytest.raises(ValueError, match=r"cannot write the pass key \(character '\d' is not in the vocabulary"):
        pt.passkey_text_examples(corpus['meta'], STARTS, 2048, 512, 7, 3)  # the fixture's digits: '1' and '2'
    with pytest.raises(ValueError, match=r"cannot write the passkey text \(character '\?' is not"):
        pt.passkey_text_examples(dict(corpus['meta'], itos=[c for c in corpus['meta']['itos'] if c != '?']),
                                 STARTS, 2048, 512, 7, 3)
    with pytest.raises(ValueError, match='does not fit inside L=128'):
        pt.passkey_text_examples(chars, STARTS, 1024, 128, 7, 3)
    with pytest.raises(ValueError, match='needs 1..8 examples per bucket'):
        pt.passkey_text_examples(chars, STARTS, 2048, 512, 7, 9)


def test_smollm2_tokens(smol):
    """SmolLM2's BPE: instruction 29 tokens, filler cycle 24, question 10, the answer 'Ġ' (kept in the prompt) and
    five digit tokens; the parts joined in tokens are the text's own tokenization."""
    encode, decode = get_tokenizer(smol)
    p = pt.parts(smol)
    assert (len(p['intro']), len(p['filler']), len(p['question'])) == (29, 24, 10)
    sentence, lead, answer = pt.key_tokens(smol, '48213')
    assert lead.tolist() == [216] and decode(lead) == ' ' and answer.tolist() == [36, 40, 34, 33, 35]
    assert len(sentence) == 25
    L, T = 256, 1024
    buckets, ex = pt.passkey_text_examples(smol, STARTS, T, L, 7, 4)
    assert buckets == [('25-191', 25, 192), ('192-211', 192, 212), ('256-512', 256, 512), ('512-1024', 512, 980)]
    check_layout(smol, buckets, ex, 4, L, T)
    assert all(encode(decode(e['seq'])) == e['seq'].tolist() for e in ex)


def test_room_scores_a_copier_and_a_context_blind_model(chars, corpus):
    """Through make_rooms' extra (as eval.py's rooms): settings say passkey_text's own count; a model that copies
    the longest earlier suffix finds every key (exact 1, loss near 0), one that always writes the token 1 none."""
    L, T = 512, 1024
    cfg = dict(seed=3, passkey_text=2)
    assert pt.rooms(dict(seed=3), None, STARTS, T, L, chars) == []  # off unless asked
    rooms, skipped = make_rooms(corpus['val'], STARTS, T, L, chars, 3, 4, 8, depth_len=0, needles=0, recall_len=0,
                                extra=pt.rooms(cfg, corpus['val'], STARTS, T, L, chars))
    room = rooms['passkey_text']
    assert not skipped and room['settings']['examples'] == 2 and room['settings']['digits'] == 5
    V = chars['vocab_size']
    copied = room_scores(scorer(CopyOracle(V)), room['buckets'], room['examples'])
    assert [r['exact'] for r in copied] == [[True, True], [True, True]]
    assert max(max(r['loss']) for r in copied) < 1e-6

    class Blind(CopyOracle):
        def forward(self, idx, targets, **kw):
            return super().forward(torch.arange(idx.shape[1]).expand_as(idx), targets, **kw)  # no repeat: token 1
    blind = room_scores(scorer(Blind(V)), room['buckets'], room['examples'])
    assert [r['exact'] for r in blind] == [[False, False], [False, False]]
    assert min(min(r['loss']) for r in blind) > 10
