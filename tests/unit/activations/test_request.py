"""The extraction request as one typed record: what the manifest holds is its `to_json`, `from_json` reads it
back field for field, and a request with a field this version does not know, or without one it needs, is one
clear refusal."""

from __future__ import annotations

import json

import pytest

from binding_lens import HookedViT, SyntheticScenes, extract
from binding_lens.activations import ActivationStore
from binding_lens.activations.plan import plan_extraction
from binding_lens.activations.request import ExtractionRequest
from binding_lens.analyses.run import RunDirectory
from binding_lens.errors import InputError


def test_the_manifest_holds_the_plans_request_and_reads_back_as_the_same_record(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("default", n=4, size=64, seed=0)
    plan = plan_extraction(model, scenes, [0, 2], patches_per_image=8, size=64)
    run = RunDirectory(tmp_path / "run")  # a run keeps its store in activations/
    extract(model, scenes, layers=[0, 2], out=run.activations, patches_per_image=8, size=64, progress=False)
    store = ActivationStore(run.activations)
    on_disk = json.loads((run.activations / "manifest.json").read_text())["request"]
    assert on_disk == plan.request.to_json() and store.request == plan.request  # written and read by one pair
    assert store.request.layers == [0, 2] == store.layers and store.request.patches_per_image == 8
    assert store.request.model.weights and store.request.preprocessing.size == 64
    assert run.request() == plan.request  # a run directory reads the same record


def test_a_request_with_a_field_unknown_or_missing_is_refused_in_one_line():
    model = HookedViT.from_pretrained("tiny:vit")
    document = plan_extraction(model, SyntheticScenes("default", n=2, size=64), [1]).request.to_json()
    with pytest.raises(
        InputError,
        match=r"store/manifest.json: request is not one this version reads \(unknown "
        r"field\(s\) shade\): extract again",
    ):
        ExtractionRequest.from_json(document | {"shade": "red"}, "store/manifest.json")
    without = {key: value for key, value in document.items() if key != "seed"}
    with pytest.raises(InputError, match=r"missing field\(s\) seed"):
        ExtractionRequest.from_json(without)
    model_part = {key: value for key, value in document["model"].items() if key != "weights"}
    with pytest.raises(InputError, match=r"request.model is not one this version reads \(missing field\(s\) weights"):
        ExtractionRequest.from_json(document | {"model": model_part})
    with pytest.raises(InputError, match="request is not a JSON object"):
        ExtractionRequest.from_json(None)
