"""
Hugging Face, in and out:

  config     Hugging Face's rope configs read back: one dict, a config.json, the per-layer form (layer_types)
  export     a run as a transformers folder (python -m lab.hf.export)
  gguf       llama.cpp's GGUF files (SmolLM2-135M pinned) loaded into model.py's GPT: load_checkpoint('gguf:<file>');
             python -m lab.hf.gguf --bench=True times it against transformers
  weights    Hugging Face folders (Llama, Mistral, Qwen2, SmolLM; GPT-NeoX as export writes it) loaded the same way:
             load_checkpoint('hf:<folder>'); safetensors read with numpy
  tokenizer  a GGUF's own BPE (SmolLM2's) or a folder's tokenizer.json (byte-level BPE) through tiktoken, registered
             as the tokenizers 'gguf' and 'hf' of data/
"""
