"""method notes section 7's toy experiments, on any hooked model (zoo models by default).

    result = toy_experiments(HookedViT.from_pretrained("zoo:dino"), "runs/toy-dino")
    print(result.text())

Twin scenes (the `twins` preset, snapped to the model's patch grid so the two copies cover corresponding
patches with identical pixels): twin A, its exact copy B, a similar object (same class and color, new
texture phase, smaller) and one of another class. A `quadratic` probe per layer, trained on the
model's ordinary scenes (the `default` preset), is read on them:

- `maps.png`: the IsSameObject map of one query patch of twin A at every layer (P(same) of the query
  with every patch), beside the image.
- `kde.png`: per layer, the densities of the probe's P(same) for pairs within one twin (same object),
  across the twins, twin-similar and twin-other. `separation` rows: per layer, AUROC of same-object
  pairs against each other kind, with 95 % bootstrap intervals over scenes; 0.5 = not told apart.
  `vs_twin_at_equal_distance` compares same-object and cross-twin pairs only at equal grid distance, so
  position cannot decide (pooled `vs_twin` is mostly distance: the twins lie apart).
- `twin_pca.png`: PCA of the residual differences x_A(p) - x_B(p) between corresponding patches of the
  twins. `pca` rows: per layer, the variance share of the first three components, and how
  consistently the first component splits the twins within a scene (|mean sign of the projection| over
  a scene's patch pairs, 1 = every pair on the same side, about 0 for noise; interval over scenes).
- `position.png`: a patch's row and column decoded linearly (ridge) from its token, per layer, on
  held-out scenes: RMSE in patches with 95 % bootstrap intervals, beside the same regression fitted
  on shuffled positions (the control: what no position information gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..activations.tokens import read_token_sets
from ..data import SyntheticScenes
from ..errors import InputError
from ..figures import query_maps
from ..figures.distributions import score_kde
from ..figures.layers import lines_by_layer
from ..figures.pca import twin_pca
from ..hooks import HookedViT
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..io.atomic import write_json_atomic, write_text_atomic
from ..io.documents import Json
from ..probes import ProbeTrainingConfig, split_by_image
from ..probes.metrics import auroc_replicates
from ..stats import bootstrap_mean, percentile_interval
from ..stats.bootstrap import bootstrap_counts
from ..stats.record import Row
from .ablation import Labeled, label_images
from .layer_probes import fit_quadratic_probe
from .report import format_table, interval_text, write_table

PAIR_KINDS = ("same object", "twin", "similar", "other class")
SEPARATIONS = ("vs_twin", "vs_twin_at_equal_distance", "vs_similar", "vs_other")
N_BOOT = 1000


@dataclass(frozen=True)
class ToyResult:
    """Each layer's rows of the three tables (`text()` prints them), the files written and the settings."""

    separation: list[Row]
    pca: list[Row]
    position: list[Row]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    settings: Json = field(default_factory=dict)
    replicates: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    """layer -> the bootstrap replicates of `vs_twin`, `vs_similar`, `vs_other` (over twin scenes), `rmse` and
    `rmse_shuffled` (over test images); one draw per replicate at every layer, so layers are paired."""

    def text(self) -> str:
        sep = format_table(
            [r | {k: interval_text(r, k) for k in SEPARATIONS} for r in self.separation],
            ["layer", *SEPARATIONS],
        )
        pca = format_table(
            [r | {"consistency": interval_text(r, "consistency")} for r in self.pca],
            ["layer", "top3_variance", "consistency"],
        )
        pos = format_table(
            [r | {k: interval_text(r, k) for k in ("rmse", "rmse_shuffled")} for r in self.position],
            ["layer", "rmse", "rmse_shuffled"],
        )
        return (
            f"twins told apart: AUROC of same-object pairs against each kind (0.5 = not told apart)\n{sep}\n\n"
            f"PCA of twin differences: variance in the first 3 PCs, consistency of PC1's split\n{pca}\n\n"
            f"position decoded from the token: RMSE in patches (shuffled-label control beside it)\n{pos}"
        )


