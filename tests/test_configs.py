"""Every committed config file loads against its script's settings (no unknown key, no wrong type), and eval's pass
eval.py's range checks and name only contrasts in the 'A | B; ...' form, so that a typo in a make target's config
fails here and not an hour into a run."""
import glob
import os

import pytest

import eval as ev
import finetune_long
import search_longrope
import train
from lab import doc_study
from configurator import get_config
from lab.engine.checks import check_eval_settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = {'eval': ev.DEFAULTS, 'train': train.DEFAULTS, 'finetune': finetune_long.DEFAULTS,
           'search': search_longrope.DEFAULTS, 'real': doc_study.DEFAULTS}  # real_model_*: lab.doc_study's
CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'config', '*.py')) +  # the main targets' configs and the studies'
                 glob.glob(os.path.join(ROOT, 'config', 'studies', '*.py')))


def test_every_config_belongs_to_a_script():
    assert CONFIGS and all(os.path.basename(p).split('_')[0] in SCRIPTS for p in CONFIGS)


@pytest.mark.parametrize('path', CONFIGS, ids=[os.path.basename(p) for p in CONFIGS])
def test_config_loads(path, tmp_path):
    cfg = get_config([path], SCRIPTS[os.path.basename(path).split('_')[0]])
    if os.path.basename(path).startswith('eval_'):
        check_eval_settings(dict(cfg, out_dir=str(tmp_path / 'out')))
        for pair in filter(None, (c.strip() for c in cfg['contrasts'].split(';'))):
            a, b = (x.strip() for x in pair.split('|'))
            assert a and b and a != b, pair
