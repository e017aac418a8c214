"""Seeing binding: the interactive IsSameObject viewer, circuitsvis attention views and the paper's figures.

    from binding_lens.vis import viewer, viewer_from_run, attention_view
    viewer(model, scenes, {"quadratic": {6: probe}}, "viewer.html", size=224)   # one offline HTML file
    viewer_from_run("runs/demo/dino", [0, 1])          # from a sweep run: runs/demo/dino/viewer.html
    attention_view(cache, layer=5, model=model, path="attn.html")              # circuitsvis, self-contained

Figures (PNG + SVG) live in `binding_lens.figures`.
"""

from .circuits import attention_view, pattern_view
from .from_run import viewer_from_run
from .html_viewer.build import ModelEntry, viewer, viewer_html
from .html_viewer.notebook import InlineViewer, show

__all__ = [
    "InlineViewer",
    "ModelEntry",
    "attention_view",
    "pattern_view",
    "show",
    "viewer",
    "viewer_from_run",
    "viewer_html",
]
