"""Issue 34's pictures (lab/pictures/figures.py, lab/pictures/verdict_plots.py, lab/pictures/redraw.py), drawn from the committed demo run
(assets/demo/summary.json and its CSVs) as `eval.py --plot_only=True` draws them: the headline, the families, the forest
plot, the verdict grid, the heatmaps, the claims; no label on a curve; every committed PNG redrawable."""
import copy
import json
import os
import shutil

import numpy as np
import pytest

import plot
from lab.pictures.figures import METHOD_COLORS, headline_arms, plot_headline, spread
from lab.pictures.verdict_plots import plot_verdicts, verdict_rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, 'assets')
DEMO = os.path.join(ASSETS, 'demo')  # the demo's eval, as eval.py leaves it (its committed files)


@pytest.fixture
def demo(tmp_path):
    for name in ('summary.json', 'position_loss.csv', 'retrieval.csv', 'attention_entropy.csv', 'finetune_curves.csv'):
        shutil.copy(os.path.join(DEMO, name), tmp_path / name)
    return str(tmp_path), json.load(open(os.path.join(DEMO, 'summary.json')))


@pytest.fixture(scope='module')
def drawn(tmp_path_factory):
    """{picture: (its collisions, its PNG bytes)} of every picture plot_all draws for the demo, drawn once for the
    tests below (each module's save() wrapped, so each figure is checked as drawn)."""
    import importlib
    import lab.pictures.plot_kit
    out_dir, found = tmp_path_factory.mktemp('demo'), {}
    for name in ('summary.json', 'position_loss.csv', 'retrieval.csv', 'attention_entropy.csv', 'finetune_curves.csv'):
        shutil.copy(os.path.join(DEMO, name), out_dir / name)

    def grab(fig, path):
        bad = collisions(fig)
        found[os.path.basename(path)] = (bad, lab.pictures.plot_kit.save(fig, path)[1])
        return path, found[os.path.basename(path)][1]
    with pytest.MonkeyPatch.context() as mp:
        for m in ('lab.pictures.eval_plots', 'lab.pictures.figures', 'lab.pictures.verdict_plots',
                  'lab.pictures.retrieval_plots', 'lab.pictures.method_plots'):
            mp.setattr(importlib.import_module(m), 'save', grab)
        written = plot.plot_all(str(out_dir))  # what --plot_only does: every picture from the files
    assert sorted(found) == sorted(os.path.basename(p) for p in written)
    return found


def test_the_headline_arms_tell_the_story(demo):
    chosen = headline_arms(demo[1])
    assert [(r, a['name']) for r, a in chosen['zero-shot']] == [
        ('base', 'base (L=128)'), ('crop', 'crop w=128 (sliding)'), ('linear', 'linear s=8 zero-shot'),
        ('ntk', 'ntk s=8 zero-shot'), ('yarn', 'yarn s=8 β_fast=8 zero-shot'), ('rerope', 'rerope w=64 zero-shot')]
    assert [a['name'] for _, a in chosen['fine-tuned']] == ['base (L=128)', 'crop w=128 (sliding)', 'linear s=4 ft100',
                                                            'yarn s=4 β_fast=8 ft100', 'default ft100']
    for arms in chosen.values():  # at most six lines a panel, no two of one colour (one colour per method)
        colours = [METHOD_COLORS[r] for r, _ in arms]
        assert len(arms) <= 6 and len(set(colours)) == len(colours)


def test_labels_at_the_line_ends_keep_their_distance():
    got = spread([1.40, 1.41, 3.3, 1.39, 3.31], 0.1)
    assert np.all(np.diff(np.sort(got)) >= 0.1 - 1e-12) and got[2] == 3.3 and got[3] == 1.39


def test_the_forest_plot_rows_are_the_verdicts(demo):
    rows = {title: r for title, _, r in verdict_rows(demo[1])}
    assert list(rows) == ['each arm − crop w=128 (sliding), loss, 512-1024', 'named contrasts, loss, 512-1024',
                          'each arm − crop w=128 (sliding), exact_match, 512-1024',
                          'named contrasts, exact_match, 512-1024']  # (the demo has no own crops)
    named, crop = rows['named contrasts, loss, 512-1024'], rows['each arm − crop w=128 (sliding), loss, 512-1024']
    s = demo[1]['settings']
    assert len(named) == len(s['contrasts']['loss']['512-1024']) == 18
    assert {v for *_, v in named} <= {'better', 'worse', 'equivalent', 'unresolved'}
    want = {n: r for n, r in s['vs_crop']['crop w=128 (sliding)']['loss']['512-1024'].items() if not r['identical']}
    assert [(n, d, v) for n, d, _, v in crop] == [(n, r['diff'], r['verdict']) for n, r in want.items()]


