"""The paper's figures from plain data, each written as PNG and SVG (the PNG path is returned).

    accuracy_by_layer(rows, "fig3")              # sweep.json rows: a panel per model, a line per probe
    accuracy_by_model(rows, "fig10", "quadratic")  # one probe across models, normalised depth
    score_kde({layer: (scores, same)}, "kde")    # same- vs different-object score densities per layer
    attention_vs_score(attn, scores, "scatter")  # with Pearson r in the title
    ablation_table(rows, "table2")               # conditions x metrics, table and bars
    binding_pca(vectors, instance, "pca")        # binding vectors' first two PCs by object
"""

from .ablation import ablation_table
from .distributions import score_kde
from .layers import accuracy_by_layer, accuracy_by_model
from .pca import binding_pca, principal_components
from .scatter import attention_vs_score, pearson_r

__all__ = ["ablation_table", "accuracy_by_layer", "accuracy_by_model", "attention_vs_score", "binding_pca",
           "pearson_r", "principal_components", "score_kde"]
