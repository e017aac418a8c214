"""Seeing binding: the interactive IsSameObject viewer, circuitsvis attention views and the paper's figures.

    from binding_lens.vis import viewer, viewer_from_run, attention_view
    viewer(model, scenes, {"quadratic": {6: probe}}, "viewer.html", size=224)   # one offline HTML file
    viewer_from_run("runs/demo/dino", [0, 1])          # from a sweep run: runs/demo/dino/viewer.html
    attention_view(cache, layer=5, model=model, path="attn.html")              # circuitsvis, self-contained

Figures (PNG + SVG) live in `binding_lens.figures` (also reachable as `binding_lens.vis.figures`).
"""

from .. import figures  # noqa: F401  (binding_lens.vis.figures, as before the figures got their own package)
from ..analyses.run import load_run_probes
from .circuits import attention_view, pattern_view
from .from_run import viewer_from_run
from .html_viewer import InlineViewer, ModelEntry, iframe_html, show, viewer, viewer_html
from .labels import token_labels

__all__ = [
    "InlineViewer",
    "ModelEntry",
    "attention_view",
    "iframe_html",
    "load_run_probes",
    "pattern_view",
    "show",
    "token_labels",
    "viewer",
    "viewer_from_run",
    "viewer_html",
]
