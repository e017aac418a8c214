"""The paper's figures from plain data (rows, arrays), each written as PNG and SVG (the PNG path is returned).

Plain matplotlib on `matplotlib.figure.Figure` (no pyplot state); nothing here imports the rest of
binding_lens but `binding_lens.io`, so any layer can draw.

    accuracy_by_layer(rows, "fig3")              # sweep.json rows: a panel per model, a line per probe
    accuracy_by_model(rows, "fig10", "quadratic")  # one probe across models, normalized depth
    score_kde({layer: (scores, same)}, "kde")    # same- vs different-object score densities per layer
    attention_vs_score(attn, scores, "scatter")  # with Pearson r in the title
    ablation_figure(rows, "table2")              # conditions x metrics, table and bars
    demo_figure(rows, {"zoo:mae": "trained", "zoo:random": "twin"}, [Bars(...)], "demo")  # the demo's story
    binding_pca(vectors, instance, "pca")        # binding vectors' first two PCs by object
    twin_pca(differences, scene, "twin_pca")     # twins' residual differences on their first two PCs
    query_maps(image, {layer: map}, (r, c), "maps")  # one patch's IsSameObject map at every layer
    lines_by_layer(rows, {"RMSE": "rmse"}, "pos", ylabel="...")  # any per-layer series with its interval
    head_map_figure(drop, layers, "heads")       # [layers, heads] drop when one head is ablated
    bits_figure(rows, "bits", title)             # binding information by layer, token set and family
    bits_lost_figure(rows, "bits_lost", title)   # bits lost to interventions on a binding subspace
"""

from .ablation import ablation_figure
from .bits import bits_figure
from .head_map import head_map_figure
from .layers import accuracy_by_layer, accuracy_by_model
from .maps import query_maps
from .pca import binding_pca
from .scatter import attention_vs_score

__all__ = [
    "ablation_figure",
    "bits_figure",
    "accuracy_by_layer",
    "accuracy_by_model",
    "attention_vs_score",
    "binding_pca",
    "head_map_figure",
    "query_maps",
]