def twin_scenes(size: tuple[int, int], grid: tuple[int, int], n: int, seed: int = 0) -> SyntheticScenes:
    """`twins` scenes of `size` px snapped to a `grid` of patches, objects a quarter to a third of the side
    across (the paper's twins at 224 px: 4 to 5.5 sixteenths)."""
    side = min(grid)
    return SyntheticScenes("twins", n=n, size=size, seed=seed, reference_grid=side, object_patches=(side / 4, side / 3))


def _roles(scene: Any) -> dict[str, int]:
    """Instance id of twin A, its copy B, the similar object and the other-class one."""
    ids: dict[str, int] = {}
    for obj in scene.metadata["objects"]:
        role = obj["role"]
        key = "B" if role == "twin" and obj["twin_of"] is not None else "A" if role == "twin" else role
        ids[key] = obj["instance_id"]
    return ids


def _pair_kinds(instance: Int[Tensor, " n"], ids: dict[str, int]) -> dict[str, tuple[Tensor, Tensor]]:
    """(query, key) patch indices of every pair kind, queries on the twins."""

    def patches(*keys: str) -> Tensor:
        return torch.nonzero(torch.isin(instance, torch.tensor([ids[k] for k in keys if k in ids]))).flatten()

    a, b, twins = patches("A"), patches("B"), patches("A", "B")
    same = [(p, q) for group in (a, b) for p in group.tolist() for q in group.tolist() if p < q]
    kinds = {
        "same object": same,
        "twin": [(p, q) for p in a.tolist() for q in b.tolist()],
        "similar": [(p, q) for p in twins.tolist() for q in patches("similar").tolist()],
        "other class": [(p, q) for p in twins.tolist() for q in patches("other_class").tolist()],
    }
    return {
        kind: (
            torch.tensor([p for p, _ in pairs], dtype=torch.long),
            torch.tensor([q for _, q in pairs], dtype=torch.long),
        )
        for kind, pairs in kinds.items()
    }


def _correspondence(instance: Int[Tensor, "rows cols"], ids: dict[str, int]) -> tuple[Tensor, Tensor]:
    """Flat indices (p in A, p' in B) of corresponding patches: B's patches are A's shifted by one offset."""
    rows, cols = instance.shape
    a, b = torch.nonzero(instance == ids["A"]), torch.nonzero(instance == ids["B"])
    if len(a) == 0 or len(b) == 0:
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)
    offset = (b.float().mean(0) - a.float().mean(0)).round().long()
    shifted = a + offset
    inside = (shifted >= 0).all(1) & (shifted[:, 0] < rows) & (shifted[:, 1] < cols)
    a, shifted = a[inside], shifted[inside]
    match = instance[shifted[:, 0], shifted[:, 1]] == ids["B"]
    a, shifted = a[match], shifted[match]
    return a[:, 0] * cols + a[:, 1], shifted[:, 0] * cols + shifted[:, 1]


def position_decoding(
    train: Float[Tensor, "train_image n d_model"],
    test: Float[Tensor, "test_image n d_model"],
    grid: tuple[int, int],
    *,
    ridge: float = 1e-2,
    shuffle_seed: int = 0,
    n_boot: int = N_BOOT,
) -> dict[str, float]:
    """Ridge regression of each patch's (row, col) from its token, fitted on `train` images, scored on `test`:
    RMSE in patches with a bootstrap interval over test images, and the same with shuffled training positions."""
    return position_replicates(train, test, grid, ridge=ridge, shuffle_seed=shuffle_seed, n_boot=n_boot)[0]