def test_the_test_split_adds_each_arm_against_its_own_crop():
    summary = json.load(open(os.path.join(ASSETS, 'test', 'summary.json')))
    own = {t: r for t, k, r in verdict_rows(summary) if t.startswith('each arm − its own crop')}
    want = summary['settings']['vs_self']['loss']['512-1024']
    assert [(n, v) for n, _, _, v in own['each arm − its own crop, loss, 512-1024']] == \
        [(r['name'].replace(' vs ', '  −  '), r['verdict']) for r in want]


def test_both_pictures_draw_and_skip_when_their_data_is_absent(demo, drawn):
    out_dir, summary = demo
    w = summary['settings']['T'] // 32
    for name in ('headline.png', 'verdicts.png', 'verdict_grid.png'):
        png = drawn[name][1]
        assert png[:8] == b'\x89PNG\r\n\x1a\n' and len(png) > 50_000
    bare = copy.deepcopy(summary)
    bare['settings']['contrasts'], bare['settings']['vs_crop'] = None, None
    bare['arms'] = [a for a in bare['arms'] if a['kind'] == 'base']
    assert plot_verdicts(out_dir, bare) is None and plot_headline(out_dir, bare, w) is None


def test_families_are_small_multiples_with_distinct_lines(demo, drawn):
    from lab.pictures.figures import FAMILIES, family_panels
    summary = demo[1]
    panels = family_panels(summary)
    shown = [a['name'] for _, lines in panels for a, _ in lines[2:]]
    others = [a['name'] for a in summary['arms'] if a['name'] not in ('base (L=128)', 'crop w=128 (sliding)')
              and not (a.get('crop') and not a.get('self_crop_of'))]
    assert sorted(shown) == sorted(others)  # every arm in exactly one panel
    for title, lines in panels:
        assert [a['name'] for a, _ in lines[:2]] == ['base (L=128)', 'crop w=128 (sliding)'] and len(lines) <= 8
        keys = [(st['color'], str(st['ls'])) for _, st in lines]
        assert len(set(keys)) == len(keys), title  # no two lines of a panel look alike
        assert title.split(' (')[0] in FAMILIES
    yarns = {str(st['color']) for _, lines in panels for a, st in lines if a.get('rope_type') == 'yarn'
             and not a.get('position_map')}
    assert yarns == {'#1f77b4'}  # one colour per method in every panel
    assert len(drawn['families.png'][1]) > 100_000


def test_retrieval_heatmaps_count_every_example_once(demo, drawn):
    import matplotlib.pyplot as plt
    from lab.pictures.retrieval_plots import depth_edges, depth_panel
    summary = demo[1]
    s = summary['settings']
    arm = next(a for a in summary['arms'] if a['name'] == 'rerope w=64 zero-shot')
    fig, ax = plt.subplots()
    depth_panel(ax, arm, 'passkey_depth', depth_edges(s['L'], s['T']), s['L'])
    ns = [int(t.get_text().split('n=')[1]) for t in ax.texts]
    assert sum(ns) == sum(len(b['per_example']['depth']) for b in arm['passkey_depth'])  # each example in one cell
    plt.close(fig)
    assert len(drawn['retrieval_heatmaps.png'][1]) > 100_000


def test_retrieval_by_family_uses_the_loss_panels(demo, drawn):
    from lab.pictures.figures import family_panels, plot_retrieval_families
    summary = demo[1]
    assert len(drawn['retrieval_families.png'][1]) > 100_000
    assert all(a.get('retrieval') for _, lines in family_panels(summary) for a, _ in lines)  # every demo arm has one
    bare = copy.deepcopy(summary)
    for a in bare['arms']:
        a['retrieval'] = []
    assert plot_retrieval_families(demo[0], bare) is None


# ----------------------------------------------------------------------------- labels, the grid, the redraw

