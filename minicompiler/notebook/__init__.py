"""Notebook layer: static HTML views, IPython magics, widgets and charts of a CompileReport."""
