"""The toy claims (twins, position) at the middle layer against the last, paired over scenes."""

from __future__ import annotations

from ...analyses.toy import ToyResult
from .measure import Measure, not_applicable, paired_measure
from .site import middle_layer


# --- the toy experiments: middle layer against the last -------------------------------------------
def toy_measures(toy: ToyResult, n_layers: int, middle_signal: Measure) -> dict[str, Measure]:
    """`twins` (same-vs-twin AUROC at the middle layer minus at the last) and `position_falls` (RMSE at the
    last layer minus at the middle), paired over twin scenes / test images, at layers fixed before looking.
    Each is "not applicable" unless the binding signal is above chance at the middle layer and so is the
    claim's own (twins told apart there; position decoded better than the shuffled-position control)."""
    middle, last = middle_layer(n_layers), n_layers - 1
    mid, end = toy.replicates[middle], toy.replicates[last]
    rows = {"twins": {r["layer"]: r for r in toy.separation}, "position": {r["layer"]: r for r in toy.position}}
    n_twins, n_test = toy.settings["n_twin_scenes"], toy.settings["probe_images"]["position_test"]
    twins_told = paired_measure(
        rows["twins"][middle]["vs_twin"] - 0.5, mid["vs_twin"] - 0.5, n_twins, unit="twin scenes"
    )
    position_read = paired_measure(
        rows["position"][middle]["rmse_shuffled"] - rows["position"][middle]["rmse"],
        mid["rmse_shuffled"] - mid["rmse"],
        n_test,
    )
    claims = {
        "twins": (
            rows["twins"][middle]["vs_twin"] - rows["twins"][last]["vs_twin"],
            mid["vs_twin"] - end["vs_twin"],
            twins_told,
            "twins are not told apart at the middle layer",
        ),
        "position_falls": (
            rows["position"][last]["rmse"] - rows["position"][middle]["rmse"],
            end["rmse"] - mid["rmse"],
            position_read,
            "position is not decoded at the middle layer",
        ),
    }
    out = {}
    for claim, (value, replicates, own, why) in claims.items():
        unit = "twin scenes" if claim == "twins" else "test images"
        context = {"layers": (middle, last), "precondition": own}
        if middle_signal.get("low") is None or middle_signal["low"] <= 0:
            out[claim] = not_applicable("no binding signal above chance at the middle layer", **context)
        elif own["low"] is None or own["low"] <= 0:
            out[claim] = not_applicable(why, **context)
        else:
            out[claim] = paired_measure(value, replicates, own["n"], unit=unit, **context)
    return out
