"""minicompiler: a small, readable deep-learning compiler for PyTorch programs."""
