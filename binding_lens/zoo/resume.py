"""Training checkpoints of a zoo run: everything needed to go on bit-identically after a kill.

    <parent>/.<name>.resume.pt     beside the checkpoint directory <parent>/<name> the run will publish

Written atomically every `checkpoint_every` steps and removed once the finished checkpoint is in place.
It holds the objective's whole state (backbone, heads, DINO's EMA teacher and center), the optimizer's,
the step, every random state (the batch generator, torch, CUDA, numpy, Python), the losses and log lines
so far, the training seconds spent, and what the run was started with (recipe, precision, device type):
a rerun must give the same, or it is refused naming the flag that differs. Bit-identical means on the
same machine with the same torch and thread count (`--threads`), which a resumed run does not check.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from ..errors import InputError
from ..io.atomic import write_atomic_chunks
from ..io.documents import Json
from .recipe import COMMAND_LINE_FIELDS, ZooRecipe, flat_fields, knob_text

STATE_VERSION = 1


def resume_path(out: str | Path) -> Path:
    """Where the training checkpoint of a run that will publish `out` lives (a hidden sibling file)."""
    out = Path(out)
    return out.with_name(f".{out.name}.resume.pt")


def run_settings(recipe: ZooRecipe, precision: str, device: torch.device) -> Json:
    """What a resumed run must share with the run it continues (the device by type: cuda:0 or cuda:1)."""
    return {"recipe": recipe.as_dict(), "precision": precision, "device": device.type}


def save_state(
    path: Path,
    *,
    settings: Json,
    step: int,
    objective: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    history: Json,
) -> None:
    """Write the state after `step` steps atomically (a kill while writing keeps the previous one)."""
    device = next(objective.parameters()).device
    numpy_state = cast(tuple[Any, ...], np.random.get_state(legacy=True))  # legacy=True: a tuple
    state = {
        "version": STATE_VERSION,
        "settings": settings,
        "step": step,
        "objective": objective.state_dict(),
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "numpy_rng": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
        "python_rng": random.getstate(),
        "history": history,
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    write_atomic_chunks(path, [buffer.getbuffer()])


def load_state(path: Path, settings: Json) -> dict[str, Any] | None:
    """The saved state at `path` (None when there is none), refused when its settings differ from these."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a torn file cannot happen (atomic writes), a foreign or damaged one can
        raise InputError(f"{path} is not a readable training checkpoint ({error}); delete it to start over") from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise InputError(f"{path} was written by another version of binding_lens; delete it to start over")
    difference = _first_difference(state["settings"], settings)
    if difference is not None:
        saved, given = difference
        steps = state["settings"]["recipe"]["steps"]
        raise InputError(
            f"{path} holds an interrupted run (step {state['step']} of {steps}) started with {saved}, but "
            f"this command gives {given}: rerun with {saved} to resume it, or delete {path} to start over"
        )
    return state


def restore_state(
    state: dict[str, Any],
    objective: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    lr: float,
) -> int:
    """Put a saved state back into freshly built objects (the optimizer's rates reset to their start `lr`,
    which the schedule scales at every step); returns the steps already taken."""
    device = next(objective.parameters()).device
    objective.load_state_dict(state["objective"])
    optimizer.load_state_dict(state["optimizer"])
    for group in optimizer.param_groups:
        group["lr"] = lr
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    if state["cuda_rng"] is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"], device)
    name, keys, *rest = state["numpy_rng"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), *rest))
    version, internal, gauss = state["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    return int(state["step"])


def _first_difference(saved: Json, given: Json) -> tuple[str, str] | None:
    """The first setting that differs, saved and given, as typed on the command line (`--lr 0.001`,
    `--knob dino.teacher_temp=0.04`)."""
    old, new = _flat(saved), _flat(given)
    order = ["objective", "scale", *COMMAND_LINE_FIELDS, "precision", "device"]
    for key in [*order, *sorted(set(old) | set(new))]:
        if old.get(key) != new.get(key):
            return _as_typed(key, old.get(key), key in order), _as_typed(key, new.get(key), key in order)
    return None


def _as_typed(key: str, value: Any, own_flag: bool) -> str:
    return f"--{key.replace('_', '-')} {value}" if own_flag else knob_text(key, value)


def _flat(settings: Json) -> Json:
    """Settings with the recipe's fields at the top and its knobs as `dino.out_dim` (lists as tuples)."""
    return {k: v for k, v in settings.items() if k != "recipe"} | flat_fields(settings["recipe"])
