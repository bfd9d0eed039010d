"""The record behind each claim (issue 31 item 6, lab/verdicts/claims.py): every registered comparison recomputes from the
summary it names to what that summary stores, its committed record in assets/test/claims/ is current, and the sentence that
states it in README.md or docs/results.md still prints its difference and verdict; a doctored summary, a stale record
or a changed sentence is reported."""
import json
import shutil

import numpy as np
import pytest

from lab.verdicts import claims


@pytest.mark.parametrize('c', claims.CLAIMS, ids=[c['id'] for c in claims.CLAIMS])
def test_each_claim_holds(c):
    assert claims.problems(c) == []


def test_claim_ids_are_unique_and_the_index_lists_them():
    ids = [c['id'] for c in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    with open(f"{claims.OUT}/README.md", encoding='utf-8') as f:
        text = f.read()
    assert all(f"[{i}]({i}.json)" in text for i in ids)


def test_a_record_carries_the_raw_values_and_where_they_came_from():
    c = next(c for c in claims.CLAIMS if c['table'] == 'vs_self')
    r = claims.record(c)
    v = r['values']
    assert len(v['a']) == len(v['seeds_a'] or [0]) and len(v['a'][0]) == len(v['units']) == len(v['b'][0])
    assert {'window', 'play'} <= set(v['units'][0])
    assert r['provenance']['torch'] and all(r['result']['verdict'] in q for _, q in c['said'])
    # the difference is the mean over seeds and units of a - b (both arms scored every window here)
    import numpy as np
    d = (np.array(v['a']).mean(0) - np.array(v['b']).mean(0)).mean()
    assert d == pytest.approx(r['result']['diff'], abs=1e-6)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A copy of the repository's claim files and the test summary, for doctoring."""
    for d in ('assets/test/claims', 'docs'):
        shutil.copytree(f"{claims.ROOT}/{d}", tmp_path / d)
    shutil.copy(f"{claims.ROOT}/README.md", tmp_path / 'README.md')
    shutil.copy(f"{claims.ROOT}/{claims.TEST}", tmp_path / claims.TEST)
    monkeypatch.setattr(claims, 'ROOT', str(tmp_path))
    monkeypatch.setattr(claims, 'OUT', str(tmp_path / 'assets' / 'test' / 'claims'))
    claims.load.cache_clear()
    yield tmp_path
    claims.load.cache_clear()


def test_doctored_summary_stale_record_and_changed_sentence_are_reported(sandbox):
    c = claims.CLAIMS[0]
    (where, quote), = c['said'][:1]
    doc = sandbox / where
    doc.write_text(doc.read_text(encoding='utf-8').replace(quote, 'about the same'), encoding='utf-8')
    assert any('no longer says' in p for p in claims.problems(c))
    wrong = dict(c, said=[(where, quote.replace('better', 'equivalent'))])
    assert any('does not state' in p for p in claims.problems(wrong))
    path = sandbox / claims.TEST
    s = json.loads(path.read_text(encoding='utf-8'))
    arm = next(a for a in s['arms'] if a['name'] == c['a'])
    col = arm['per_window'][c['column']]
    arm['per_window'][c['column']] = [[x + 0.5 for x in row] for row in col]  # the raw values no longer give the
    path.write_text(json.dumps(s), encoding='utf-8')                          # stored verdict
    claims.load.cache_clear()
    got = claims.problems(c)
    assert any('the summary stores' in p for p in got) and any('stale' in p for p in got)


def test_check_names_an_unknown_claim():
    with pytest.raises(ValueError, match='no claim named'):
        claims.main(['--check', 'no-such-claim'])


def test_a_claim_in_a_room_its_base_fails_inside_L_is_refused():
    """Word needles on the test split: the base finds none inside L, so 'ReRoPE equivalent to the crop' there is floor
    against floor (it was a registered claim until issue 46); stated as a claim, it is refused by name."""
    c = claims.claim('rerope-word-needles-vs-crop-512', claims.RR, claims.CROP, '512-1024', 'any words',
                     table=claims.VS_CROP, kind='needles_words')
    got = claims.problems(c)
    assert any('no positive control: base (L=128) finds 0% inside L' in p and 'not judged' in p for p in got), got
    ok = claims.claim('p', claims.RR, claims.CROP, '512-1024', 'x', table=claims.VS_CROP, kind='exact_match')
    assert not any('positive control' in p for p in claims.problems(ok))


def test_a_between_claim_records_each_pairs_values_and_they_give_its_difference():
    """A 'between' claim (a --combine --combine_minus bases.json, e.g. the three sink bases against three plain ones):
    its record holds each pair's per-window values on both kinds and the pairs' folders, the difference is the mean of
    a - b over pairs and windows, and the interval is wider than the windows alone would make it (pairs are a random
    factor: a contrast that differs between pairs cannot be settled by more windows)."""
    c = next(c for c in claims.CLAIMS if c['table'] == 'between')
    r = claims.record(c)
    v = r['values']
    a, b = np.array(v['a']), np.array(v['b'])
    assert a.shape == b.shape == (len(v['pairs']), len(v['units'])) and len(v['pairs']) >= 2
    assert all(p.startswith('assets/') and q.startswith('assets/') for p, q in v['pairs'])  # committed evals only
    assert (a - b).mean() == pytest.approx(r['result']['diff'], abs=1e-6)
    d = a - b
    windows_only = 1.96 * d.mean(0).std(ddof=1) / np.sqrt(d.shape[1])  # as if the pairs were one base
    lo, hi = r['result']['ci']
    assert (hi - lo) / 2 > windows_only


def test_every_interval_in_the_readme_has_its_file_beside_it():
    """Issue 62: a number with an interval in README.md sits in a paragraph, list or table row that links the committed
    file it comes from (a claims record, a summary, a study); the claims among them are checked above."""
    import re
    with open(f"{claims.ROOT}/README.md", encoding='utf-8') as f:
        text = re.sub(r'```.*?```', '', f.read(), flags=re.S)  # (commands, not claims)
    interval = re.compile(r'\d\.\d+ \[[−+-]?\d')
    blocks = [b for para in text.split('\n\n') for b in (para.splitlines() if para.lstrip().startswith('|')
                                                          else [para])]
    bare = [b.strip()[:80] for b in blocks if interval.search(b) and '](assets/' not in b]
    assert bare == [], bare
