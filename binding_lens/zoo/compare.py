"""Does binding depend on the training objective? The layer sweep of each zoo model on held-out scenes.

    table = binding_by_objective(["zoo:dino", "zoo:mae", "zoo:supervised", "zoo:random"], "runs/zoo-compare")
    print(table.markdown())

Every model is swept on the same held-out scenes (the `test` split of its training preset, an
independent random stream) with the same probe training. Per model the table gives the best
`quadratic` test accuracy and its layer, and `linear` and `diag_quadratic` at that same layer, beside
the majority baseline. As in the paper's Table 1 the best layer is the one with the best test
accuracy, so a peak is slightly optimistic; the full per-layer rows are in each model's sweep.csv.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..analyses.layer_sweep import SweepResult, layer_sweep
from ..analyses.report import Row, format_table, write_table
from ..data import SyntheticScenes
from ..errors import InputError
from ..figures import accuracy_by_model
from ..hooks import HookedViT
from ..io import write_json_atomic, write_text_atomic
from ..models.registry import PREFIX, zoo_card
from ..probes import ProbeTrainingConfig
from .recipe import ZooRecipe
from .scenes import training_scenes

TABLE_PROBES = ("linear", "diag_quadratic", "quadratic")
COLUMNS = ("model", "objective", "quadratic_layer", "quadratic", "quadratic_balanced", "quadratic_auroc",
           "linear", "diag_quadratic", "majority_baseline")


def held_out_scenes(spec: str, n: int) -> SyntheticScenes:
    """Scenes of the model's training preset and size from the `test` split (never trained on)."""
    recipe = ZooRecipe.from_dict(zoo_card(spec)["recipe"]).with_overrides(n_scenes=n)
    return training_scenes(recipe, split="test")


@dataclass
class ObjectiveTable:
    rows: list[Row]
    sweeps: dict[str, SweepResult]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)

    def markdown(self) -> str:
        """The table as GitHub markdown (accuracies as fractions; layer = block index)."""
        head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
        lines = ["| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |" for row in self.rows]
        return head + "\n".join(lines) + "\n"

    def text(self) -> str:
        return format_table(self.rows, list(COLUMNS))


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def objective_row(spec: str, objective: str, sweep: SweepResult) -> Row:
    """One table row from a model's sweep: the quadratic peak and the other probes at its layer."""
    by = {(row["probe"], row["layer"]): row for row in sweep.rows}
    peak = sweep.peaks["quadratic"]
    layer = peak["layer"]
    return {
        "model": spec, "objective": objective, "quadratic_layer": layer,
        "quadratic": peak["accuracy"], "quadratic_balanced": peak["balanced_accuracy"],
        "quadratic_auroc": peak["auroc"],
        "linear": by[("linear", layer)]["accuracy"], "diag_quadratic": by[("diag_quadratic", layer)]["accuracy"],
        "majority_baseline": peak["majority_baseline"],
    }


def binding_by_objective(
    models: Sequence[str],
    out: str | Path,
    *,
    n_scenes: int = 400,
    training: ProbeTrainingConfig | None = None,
    seed: int = 0,
    progress: bool = True,
) -> ObjectiveTable:
    """Sweep `linear`, `diag_quadratic` and `quadratic` over every layer of each zoo model (see the
    module docstring) and write `objective_table.csv/.json/.md`, `quadratic_by_model.png` and each
    model's sweep under `out/<name>/`."""
    out = Path(out)
    unknown = [m for m in models if not m.startswith(PREFIX)]
    if unknown:
        raise InputError(f"binding_by_objective compares zoo models (zoo:<name>); got {unknown}")
    training = training or ProbeTrainingConfig(seed=seed)
    rows, sweeps, all_rows = [], {}, []
    started = time.perf_counter()
    for spec in models:
        card = zoo_card(spec)
        model = HookedViT.from_pretrained(spec)
        sweep = layer_sweep(model, held_out_scenes(spec, n_scenes), out / spec.removeprefix(PREFIX),
                            probes=TABLE_PROBES, training=training, seed=seed, progress=progress)
        sweeps[spec] = sweep
        rows.append(objective_row(spec, card["objective"], sweep))
        all_rows += sweep.rows
    table = ObjectiveTable(rows, sweeps, out)
    table.files["csv"], table.files["json"] = write_table(rows, out / "objective_table")
    table.files["markdown"] = out / "objective_table.md"
    write_text_atomic(table.files["markdown"], table.markdown())
    table.files["plot"] = accuracy_by_model(all_rows, out / "quadratic_by_model.png", probe="quadratic",
                                            title="quadratic IsSameObject probe: zoo models on held-out scenes")
    write_json_atomic(out / "summary.json", {"models": list(models), "n_scenes": n_scenes, "seed": seed,
                                             "seconds": round(time.perf_counter() - started, 1)})
    table.files["summary"] = out / "summary.json"
    return table
