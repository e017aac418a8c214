"""Run in a fresh environment where binding_lens was installed with pip (tests/integration/test_bridge_entry_point.py):
boot each saved checkpoint through TransformerLens's TransformerBridge, twice (the model loaded beforehand, as
`hf_model=`, and the checkpoint folder alone), and save what the bridge computed, and what the plain HF model
computes here, for the test to compare.

binding_lens is never imported here: TransformerLens finds its adapter through the entry point alone.

    python bridge_boot.py <spec.json>    # {"cases": [{"name", "class", "checkpoint", "inputs", "result"}]}
"""

from __future__ import annotations

import json
import sys

import torch
import transformers
from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
from transformer_lens.model_bridge import TransformerBridge


def run(bridge: TransformerBridge, inputs: dict) -> dict:
    inputs = dict(inputs)
    with torch.no_grad():
        out, cache = bridge.run_with_cache(inputs.pop("pixel_values"), **inputs)
    n_layers = bridge.cfg.n_layers
    return {
        "adapter": f"{type(bridge.adapter).__module__}.{type(bridge.adapter).__name__}",
        "out": out,
        "streams": [cache["blocks.0.hook_resid_pre"]]
        + [cache[f"blocks.{layer}.hook_resid_post"] for layer in range(n_layers)],
    }


def main(spec_path: str) -> None:
    with open(spec_path) as handle:
        spec = json.load(handle)
    imported_before = "binding_lens" in sys.modules
    # TransformerLens 4.3 reads entry points only once an adapter is selected, after it has looked the
    # architecture up in its own table: discovering them first is what makes an external adapter reachable.
    ArchitectureAdapterFactory.discover_entry_points()
    for case in spec["cases"]:
        inputs = torch.load(case["inputs"])
        load = getattr(transformers, case["class"]).from_pretrained
        results = {
            "hf_model": run(
                TransformerBridge.boot_transformers(case["name"], hf_model=load(case["checkpoint"])), inputs
            ),
            "checkpoint": run(TransformerBridge.boot_transformers(case["checkpoint"]).eval(), inputs),
        }
        with torch.no_grad():  # the plain HF model, in this environment's torch: the reference
            plain = load(case["checkpoint"], attn_implementation="eager").eval()(**inputs, output_hidden_states=True)
        torch.save(
            {"runs": results, "out": plain.last_hidden_state, "streams": list(plain.hidden_states)}, case["result"]
        )
    found = {"binding_lens imported before discovery": imported_before, "adapter module": "binding_lens.hooks.bridge"}
    print(json.dumps(found | {"adapter module imported": found["adapter module"] in sys.modules}))


if __name__ == "__main__":
    main(sys.argv[1])
