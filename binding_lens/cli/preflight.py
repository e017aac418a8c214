"""What every command checks before it imports torch or loads a model, so a mistake costs a second, not a run.

`preflight(args)` runs in `main` between argparse and the command: the model specs (`--model`,
`--models`: an unknown prefix, a missing directory or config, a folder that is no model, a zoo name, a
hub id neither cached nor reachable), the `--run` folders, a `--data` folder that does not exist or is
a file, the layer and `--k` bounds where the model's config.json can be read without loading it (zoo:,
config:, a local directory, a cached hub id), and `--out`: created, written and cleaned up again, so an
output path that cannot be written is refused before any compute, with nothing left behind; last, a
`--device` given, checked against this machine. Nothing but that device check imports torch, and nothing imports
transformers. `output_lock` then takes the --out folder for the command (one run per folder).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import InputError, MissingFileError
from ..io.atomic import check_writable_dir
from ..io.lock import FolderLock
from ..spec_prefixes import check_spec, looks_like_path, spec_prefix, split_coco_spec, split_hf_spec
from . import view
from .arguments import default_device, parse_layers

FILE_OUTPUTS = {"view"}
"""Commands whose --out is a file (its folder is checked); every other --out is a directory."""
PUBLISHED_OUTPUTS = {("zoo", "train")}
"""(Sub)commands whose --out must not exist until they publish it: their lock file goes beside it."""


def preflight(args: argparse.Namespace) -> None:
    """Raise the first `BindingLensError` that `args` shows without a model (see the module docstring)."""
    for spec in model_specs(args):
        check_model_spec(spec)
    for run in run_folders(args):
        check_run_folder(run)
    check_data_root(getattr(args, "data", None))
    model = getattr(args, "model", None)
    shape = model_shape(model) if model else None
    if shape is not None:
        check_layers(args, *shape)
    if args.command == "claims":
        check_claims_sites(args)
    out = view.out_path(args) if args.command == "view" else getattr(args, "out", None)
    if out is not None:
        check_writable_dir(Path(out).parent if args.command in FILE_OUTPUTS else out)
    if getattr(args, "device", None) is not None:  # last: it imports torch (not transformers)
        default_device(args.device)


def model_specs(args: argparse.Namespace) -> list[str]:
    """The specs in --model and --models (a comma list)."""
    specs = [args.model] if getattr(args, "model", None) else []
    if getattr(args, "models", None):
        specs += [spec.strip() for spec in args.models.split(",") if spec.strip()]
    return specs


def check_model_spec(spec: str) -> None:
    """`spec_prefixes.check_spec`, and a zoo: name checked against the shipped models."""
    check_spec(spec)
    if spec_prefix(spec) == "zoo:":
        from ..zoo.registry import zoo_path

        zoo_path(spec)


def run_folders(args: argparse.Namespace) -> list[str]:
    """The --run folders (view takes several)."""
    runs = getattr(args, "run", None)
    return [] if runs is None else [runs] if isinstance(runs, str) else list(runs)


def check_run_folder(run: str) -> None:
    """A --run must be a folder a sweep wrote (its summary.json is the last file a sweep writes)."""
    path = Path(run)
    if not path.exists():
        raise MissingFileError(
            f"no such run folder: {run} (--run takes a run directory written by `binding-lens sweep --out`)"
        )
    if not path.is_dir():
        raise InputError(f"--run {run} is a file; give a run directory written by `binding-lens sweep --out`")
    runs = sorted(f"{child.name}/" for child in path.iterdir() if (child / "summary.json").is_file())
    if not (path / "summary.json").is_file() and runs:
        raise InputError(
            f"{run} holds {len(runs)} runs, not one: {', '.join(runs)}; give one of them "
            f"(--run {path / runs[0].rstrip('/')})"
        )
    if not (path / "summary.json").is_file():
        raise MissingFileError(
            f"{run} has no summary.json: not a run directory written by `binding-lens sweep --out`, or its "
            "sweep did not finish (re-run the same sweep command to finish it)"
        )


def check_data_root(spec: str | None) -> None:
    """A folder: or ade20k: dataset whose path does not exist, or that is a file (but ADE20K's index file), or
    a coco: annotation file or image folder, or an hf: dataset, that is not there: the dataset's own checks
    say what is missing inside an existing folder or file."""
    kind, _, rest = (spec or "").partition(":")
    if kind == "coco" and rest:
        annotations, image_dir = split_coco_spec(rest)
        if not annotations.is_file():
            raise MissingFileError(f"--data {spec}: no annotation file {annotations}; coco: takes a COCO-style JSON")
        if image_dir is not None and not image_dir.is_dir():
            raise MissingFileError(f"--data {spec}: no image folder {image_dir}")
        return
    if kind == "hf" and rest:
        path = split_hf_spec(rest)[0]
        if not path.exists():
            raise MissingFileError(f"--data {spec}: no such dataset {path}; hf: takes a save_to_disk folder or parquet")
        return
    if kind not in ("folder", "ade20k") or not rest:
        return
    root = Path(rest).expanduser()
    if not root.exists():
        raise MissingFileError(f"--data {spec}: no such folder {root}; give the path of the dataset's folder")
    if kind == "folder" and not root.is_dir():
        raise InputError(f"--data {spec}: {root} is a file; folder: takes a folder holding images/ and masks/")
    if kind == "ade20k" and not root.is_dir() and root.name != "index_ade20k.pkl":  # data.ade20k.INDEX_FILE
        raise InputError(
            f"--data {spec}: {root} is a file; ade20k: takes the release folder ADE20K_2021_17_01/ (holding "
            "images/ADE/), the folder holding it, or its index_ade20k.pkl"
        )


def model_shape(spec: str) -> tuple[int, int] | None:
    """(layers, d_model) from the config.json of a zoo:, config:, local or cached hub model; None when
    that needs the model itself (random:, tiny:, timm:, open_clip:) or the config does not say."""
    prefix = spec_prefix(spec)
    if prefix == "zoo:":
        from ..zoo.registry import zoo_path

        path = zoo_path(spec) / "config.json"
    elif prefix == "config:":
        path = Path(spec.removeprefix("config:"))
    elif prefix is None and looks_like_path(spec):
        path = Path(spec).expanduser() / "config.json"
    elif prefix is None:
        from huggingface_hub import try_to_load_from_cache

        try:
            cached = try_to_load_from_cache(spec, "config.json")
        except ValueError:
            return None
        if not isinstance(cached, str):
            return None
        path = Path(cached)
    else:
        return None
    return _shape_from_config(path)


def _shape_from_config(path: Path) -> tuple[int, int] | None:
    try:
        config: Any = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # the loader says what is wrong with it
    layers, width = config.get("num_hidden_layers"), config.get("hidden_size")
    if not isinstance(layers, int) or not isinstance(width, int) or layers < 1 or width < 1:
        return None
    return layers, width


def check_layers(args: argparse.Namespace, n_layers: int, d_model: int) -> None:
    """--layers, --layer and das's --k against the model's shape (the same lines the loaded model would give)."""
    layers = getattr(args, "layers", None)
    if isinstance(layers, str):
        parse_layers(layers, n_layers)
    layer: int = getattr(args, "layer", 0)
    if args.command == "das":
        if layer > n_layers - 2:
            raise InputError(
                f"layer must be in 0..{n_layers - 2}: the swap at l is read after block l + 1, got {layer}"
            )
        if args.k >= d_model:
            raise InputError(
                f"k must be in 1..{d_model - 1} (below d_model {d_model}: the swap needs a complement), got {args.k}"
            )
    elif args.command in ("sae", "ground") and layer >= n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0..{n_layers - 1}")


def check_claims_sites(args: argparse.Namespace) -> None:
    """claims' --intervention-layer and --intervention-k against each model whose config says its shape."""
    from ..reports.claim_measures.site import check_site

    for spec in model_specs(args):
        shape = model_shape(spec)
        if shape is not None:
            check_site(args.intervention_layer, args.intervention_k, *shape)


def output_lock(args: argparse.Namespace, command: str) -> contextlib.AbstractContextManager:
    """The lock on the run folder `--out` names (`io.lock.FolderLock`), for the command line `command`; nothing
    to lock for a command without one or whose --out is a file. Under torchrun only rank 0 takes it: every
    rank of one launch writes the same folder. A lock taken over from a killed run says so on stderr."""
    out = getattr(args, "out", None)
    if out is None or args.command in FILE_OUTPUTS or os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    lock = FolderLock(out, command, beside=(args.command, getattr(args, "zoo_command", None)) in PUBLISHED_OUTPUTS)

    @contextlib.contextmanager
    def held():
        with lock:
            if lock.taken_over:
                print(
                    f"binding-lens {args.command}: note: taking over {out} from {lock.taken_over}, which ended "
                    "without releasing it (killed?)",
                    file=sys.stderr,
                )
            yield

    return held()
