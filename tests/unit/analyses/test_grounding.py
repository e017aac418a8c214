"""Grounding: units scored by how well they tell instances apart, planted and end to end on a tiny model."""

from __future__ import annotations

import itertools

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses.grounding import (
    GroundingConfig,
    GroundingData,
    derangement,
    ground,
    sample_slots,
    score_units,
    unit_maps,
)
from binding_lens.analyses.unit_values import UnitRequest, UnitValues, least_squares_read_in, read_units
from binding_lens.cli import main
from binding_lens.data import SyntheticScenes
from binding_lens.effects.attention import distance_strata
from binding_lens.errors import InputError
from binding_lens.figures.grounding import UnitBar, grounding_figure, unit_maps_figure
from binding_lens.probes import split_by_image
from binding_lens.sae import SaeTrainingConfig, train_sae
from binding_lens.vis.grounding_viewer import grounding_viewer, unit_similarity

GRID = (8, 8)


def planted_world(n_images: int = 80, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per image three vertical strips of one class, cut at two random columns: instance ids [image, 64]."""
    generator = torch.Generator().manual_seed(seed)
    cols = torch.arange(64).remainder(8)
    instance = []
    for _ in range(n_images):
        first = int(torch.randint(2, 5, (1,), generator=generator))
        second = first + int(torch.randint(2, 4, (1,), generator=generator))
        instance.append((cols >= first).long() + (cols >= second).long())
    instance = torch.stack(instance)
    return instance, torch.ones_like(instance)


def planted_units(instance: torch.Tensor, seed: int = 0) -> UnitValues:
    """Four scalar units: one carries each instance's identity (a value per instance), one only the class, one
    only the column (position), one nothing; and a stream of noise with a random read-in for each."""
    generator = torch.Generator().manual_seed(seed)
    n_images, n = instance.shape
    levels = torch.stack([torch.randperm(3, generator=generator) for _ in range(n_images)]).float()
    identity = levels.gather(1, instance)  # each instance of an image its own level, one apart
    identity = identity + 0.1 * torch.randn(n_images, n, generator=generator)
    klass = torch.ones(n_images, n)
    column = torch.arange(n).remainder(8).float().expand(n_images, -1) + 0.1 * torch.randn(
        n_images, n, generator=generator
    )
    noise = torch.randn(n_images, n, generator=generator)
    values = torch.stack([identity, klass, column, noise], -1)[..., None]
    stream = torch.randn(n_images, n, 16, generator=generator)
    read_in = torch.nn.functional.normalize(torch.randn(4, 16, generator=generator), dim=-1)[..., None]
    return UnitValues("planted", ["identity", "class", "column", "noise"], values, stream, read_in, "stream")


def planted_data(instance: torch.Tensor, klass: torch.Tensor, seed: int = 0) -> GroundingData:
    n_images, n = instance.shape
    groups = torch.arange(n_images)
    split = split_by_image(n_images, (0.4, 0.3, 0.3), seed=seed)
    slots = torch.arange(n).expand(n_images, -1)
    return GroundingData(instance, klass, slots, groups, split, distance_strata(GRID)[0])


def test_planted_identity_ranks_first_and_only_it_follows_instances():
    instance, klass = planted_world()
    units = planted_units(instance)
    graded = score_units(planted_data(instance, klass), [units], GroundingConfig(top=4, n_boot=2000, n_random=3))
    by = {unit.name: unit for unit in graded}
    assert graded[0].name == "identity" and by["identity"].auroc.estimate > 0.95
    assert by["identity"].follows_instances and by["identity"].versus_random.estimate > 0.4
    # the class ties on every same-class pair; the noise carries nothing
    assert by["class"].auroc.estimate == 0.5 and not by["class"].follows_instances
    assert not by["noise"].follows_instances and abs(by["noise"].auroc.estimate - 0.5) < 0.05
    # the column does tell the strips apart (at one distance, a pair across columns is likelier to cross a cut)
    # but just as well on another image's strips: the relabeled control catches it
    column = by["column"]
    assert column.auroc.estimate > 0.55 and column.relabeled.estimate > 0.55
    assert not column.versus_relabeled.beyond_noise and not column.follows_instances
    # Holm over the reported units' two tests each: adjusted p-values are no smaller than raw ones
    assert all(0 <= p <= 1 for unit in graded for p in unit.holm_p)


def test_pairs_match_a_slow_enumeration():
    instance, klass = planted_world(n_images=6, seed=2)
    klass = klass.clone()
    klass[:, ::3] = 2  # two classes: only same-class pairs enter
    instance[:, ::7] = -1  # some unlabeled patches
    data = planted_data(instance, klass)
    data = GroundingData(instance, klass, sample_slots(6, 64, 20, seed=1), data.groups, data.split, data.strata)
    rows = torch.tensor([1, 4])
    donors = torch.tensor([4, 1])
    pairs = data.pairs(rows, donors)
    found = set(zip(pairs.row.tolist(), pairs.first.tolist(), pairs.second.tolist(), pairs.same.tolist()))
    expected = set()
    for row, donor in zip(rows.tolist(), donors.tolist()):
        for a, b in itertools.combinations(range(20), 2):
            p, q = int(data.slots[row, a]), int(data.slots[row, b])
            i, j = int(instance[donor, p]), int(instance[donor, q])
            if i >= 0 and j >= 0 and klass[donor, p] == klass[donor, q]:
                expected.add((row, a, b, i == j))
    assert found == expected
    squared = lambda p, q: (p // 8 - q // 8) ** 2 + (p % 8 - q % 8) ** 2  # noqa: E731
    distances = [
        squared(int(data.slots[r, a]), int(data.slots[r, b])) for r, a, b in zip(pairs.row, pairs.first, pairs.second)
    ]
    # one stratum per distance
    by_stratum = {}
    for stratum, distance in zip(pairs.stratum.tolist(), distances):
        assert by_stratum.setdefault(stratum, distance) == distance


def test_derangement_never_keeps_an_image_in_its_group():
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    for seed in range(20):
        order = derangement(groups, seed)
        assert sorted(order.tolist()) == list(range(8)) and not bool((groups[order] == groups).any())
    with pytest.raises(InputError, match="at least two groups"):
        derangement(torch.zeros(4, dtype=torch.long), 0)


def test_least_squares_read_in_recovers_an_affine_map():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(400, 12, generator=generator)
    weights = torch.randn(12, 5, generator=generator)
    outputs = inputs @ weights + torch.randn(5, generator=generator)
    assert torch.allclose(least_squares_read_in(inputs, outputs), weights, atol=1e-4)


def test_read_in_of_heads_and_neurons_is_the_span_the_hooks_read():
    """hook_v of every head lies in the span its read-in picks out of ln1's output (and mlp.hook_pre likewise)."""
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("default", n=12, size=32, seed=0)
    pixels = model.preprocess([scenes[i].image for i in range(12)], size=32)
    slots = torch.arange(16).expand(12, -1)
    heads, neurons = read_units(model, pixels, slots, UnitRequest(1, ("heads", "neurons")))
    _, cache = model.run_with_cache(pixels, names_filter=lambda name: name.startswith("blocks.1."))
    v = cache["blocks.1.attn.hook_v"][:, 1:].flatten(0, 1)
    stream = heads.stream.flatten(0, 1)
    for head in range(4):
        read = stream @ heads.read_in[head]
        design = torch.cat([read, torch.ones(len(read), 1)], 1)
        fit = torch.linalg.lstsq(design, v[:, head]).solution
        assert torch.allclose(design @ fit, v[:, head], atol=1e-4)
    pre = cache["blocks.1.mlp.hook_pre"][:, 1:].flatten(0, 1)
    correlation = torch.corrcoef(torch.stack([(neurons.stream.flatten(0, 1) @ neurons.read_in[3])[:, 0], pre[:, 3]]))
    assert correlation[0, 1] > 0.9999
    assert torch.allclose(neurons.values[..., 3, 0], cache["blocks.1.mlp.hook_post"][:, 1:, 3], atol=1e-6)
    assert torch.allclose(heads.values[:, :, 2], cache["blocks.1.attn.hook_z"][:, 1:, 2], atol=1e-6)


def test_ground_end_to_end_on_a_tiny_model_with_an_sae(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("matched", n=20, size=32, seed=0)
    pixels = model.preprocess([scenes[i].image for i in range(20)], size=32)
    _, cache = model.run_with_cache(pixels, names_filter="blocks.1.hook_resid_post")
    sae, _ = train_sae(
        cache["blocks.1.hook_resid_post"][:, 1:].flatten(0, 1),
        SaeTrainingConfig(d_sae=48, steps=20, seed=0),
        hook_name="blocks.1.hook_resid_post",
    )
    config = GroundingConfig(("heads", "neurons", "subspace", "sae"), sae, 32, subspace_rank=3, top=2, n_boot=200)
    result = ground(model, scenes, 1, config)
    kinds = [unit.kind for unit in result.units]
    assert kinds == ["heads"] * 2 + ["neurons"] * 2 + ["subspace"] * 2 + ["sae"] * 2 + ["baseline"]
    for unit in result.units:
        assert unit.auroc.low <= unit.auroc.estimate <= unit.auroc.high
        assert (unit.random_unit is None) == (unit.kind == "baseline")
    assert result.units[0].selection_auroc >= result.units[1].selection_auroc
    assert "heads: " in result.text() and "follows instances" in result.text()
    maps = unit_maps(model, scenes, result, config, n_images=2)
    assert list(maps.maps) == [f"{kind} {result.units[2 * i].name}" for i, kind in enumerate(config.kinds)]
    assert maps.maps[f"heads {result.units[0].name}"][0].shape == (4, 4, 8)
    assert unit_maps_figure(maps.images, maps.instances, maps.maps, tmp_path / "maps", "maps").exists()
    page = grounding_viewer(maps, tmp_path / "viewer.html", layer=1, name="tiny:vit").read_text()
    assert all(label in page for label in maps.maps) and "block 1" in page
    bars = [UnitBar(u.name, u.auroc.estimate, u.auroc.low, u.auroc.high, u.relabeled.estimate) for u in result.units]
    assert grounding_figure(bars, tmp_path / "bars", "bars").exists()


def test_ground_command_writes_its_table_and_figures(tmp_path, capsys):
    code = main(
        ["ground", "--model", "tiny:vit", "--layer", "0", "--units", "heads,subspace", "--k", "2", "--n-images", "16"]
        + ["--size", "32", "--top", "2", "--out", str(tmp_path / "g")]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "unit - random [95% CI]" in printed and "subspace: " in printed
    for name in ("units.csv", "summary.json", "grounding.png", "unit_maps.png", "viewer.html"):
        assert (tmp_path / "g" / name).exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--units", "heads,axons"], "unknown unit kind 'axons'"),
        (["--layer", "7"], "layer 7 does not exist"),
        (["--units", "sae:{tmp}/nowhere"], "no SAE at"),
    ],
)
def test_ground_mistakes_are_one_line(tmp_path, capsys, argv, message):
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    base = {"--layer": "0", "--units": "heads"}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    flags = [item for pair in base.items() for item in pair]
    code = main(
        ["ground", "--model", "tiny:vit", *flags, "--n-images", "12", "--size", "32", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_an_sae_on_another_hook_is_refused(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    sae, _ = train_sae(torch.randn(64, 32), SaeTrainingConfig(d_sae=16, steps=2), hook_name="blocks.9.hook_resid_post")
    with pytest.raises(InputError, match="which this model does not have"):
        ground(model, SyntheticScenes("matched", n=12, size=32), 0, GroundingConfig(("sae",), sae))


def test_unit_similarity_is_exp_of_minus_distance_over_the_median():
    values = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64).numpy()
    flat = values.reshape(12, 5)
    distances = [[float(((flat[i] - flat[j]) ** 2).sum() ** 0.5) for j in range(12)] for i in range(12)]
    off = sorted(distances[i][j] for i in range(12) for j in range(12) if i != j)
    median = (off[len(off) // 2 - 1] + off[len(off) // 2]) / 2
    expected = torch.tensor(distances, dtype=torch.float64).div(median).neg().exp().numpy()
    assert abs(unit_similarity(values) - expected).max() < 1e-9
    assert (unit_similarity(torch.ones(2, 2, 1).numpy()) == 1).all()


def test_the_intervals_say_what_they_resample():
    instance, klass = planted_world()
    data = planted_data(instance, klass)
    assert data.resampled == "images"  # every image its own group
    paired = GroundingData(instance, klass, data.slots, data.groups // 2, data.split, data.strata)
    assert paired.resampled == "twin groups"
