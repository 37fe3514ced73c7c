"""codept: structure-aware pretraining data and training for code models.

Layers (one direction): ``codept.structure`` (tree-sitter -> CodeView) -> objectives -> train.
See README.md for the two commands and docs/architecture.md for the layers and the data flow.
"""

__version__ = "0.1.0"