def position_replicates(
    train: Float[Tensor, "train_image n d_model"],
    test: Float[Tensor, "test_image n d_model"],
    grid: tuple[int, int],
    *,
    ridge: float = 1e-2,
    shuffle_seed: int = 0,
    n_boot: int = N_BOOT,
) -> tuple[dict[str, float], dict[str, Tensor]]:
    """`position_decoding`'s row and the bootstrap replicates behind its intervals ({"rmse": [replicate],
    "rmse_shuffled": [replicate]}); replicates drawn with one seed over the same test images are paired."""
    rows, cols = grid
    where = (
        torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(-1, 2).double()
    )
    x_train, x_test = train.double().reshape(-1, train.shape[-1]), test.double()
    mean, scale = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
    x_train = (x_train - mean) / scale
    y_train = where.repeat(train.shape[0], 1)
    generator = torch.Generator().manual_seed(shuffle_seed)
    shuffled = y_train[torch.randperm(len(y_train), generator=generator)]
    design = torch.cat([x_train, torch.ones(len(x_train), 1, dtype=torch.float64)], 1)
    penalty = ridge * len(x_train) * torch.eye(design.shape[1], dtype=torch.float64)
    penalty[-1, -1] = 0
    # one factorization for both fits: true positions in columns 0-1, shuffled ones in 2-3
    weights = torch.linalg.solve(design.T @ design + penalty, design.T @ torch.cat([y_train, shuffled], 1))
    tokens = (x_test - mean) / scale
    predicted = torch.cat([tokens, torch.ones(*tokens.shape[:2], 1, dtype=torch.float64)], -1) @ weights
    counts = bootstrap_counts(x_test.shape[0], n_boot, shuffle_seed)
    sizes = torch.full((x_test.shape[0],), float(x_test.shape[1]), dtype=torch.float64)
    out, replicates = {}, {}
    for name, columns in (("rmse", slice(0, 2)), ("rmse_shuffled", slice(2, 4))):
        per_image = (predicted[..., columns] - where).pow(2).mean(-1).sum(1)  # over row and col, then patches
        out[name] = float((per_image.sum() / sizes.sum()).sqrt())
        replicates[name] = ((counts @ per_image) / (counts @ sizes)).sqrt()
        out[f"{name}_low"], out[f"{name}_high"] = percentile_interval(replicates[name], 0.95)
    return out, replicates


@dataclass(frozen=True)
class _ToyPlan:
    """What a toy run measures: the layers, the image size snapped to whole patches, and its patch grid."""

    layers: list[int]
    size: tuple[int, int]
    grid: tuple[int, int]
    n_twin_scenes: int
    n_train_scenes: int
    seed: int


def _plan(
    model: HookedViT, n_twin_scenes: int, n_train_scenes: int, layers: Sequence[int] | None, size: int | None, seed: int
) -> _ToyPlan:
    """Check the scene counts and that the grid holds four objects (at least 8 patches across)."""
    layers = list(range(model.cfg.n_layers)) if layers is None else sorted(set(layers))
    if n_twin_scenes < 4 or n_train_scenes < 8:
        raise InputError(f"need at least 4 twin scenes and 8 training scenes, got {n_twin_scenes} and {n_train_scenes}")
    patch = model.cfg.patch_size
    hw = model.cfg.image_size if size is None else (size, size)
    rows, cols = hw[0] // patch, hw[1] // patch
    if min(rows, cols) < 8:
        raise InputError(
            f"a {rows} x {cols} patch grid is too small for four objects; run at --size {8 * patch} or more"
        )
    return _ToyPlan(layers, (rows * patch, cols * patch), (rows, cols), n_twin_scenes, n_train_scenes, seed)


@dataclass(frozen=True)
class _ToyData:
    """The ordinary and twin scenes' patch tokens per layer, the ordinary scenes' split (train, val, position
    test), each twin scene's pairs by kind and corresponding twin patches, and the query patch of the maps."""

    ordinary: Labeled
    twins: SyntheticScenes
    ordinary_tokens: dict[int, Float[Tensor, "image n d_model"]]
    twin_tokens: dict[int, Float[Tensor, "twin_image n d_model"]]
    split: tuple[Tensor, Tensor, Tensor]
    kinds: list[dict[str, tuple[Tensor, Tensor]]]
    corresponding: list[tuple[Tensor, Tensor]]
    query_image: int
    query: int