def collisions(fig):
    """[(what, text, other)] for every text drawn inside an axes that overlaps another such text, or that a line of
    that axes passes through (the line sampled along its segments, where it is inside the axes)."""
    import itertools
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    bad = []
    for ax in fig.axes:
        boxes = [(t.get_text(), t.get_window_extent(r).padded(-1)) for t in ax.texts if t.get_visible()
                 and t.get_text().strip()]
        if not boxes:
            continue
        bad += [('text', a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]
        frame = ax.get_window_extent(r)
        for line in ax.lines:
            xy = line.get_transform().transform(line.get_xydata()) if len(line.get_xydata()) else np.zeros((0, 2))
            t = np.linspace(0, 1, max(2, min(30, 3000 // max(1, len(xy)))))[None, :, None]  # along each segment
            pts = (xy[:-1, None] + (xy[1:] - xy[:-1])[:, None] * t).reshape(-1, 2) if len(xy) > 1 else xy
            pts = pts[np.isfinite(pts).all(1) & (pts[:, 0] >= frame.x0) & (pts[:, 0] <= frame.x1) &
                      (pts[:, 1] >= frame.y0) & (pts[:, 1] <= frame.y1)]
            bad += [('line', t, line.get_label()) for t, b in boxes if len(pts) and (
                (pts[:, 0] > b.x0) & (pts[:, 0] < b.x1) & (pts[:, 1] > b.y0) & (pts[:, 1] < b.y1)).any()]
    return bad


def test_the_collision_check_sees_a_label_on_a_curve():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label='diagonal')
    ax.text(0.5, 0.5, 'on the line', ha='center', va='center')
    ax.text(0.52, 0.5, 'on the label too', ha='center', va='center')
    ax.text(0.1, 0.9, 'clear of both')
    got = collisions(fig)
    plt.close(fig)
    assert ('line', 'on the line', 'diagonal') in got and ('text', 'on the line', 'on the label too') in got
    assert not [c for c in got if 'clear of both' in c]


def test_no_label_sits_on_a_curve_or_on_another_label(drawn):
    """Every picture plot_all draws for the demo, checked as drawn (the drawn fixture)."""
    assert len(drawn) >= 13 and {'headline.png', 'loss_vs_position.png', 'verdict_grid.png'} <= set(drawn)
    assert {n: c for n, (c, _) in drawn.items() if c} == {}


def test_the_verdict_grid_holds_every_room_verdict(demo):
    from lab.pictures.verdict_plots import grid_rows
    s = demo[1]['settings']
    panels = {title: (kinds, dict(rows)) for title, kinds, rows in grid_rows(demo[1])}
    kinds, rows = panels['each arm − crop w=128 (sliding)']
    assert kinds == list(s['vs_crop']['crop w=128 (sliding)'])  # loss, the passkey and all seven rooms
    assert 'crop w=128 (sliding)' not in rows  # the crop against itself: identical everywhere, left out
    for kind in kinds:
        table = s['vs_crop']['crop w=128 (sliding)'][kind]
        col = list(table)[-1]
        for name, cells in rows.items():
            r = table[col][name]
            want = 'not judged' if r.get('not_judged') else \
                'identical' if r['identical'] else r['verdict']
            assert cells[kind] == (r['diff'], want, col)
    assert rows['rerope w=64 zero-shot']['needles_words'][1] == 'not judged'  # the base finds 0% inside L
    assert rows['crop w=128 (truncated)']['recall_gain'][1] == 'identical'  # (the two crops agree exactly there)
    named = panels['named contrasts'][1]
    assert len(named) == 18 and named['yarn s=8 β_fast=8 zero-shot  −  linear s=8 zero-shot']['loss'][1] == 'better'


def test_the_claims_plot_shows_every_claim_record(tmp_path):
    import glob
    from lab.pictures.verdict_plots import claim_rows, plot_claims
    records = [json.load(open(p)) for p in glob.glob(os.path.join(ASSETS, 'test', 'claims', '*.json'))]
    panels = dict(claim_rows(os.path.join(ASSETS, 'test', 'claims')))
    assert sum(len(r) for r in panels.values()) == len(records) >= 26
    by_id = {label.split(':')[0]: (d, v) for rows in panels.values() for label, d, _, v, _ in rows}
    assert by_id == {r['id']: (r['result']['diff'], r['result']['verdict']) for r in records}
    assert {label.split(':')[0] for label, *_ in panels['points']} == {
        r['id'] for r in records if r['comparison']['kind'] not in ('loss', 'digits')}  # (digits: a panel of its own)
    path, png = plot_claims(os.path.join(ASSETS, 'test', 'claims'), str(tmp_path / 'claims.png'))
    assert png[:8] == b'\x89PNG\r\n\x1a\n' and plot_claims(str(tmp_path), str(tmp_path / 'x.png')) is None


def test_every_committed_picture_redraws_from_committed_files(tmp_path):
    from lab.pictures import redraw
    assert redraw.check() == []  # each PNG in assets/ has a recipe, each recipe's summary is committed
    (tmp_path / 'stray.png').write_bytes(b'x')
    assert redraw.check(str(tmp_path))[0] == \
        "assets/stray.png has no recipe in lab/pictures/redraw.py (add its folder to PLAN, or remove the picture)"
    assert "assets/studies/pairs/pair_usage.json is not committed, so its picture cannot be redrawn" in \
        redraw.check(str(tmp_path))  # lab.pairs' picture has its own recipe: from pair_usage.json, not a summary
    (tmp_path / 'studies' / 'slow_pairs').mkdir(parents=True)
    shutil.copy(os.path.join(ASSETS, 'studies', 'slow_pairs', 'summary.json'),  # kept without its position CSV
                tmp_path / 'studies' / 'slow_pairs')
    written = redraw.redraw(['slow_pairs'], assets=str(tmp_path))
    assert written == [str(tmp_path / 'studies' / 'slow_pairs' / 'families.png')]
    assert open(written[0], 'rb').read(8) == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(ValueError, match="no study named 'nosuch'"):  # (cli prints it as one line, exit 2)
        redraw.main(['nosuch'])
