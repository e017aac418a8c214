"""Each training seed draws its own training scenes unless the recipe fixes them; the card records which."""

from __future__ import annotations

from binding_lens.zoo import RECIPES
from binding_lens.zoo.recipe import ZooRecipe
from binding_lens.zoo.scenes import training_scenes


def test_the_training_seed_picks_the_training_scenes_and_the_card_records_it():
    base = RECIPES["mae"].with_overrides(n_scenes=4, image_size=32, patch_size=8)
    seeds = {seed: base.with_overrides(seed=seed) for seed in (0, 1, 2)}
    assert [r.scenes_seed for r in seeds.values()] == [1, 2, 3]  # seed 0 keeps the shipped models' draw
    assert [r.as_dict()["data_seed"] for r in seeds.values()] == [1, 2, 3]
    first, second = (training_scenes(seeds[s])[0].image for s in (0, 1))
    assert (first != second).any()  # another seed, other scenes
    fixed = base.with_overrides(seed=2, data_seed=1)
    assert fixed.scenes_seed == 1 and (training_scenes(fixed)[0].image == first).all()
    # a shipped card (data seed written out) loads to the same scenes
    assert ZooRecipe.from_dict(seeds[2].as_dict()).scenes_seed == 3
