"""The model layer: one transformer (transformer.py), its heads (heads.py), and the way to and from
transformers' BERT folders (hf.py). Import the submodules directly; nothing is registered on import."""