def _prepare(model: HookedViT, plan: _ToyPlan) -> _ToyData:
    """Draw and label both kinds of scenes, read their tokens, and find the twins' pairs."""
    rows, cols = plan.grid
    train = SyntheticScenes("default", n=plan.n_train_scenes, size=plan.size, seed=plan.seed, split="val")
    ordinary = label_images(model, train, None)
    twins = twin_scenes(plan.size, plan.grid, plan.n_twin_scenes, plan.seed)
    twin_data = label_images(model, twins, None)
    ordinary_tokens, twin_tokens = (
        {layer: tokens[("spatial", layer)] for layer in plan.layers}
        for tokens in (read_token_sets(model, data.images, plan.layers, ["spatial"]) for data in (ordinary, twin_data))
    )
    split = split_by_image(plan.n_train_scenes, fractions=(0.6, 0.2, 0.2), seed=plan.seed)
    roles = [_roles(scene) for scene in twins]
    kinds = [_pair_kinds(twin_data.instance[i], roles[i]) for i in range(len(twins))]
    corresponding = [_correspondence(twin_data.instance[i].reshape(rows, cols), roles[i]) for i in range(len(twins))]
    query_image = next(i for i, k in enumerate(kinds) if len(k["same object"][0]) and len(k["twin"][0]))
    a_patches = torch.nonzero(twin_data.instance[query_image] == roles[query_image]["A"]).flatten()
    query = int(a_patches[len(a_patches) // 2])
    return _ToyData(ordinary, twins, ordinary_tokens, twin_tokens, split, kinds, corresponding, query_image, query)


@dataclass(frozen=True)
class _LayerMeasures:
    """One layer's rows (separation, PCA, position) and what its figures draw."""

    separation: Row
    pca: Row
    position: Row
    query_map: Float[np.ndarray, "rows cols"]
    kde: tuple[np.ndarray, np.ndarray]
    """(P(same) of every pair, its kind)."""
    differences: tuple[Float[Tensor, "pair d_model"], Int[Tensor, " pair"]]
    replicates: dict[str, Tensor]
    """Bootstrap replicates of the separation AUROCs and the position RMSEs (paired across layers)."""


def _measure_layer(data: _ToyData, plan: _ToyPlan, layer: int, training: ProbeTrainingConfig | None) -> _LayerMeasures:
    """A quadratic probe fitted on the ordinary scenes at `layer` and read on the twins, the twins' PCA, and
    position decoded from the ordinary scenes' tokens."""
    train, val, test = data.split
    probe = fit_quadratic_probe(
        data.ordinary_tokens[layer], data.ordinary.instance, train, val, seed=plan.seed, training=training
    ).probe
    with torch.inference_mode():
        probability = probe.scores_to_probabilities(probe.pair_scores(data.twin_tokens[layer])).float()
    values, groups, distances = _probabilities_by_kind(probability, data.kinds, plan.grid[1])
    kde = (
        np.concatenate([values[k].numpy() for k in PAIR_KINDS]),
        np.concatenate([np.full(len(values[k]), k) for k in PAIR_KINDS]),
    )
    ordinary = data.ordinary_tokens[layer]
    separation, separation_replicates = _separation_row(layer, values, groups, distances, plan.seed)
    position, position_reps = position_replicates(ordinary[train], ordinary[test], plan.grid, shuffle_seed=plan.seed)
    return _LayerMeasures(
        separation=separation,
        pca=_twin_pca(data.twin_tokens[layer], data.corresponding, layer, plan.seed) | {"layer": layer},
        position={"layer": layer, **position},
        query_map=probability[data.query_image, data.query].reshape(plan.grid).numpy(),
        kde=kde,
        differences=_differences(data.twin_tokens[layer], data.corresponding),
        replicates=separation_replicates | position_reps,
    )


def _probabilities_by_kind(
    probability: Float[Tensor, "image query_pos key_pos"], kinds: list[dict[str, tuple[Tensor, Tensor]]], cols: int
) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[str, Tensor]]:
    """P(same) of every pair of each kind over all twin scenes, the scene each pair comes from, and the pair's
    distance on the patch grid (`cols` patches across), rounded: the strata where position cannot decide."""
    values: dict[str, list[Tensor]] = {kind: [] for kind in PAIR_KINDS}
    groups: dict[str, list[Tensor]] = {kind: [] for kind in PAIR_KINDS}
    distances: dict[str, list[Tensor]] = {kind: [] for kind in PAIR_KINDS}
    for image, image_kinds in enumerate(kinds):
        for kind, (p, q) in image_kinds.items():
            values[kind].append(probability[image, p, q])
            groups[kind].append(torch.full((len(p),), image))
            offset = torch.stack([p // cols - q // cols, p % cols - q % cols], 1).double()
            distances[kind].append(offset.square().sum(1).sqrt().round().long())
    return tuple({k: torch.cat(v) for k, v in d.items()} for d in (values, groups, distances))  # type: ignore[return-value]


def _separation_row(
    layer: int, values: dict[str, Tensor], groups: dict[str, Tensor], distances: dict[str, Tensor], seed: int
) -> tuple[Row, dict[str, Tensor]]:
    """AUROC of same-object pairs against each other kind, with intervals over scenes, and the bootstrap
    replicates behind them (drawn with one seed over the same scenes at every layer: paired).
    `vs_twin_at_equal_distance` compares same-object and cross-twin pairs only at the same (rounded) grid
    distance, where position cannot tell them apart (pooled, the twins lie farther apart than an object is
    wide, so distance alone separates them)."""
    row: Row = {"layer": layer}
    replicates: dict[str, Tensor] = {}
    same = values["same object"]
    measures = (
        ("twin", "vs_twin", False),
        ("similar", "vs_similar", False),
        ("other class", "vs_other", False),
        ("twin", "vs_twin_at_equal_distance", True),
    )
    for kind, key, stratified in measures:
        scores = torch.cat([same, values[kind]])
        labels = torch.cat([torch.ones(len(same), dtype=torch.bool), torch.zeros(len(values[kind]), dtype=torch.bool)])
        images = torch.cat([groups["same object"], groups[kind]])
        strata = torch.cat([distances["same object"], distances[kind]]) if stratified else None
        whole = auroc_replicates(scores, labels, torch.zeros_like(images), torch.ones(1, 1), strata)
        row[key] = float(whole[0])
        counts = bootstrap_counts(int(images.unique().numel()), N_BOOT, seed)
        replicates[key] = auroc_replicates(scores, labels, images, counts, strata)
        finite = replicates[key][replicates[key].isfinite()]
        row[f"{key}_low"], row[f"{key}_high"] = (
            percentile_interval(finite, 0.95) if finite.numel() else (float("nan"), float("nan"))
        )
    row["mean_p_same"] = float(same.mean())
    row["mean_p_twin"] = float(values["twin"].mean())
    return row, replicates


def toy_experiments(
    model: HookedOrBridge,
    out: str | Path,
    *,
    n_twin_scenes: int = 64,
    n_train_scenes: int = 200,
    layers: Sequence[int] | None = None,
    size: int | None = None,
    seed: int = 0,
    training: ProbeTrainingConfig | None = None,
) -> ToyResult:
    """Run the four toy experiments (module docstring) and write their figures, rows and `toy.md`. Images
    are `size` px square (default: the model's native size); the grid must be at least 8 patches across."""
    model = hooked_vit_only(model, "toy_experiments")
    plan = _plan(model, n_twin_scenes, n_train_scenes, layers, size, seed)
    data = _prepare(model, plan)
    measured = {layer: _measure_layer(data, plan, layer, training) for layer in plan.layers}
    return _write(Path(out), model, plan, data, measured)


def _differences(
    tokens: Float[Tensor, "image n d_model"], corresponding: list[tuple[Tensor, Tensor]]
) -> tuple[Float[Tensor, "pair d_model"], Int[Tensor, " pair"]]:
    """x_A(p) - x_B(p') of every corresponding pair, and the scene it comes from."""
    diffs = [tokens[i, a] - tokens[i, b] for i, (a, b) in enumerate(corresponding)]
    scene = [torch.full((len(a),), i) for i, (a, _) in enumerate(corresponding)]
    return torch.cat(diffs), torch.cat(scene)


def _twin_pca(
    tokens: Float[Tensor, "image n d_model"], corresponding: list[tuple[Tensor, Tensor]], layer: int, seed: int
) -> Row:
    differences, scene = _differences(tokens, corresponding)
    if len(differences) < 3:
        raise InputError("too few corresponding twin patches to analyze; use more twin scenes")
    centered = differences.double() - differences.double().mean(0)
    _, singular, vt = torch.linalg.svd(centered, full_matrices=False)
    variance = singular**2
    sign = torch.sign(differences.double() @ vt[0])
    per_scene = torch.stack([sign[scene == i].mean().abs() for i in scene.unique()])
    consistency = bootstrap_mean(per_scene, n_boot=N_BOOT, seed=seed, unit="scenes")
    low, high = consistency.low, consistency.high
    return {
        "top3_variance": float(variance[:3].sum() / variance.sum()),
        "consistency": float(per_scene.mean()),
        "consistency_low": low,
        "consistency_high": high,
        "n_pairs": len(differences),
    }


def _write(
    out: Path, model: HookedViT, plan: _ToyPlan, data: _ToyData, measured: dict[int, _LayerMeasures]
) -> ToyResult:
    """The figures, the three tables (CSV and JSON), `toy.json` and `toy.md`."""
    separation, pca, position = (
        [getattr(m, rows) for m in measured.values()] for rows in ("separation", "pca", "position")
    )
    files = _figures(out, model.cfg.source, plan, data, measured)
    write_table(separation, out / "separation")
    write_table(pca, out / "pca")
    write_table(position, out / "position")
    train, val, test = data.split
    settings = {
        "model": model.cfg.source,
        "size": list(plan.size),
        "n_twin_scenes": plan.n_twin_scenes,
        "n_train_scenes": plan.n_train_scenes,
        "probe_images": {"train": len(train), "val": len(val), "position_test": len(test)},
        "layers": plan.layers,
        "seed": plan.seed,
        "query": {"image": data.query_image, "patch": data.query},
    }
    replicates = {layer: m.replicates for layer, m in measured.items()}
    result = ToyResult(separation, pca, position, out, files, settings, replicates)
    write_json_atomic(
        out / "toy.json", {"settings": settings, "separation": separation, "pca": pca, "position": position}
    )
    write_text_atomic(out / "toy.md", f"# Toy experiments: {model.cfg.source}\n\n```\n{result.text()}\n```\n")
    files["json"], files["markdown"] = out / "toy.json", out / "toy.md"
    return result


def _figures(
    out: Path, name: str, plan: _ToyPlan, data: _ToyData, measured: dict[int, _LayerMeasures]
) -> dict[str, Path]:
    """maps.png, kde.png, twin_pca.png (at the middle layer), separation.png and position.png."""
    cols = plan.grid[1]
    files = {}
    files["maps"] = query_maps(
        data.twins[data.query_image].image,
        {layer: m.query_map for layer, m in measured.items()},
        (data.query // cols, data.query % cols),
        out / "maps.png",
        title=f"IsSameObject map of one patch of twin A, by layer: {name}",
    )
    files["kde"] = score_kde(
        {layer: m.kde for layer, m in measured.items()},
        out / "kde.png",
        title=f"P(same object) of pairs from a twin, by kind of partner: {name}",
    )
    middle = sorted(measured)[len(measured) // 2]
    differences, scene = measured[middle].differences
    keep = scene < 8
    files["pca"] = twin_pca(
        differences[keep].numpy(),
        scene[keep].numpy(),
        out / "twin_pca.png",
        title=f"Twins' residual differences at layer {middle}, first two PCs (8 scenes): {name}",
    )
    files["separation"] = lines_by_layer(
        [m.separation for m in measured.values()],
        {"same vs twin": "vs_twin", "same vs similar": "vs_similar", "same vs other class": "vs_other"},
        out / "separation.png",
        ylabel="AUROC (same-object pairs ranked above)",
        reference=(0.5, "not told apart"),
        title=f"Are the twins told apart? {name}",
    )
    files["position"] = lines_by_layer(
        [m.position for m in measured.values()],
        {"RMSE": "rmse", "shuffled-position control": "rmse_shuffled"},
        out / "position.png",
        ylabel="RMSE of (row, col), patches",
        title=f"Position decoded linearly from the token: {name}",
    )
    return files
