"""
Hugging Face and the inference engines, in and out:

  config        Hugging Face's rope configs read back: one dict, a config.json, the per-layer form (layer_types)
  inspect       what a config's rope does, per kind of layer, and how each engine reads it (python -m lab.hf.inspect)
  engines       the data table behind it: how transformers 4.x / 5.x, vLLM, SGLang and llama.cpp read each rope
                type, each row citing the source file and version it was read from
  export        a run as a transformers folder (python -m lab.hf.export): GPT-NeoX for the lab's own runs
  export_llama  a real model (gguf:, hf:) in its own architecture: Llama, Mistral, Qwen2
  folder        what every exported folder needs: the shared refusals, the rope in HF form, safetensors, tokenizers
  serve         the vLLM and llama-server lines for an exported rope, or what an engine cannot express
  gguf          llama.cpp's GGUF files (SmolLM2-135M pinned) loaded into model.py's GPT: load_checkpoint('gguf:<file>');
                python -m lab.hf.gguf --bench=True times it against transformers
  weights       Hugging Face folders (Llama, Mistral, Qwen2, SmolLM; GPT-NeoX as export writes it) loaded the same way:
                load_checkpoint('hf:<folder>'); safetensors read with numpy
  tokenizer     a GGUF's own BPE (SmolLM2's) or a folder's tokenizer.json (byte-level BPE) through tiktoken, registered
                as the tokenizers 'gguf' and 'hf' of data/
"""
