"""Issue 61 item 2: no registration by import. Each registry names the room that fills each of its entries and imports
it on first use (model.ATTENTION_ROOMS, data.checkpoints.LOADER_MODULES, data.sources.TOKENIZER_ROOMS); no script or room
imports a room for its side effect."""
import glob
import os
import re
import subprocess
import sys

from conftest import ROOT

REGISTRIES = {  # registry -> (the table naming the rooms, how a room adds an entry)
    'ATTENTION': ('model', 'ATTENTION_ROOMS', r"^ATTENTION\['(\w+)'\] ="),
    'LOADERS': ('data.checkpoints', 'LOADER_MODULES', r"^LOADERS\['(\w+)'\] ="),
    'TOKENIZERS': ('data.sources', 'TOKENIZER_ROOMS', r"^TOKENIZERS\['(\w+)'\] ="),
}


def module_of(path):
    return os.path.relpath(path, ROOT)[:-3].replace(os.sep, '.')


def test_every_entry_a_room_adds_is_named_in_its_table():
    import importlib
    for registry, (home, table, pattern) in REGISTRIES.items():
        named = getattr(importlib.import_module(home), table)
        found = {}
        for path in glob.glob(os.path.join(ROOT, 'lab', '**', '*.py'), recursive=True):
            with open(path, encoding='utf-8') as f:
                for key in re.findall(pattern, f.read(), re.M):
                    found[key] = module_of(path)
        assert found and found == named, (registry, found, named)


def test_no_module_imports_a_room_for_its_side_effect():
    side = re.compile(r"^import (lab\.[\w.]+)(, lab\.[\w.]+)*  # noqa: (E401,)?F401", re.M)
    paths = glob.glob(os.path.join(ROOT, '*.py')) + glob.glob(os.path.join(ROOT, 'lab', '**', '*.py'), recursive=True)
    for path in paths:
        with open(path, encoding='utf-8') as f:
            assert not side.search(f.read()), path


def test_a_model_of_every_class_builds_in_a_fresh_process_that_imported_model_alone():
    code = ("from model import GPT, GPTConfig, ATTENTION_ROOMS\n"
            "from data.checkpoints import checkpoint_exists\n"
            "for a in ATTENTION_ROOMS:\n"
            "    kw = dict(pos_emb=a) if a in ('alibi', 'fire', 'cope') else dict(attention=a)\n"
            "    if 'fope' in a:  # (FoPE mixes the tables of clipped RoPE, which it requires: lab/fope.py)\n"
            "        kw['rope_scaling'] = {'rope_type': 'clip', 'original_max_position_embeddings': 8}\n"
            "    kw = dict(layers='conv,rope', n_layer=2) if a == 'conv' else kw  # (conv: a layer kind)\n"
            "    kw = dict(kw, pos_emb='none') if a == 'inkling' else kw  # (Inkling-2 turns nothing: lab/inkling.py)\n"
            "    GPT(GPTConfig(**{**dict(block_size=8, vocab_size=5, n_layer=1, n_head=2, n_embd=8), **kw}))\n"
            "from data.sources import get_tokenizer, TOKENIZERS\n"
            "assert not TOKENIZERS\n"
            "try:\n"
            "    get_tokenizer({'tokenizer': 'hf', 'tokenizer_file': '/nonexistent/tokenizer.json'})\n"
            "except Exception as e:\n"
            "    assert 'import' not in str(e), e\n"
            "assert 'hf' in TOKENIZERS and 'gguf' in TOKENIZERS\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == 'ok', r.stderr
