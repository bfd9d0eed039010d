"""
Hugging Face, in and out:

  config  Hugging Face's rope configs read back: one dict, a config.json, the per-layer form (layer_types)
  export  a run as a transformers folder (python -m lab.hf.export)
"""
