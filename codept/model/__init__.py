"""The model layer: one transformer (transformer.py), its heads (heads.py), the staged forwards
(regimes.py), the head registry and Pretrainer that joins model and heads (pretrainer.py), and the
way to and from transformers' BERT folders (hf.py). Import the submodules directly; nothing is
registered on import."""
