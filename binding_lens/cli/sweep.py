"""`binding-lens extract` and `binding-lens sweep`: activations into a store, and every probe at every layer."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..io.documents import Json, Options
from ..spec_prefixes import hf_spec
from .arguments import (
    DATA_HELP,
    DEVICE_HELP,
    MODEL_HELP,
    add_max_steps,
    default_device,
    layer_list,
    non_negative_int,
    output_dir,
    parse_layers,
    positive_float,
    positive_int,
)

if TYPE_CHECKING:  # annotations only: building the parser (and --help) imports no torch
    import torch

    from ..analyses import SweepResult
    from ..data import Scene
    from ..hooks import HookedViT

RELATION_NAMES = (  # probes.relations.RELATIONS (a test checks), so --help imports no torch
    "same_object",
    "same_class_other_instance",
    "same_object_within_class",
    "occludes",
    "part_of",
    "same_object_across_views",
)
DIRECTED_RELATIONS = ("occludes",)  # probes.relations.DIRECTED
DIRECTED_PROBE_NAMES = ("linear_difference", "bilinear")  # probes.registry.DIRECTED_PROBES (a test checks)
STORE_MODES = ("auto", "none", "disk")  # activations.budget.STORE_MODES, without importing torch for --help
PROBE_NAMES = (  # analyses.sweep.ALL_PROBES (a test checks), so a wrong --probes costs no torch import
    "linear",
    "diag_quadratic",
    "quadratic",
    "quadratic_fixed_rank",
    "cosine_similarity",
    "dot_product",
    "self_attention",
    "distance",
    "pointwise_class",
    "pointwise_identity",
)
PATCHES_PER_IMAGE = 64  # extract's default


def add(commands: argparse._SubParsersAction) -> None:
    for name, text, description in (
        (
            "extract",
            "extract patch-token activations and labels into a resumable store",
            "Extract patch-token activations of the chosen layers, with their object labels, into a resumable store.",
        ),
        (
            "sweep",
            "the layer sweep: every probe at every layer (extracting when needed)",
            "The layer sweep: train every IsSameObject probe at every layer and report each probe's peak.",
        ),
    ):
        command = commands.add_parser(name, help=text, description=description)
        _add_extraction_arguments(command)
        if name == "extract":
            command.add_argument(
                "--out",
                type=output_dir,
                required=True,
                help="output directory (re-running resumes it; under torchrun each rank writes its shards)",
            )
        else:
            _add_store_arguments(command)
            _add_probe_arguments(command)


def _add_extraction_arguments(command: argparse.ArgumentParser) -> None:
    """What both commands extract: model, data, layers, and how the extraction runs."""
    command.add_argument("--model", required=True, help=MODEL_HELP)
    command.add_argument("--data", default="default", help=DATA_HELP)
    command.add_argument("--n-images", type=positive_int, default=400, help="images to use (synthetic: generated)")
    command.add_argument("--size", type=positive_int, default=224, help="image side in pixels fed to the model")
    command.add_argument("--split", default=None, help="dataset split (ADE20K: training, or validation when not given)")
    command.add_argument("--layers", type=layer_list, default="all", help="all, or e.g. 0,4,8 or 2-10 or 0-11:2")
    command.add_argument(
        "--patches-per-image",
        type=positive_int,
        default=None,
        help=f"labeled patches stored per image, at most the patch grid's (default: {PATCHES_PER_IMAGE}, "
        "or the whole grid when it has fewer; every patch on matched)",
    )
    command.add_argument("--batch-size", type=positive_int, default=16, help="images per forward pass")
    command.add_argument("--device", default=None, help=DEVICE_HELP)
    command.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seeds the scene draw and the patches stored per image (sweep: also the split and the probes)",
    )
    command.add_argument(
        "--skip-missing-masks",
        action="store_true",
        help="folder: data: skip (and count) images that have no mask instead of stopping",
    )
    command.add_argument(
        "--shard-size",
        type=positive_int,
        default=256,
        help="images per store shard (the unit of resuming, and of the split between ranks)",
    )
    command.add_argument(
        "--workers",
        type=non_negative_int,
        default=None,
        help="processes preparing images for the model (default: 0 on CPU, up to 8 with a GPU)",
    )
    command.add_argument(
        "--writers",
        type=positive_int,
        default=None,
        help="threads writing finished shards, in any order (default: one per core, 2 to 4, fewer when "
        "the shards they hold would not fit a quarter of the memory)",
    )
    command.add_argument(
        "--profile",
        action="store_true",
        help="print where extraction time went, stage by stage (and the GPU's idle fraction)",
    )


def _add_store_arguments(command: argparse.ArgumentParser) -> None:
    """The sweep's run directory, and where its activations are held."""
    command.add_argument("--out", type=output_dir, required=True, help="run directory")
    command.add_argument(
        "--store",
        choices=STORE_MODES,
        default="auto",
        help="none: hold activations in memory (on the GPU if there is one) and write no store; "
        "disk: a resumable store in OUT/activations, read back layer group by layer group; "
        "auto: none when they fit --memory-budget",
    )
    command.add_argument(
        "--memory-budget",
        type=positive_float,
        default=None,
        metavar="GIB",
        help="GiB of activations to hold at once (default: half the free memory of the device)",
    )


def _add_probe_arguments(command: argparse.ArgumentParser) -> None:
    """The sweep's probes: which, how they train, over how many seeds, and how peaks are chosen."""
    command.add_argument(
        "--probes",
        default="all",
        help="all, or a comma list of probe names (quadratic, linear, ...; a wrong name lists them all)",
    )
    add_max_steps(command)
    command.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="also stop after this many passes over the training images",
    )
    command.add_argument("--batch-images", type=positive_int, default=32, help="images per probe-training step")
    command.add_argument(
        "--paper-schedule",
        action="store_true",
        help="train as the paper: 16 epochs (or --epochs), StepLR, no early stopping",
    )
    command.add_argument("--rank", type=positive_int, default=64, help="rank of quadratic_fixed_rank")
    command.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        help="repeat the sweep with seeds SEED..SEED+N-1 (scene draw, split, probe init) and "
        "report each probe's mean and 95%% interval across them (runs in OUT/seed-<s>/)",
    )
    command.add_argument(
        "--relation",
        choices=RELATION_NAMES,
        default="same_object",
        help="the pair relation the probes decode: same_object (IsSameObject, every pair), "
        "same_class_other_instance (pairs of two instances; positive: one class), same_object_within_class "
        "(pairs of one class; positive: one instance), occludes (directed: pairs of two overlapping objects; "
        "positive: the first patch's object in front; its probes: linear_difference, bilinear) or part_of "
        "(pairs on two different parts; positive: parts of one object; needs scenes with parts, e.g. "
        "--data parts) or same_object_across_views (two crops of each scene, the model run on each alone; pairs "
        "across them; positive: one instance; --size is each view's)",
    )
    command.add_argument(
        "--peak-by",
        choices=("val", "test"),
        default="val",
        help="choose each probe's peak layer on validation AUROC (val) or on test "
        "accuracy (the paper's Table 1 rule: optimistic, labeled so)",
    )


def run(args: argparse.Namespace) -> int:
    """The command: its probe names checked before torch is imported, its dataset before transformers
    is (and so before the model loads), then the extraction or the sweep."""
    from ..errors import InputError, SettingsMismatchError

    probes = _probe_names(args)
    dataset = _dataset(args, args.seed)
    from ..activations import ranks

    try:
        return _run(args, probes, dataset)
    except SettingsMismatchError as error:  # say it with the flags that differ, not the recorded fields
        differences = flag_differences(error.stored, error.requested)
        if not differences:
            raise
        raise InputError(error.restated(differences)) from None
    finally:
        ranks.finish()


def flag_differences(stored: Json, requested: Json) -> str:
    """'asked vs stored: --data twins vs --data default; ...': the flags of `extract` / `sweep` whose values
    give two extraction requests that differ; '' when no flag tells them apart (other weights, say)."""
    old, new = request_flags(stored), request_flags(requested)
    differing = [flag for flag in new if old.get(flag) != new[flag]]

    def said(flag: str, value: str | None) -> str:
        return f"no {flag}" if value is None else f"{flag} {value}"

    pairs = [f"{said(flag, new[flag])} vs {said(flag, old.get(flag))}" for flag in differing]
    return "asked vs stored: " + "; ".join(pairs) if pairs else ""


def request_flags(request: Json) -> dict[str, str | None]:
    """The flags of `extract` / `sweep` that give an extraction `request` (as its manifest records it)."""
    dataset: Any = request.get("dataset") or {}  # nested JSON, walked by key
    views = dataset.get("views")  # two views of each scene (--relation same_object_across_views)
    dataset = dataset.get("scenes") or {} if views else dataset
    first = dataset.get("first") if "subset_of" in dataset else None
    dataset = dataset.get("subset_of", dataset)
    kind = dataset.get("dataset")
    if kind == "synthetic":
        data, n_images = dataset.get("preset"), dataset.get("n")
    else:  # a folder's or ADE20K's own count: what --n-images took of it, or all of it
        if kind == "coco":
            image_dir = dataset.get("image_dir")
            root = f"coco:{dataset.get('annotations')}" + (f":{image_dir}" if image_dir else "")
        elif kind == "hf":
            root = hf_spec(dataset)
        else:
            root = {"ade20k": "ade20k:", "image_folder": "folder:"}.get(kind, f"{kind}:") + str(dataset.get("root"))
        data, n_images = (root, first) if first is not None else (f"{root} ({dataset.get('n')} images)", None)
    size = (request.get("preprocessing") or {}).get("size")
    if views and isinstance(size, list):  # each view's: the --size given
        size = size[0] if size[1] == views * size[0] else [size[0], size[1] // views]
    flags = {
        "--model": (request.get("model") or {}).get("source"),
        "--data": data,
        "--split": dataset.get("split"),
        "--n-images": n_images,
        "--size": "x".join(map(str, size)) if isinstance(size, list) else size,
        "--layers": _ranges(request.get("layers") or []),
        "--patches-per-image": request.get("patches_per_image"),
        "--seed": request.get("seed"),
        "--shard-size": request.get("shard_size"),
        "--relation": "same_object_across_views" if views else None,
    }
    return {flag: None if value is None else str(value) for flag, value in flags.items()}


def _ranges(values: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5', as `--layers` takes it."""
    spans: list[list[int]] = []
    for value in sorted(values):
        if spans and value == spans[-1][1] + 1:
            spans[-1][1] = value
        else:
            spans.append([value, value])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _run(args: argparse.Namespace, probes: list[str], dataset: Sequence[Scene]) -> int:
    from ..activations import ExtractProfile, ranks
    from ..hooks import HookedViT

    device = ranks.local_device(default_device(args.device))
    model = HookedViT.from_pretrained(args.model, device=device, seed=args.seed)
    layers = parse_layers(args.layers, model.cfg.n_layers)
    profile = ExtractProfile()
    options = dict(
        patches_per_image=_patches_per_image(args, model.cfg.patch_size, getattr(dataset, "pairing", "all")),
        batch_size=args.batch_size,
        size=args.size,
        shard_size=args.shard_size,
        workers=args.workers,
        writers=args.writers,
        profile=profile,
    )
    if args.command == "extract":
        return _extract(args, model, dataset, layers, device, options)
    result = _sweep(args, model, dataset, layers, probes, device, options)
    if args.profile:
        print(f"extraction: {profile.summary()}")
    if ranks.world()[0] != 0:
        return 0
    _print_report(args, result)
    return 0


def _patches_per_image(args: argparse.Namespace, patch_size: int, pairing: str) -> int | None:
    """--patches-per-image (default 64; on the benchmark's twin mazes every patch, so each flip pair is kept in
    both twins); above the patch grid, a warning: extract stores the whole grid, as more rows would only be
    padding."""
    from ..activations import ranks

    asked, side = args.patches_per_image, args.size // patch_size
    if asked is None and pairing == "twins":
        return None
    if asked is not None and asked > side * side and ranks.world()[0] == 0:
        print(
            f"binding-lens {args.command}: warning: --patches-per-image {asked} is more than the {side * side} "
            f"patches of a {args.size} px image ({side}x{side} patches of {patch_size} px); storing all "
            f"{side * side} of them",
            file=sys.stderr,
        )
    return PATCHES_PER_IMAGE if asked is None else asked


def _probe_names(args: argparse.Namespace) -> list[str]:
    """The probes `--probes` names (every one for `extract`; the directed ones for a directed `--relation`),
    each checked: a wrong name lists them all."""
    from ..errors import InputError

    directed = getattr(args, "relation", "same_object") in DIRECTED_RELATIONS
    known = DIRECTED_PROBE_NAMES if directed else PROBE_NAMES
    probes = (
        list(known)
        if getattr(args, "probes", "all") == "all"
        else [p.strip() for p in args.probes.split(",") if p.strip()]
    )
    for name in probes:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            what = f"probe for the directed relation {args.relation}" if directed else "probe"
            raise InputError(f"--probes: unknown {what} {name!r}.{hint} Known: {', '.join(known)}")
    return probes


def _dataset(args: argparse.Namespace, seed: int) -> Sequence[Scene]:
    """The scenes `--data` names, drawn with `seed`."""
    from ..data.spec import dataset_from_spec

    return dataset_from_spec(
        args.data,
        n=args.n_images,
        size=args.size,
        seed=seed,
        split=args.split,
        missing="skip" if args.skip_missing_masks else "error",
    )


def _extract(
    args: argparse.Namespace,
    model: HookedViT,
    dataset: Sequence[Scene],
    layers: list[int],
    device: torch.device,
    options: Options,
) -> int:
    """`binding-lens extract`: the store in `--out`."""
    from ..activations import extract, ranks

    rank = ranks.world()[0]
    store = extract(model, dataset, layers, args.out, device=device, seed=args.seed, **options)
    if rank == 0:
        print(f"activations of layers {layers} for {store.kept_images()} images in {args.out}")
    if args.profile:
        profile = options["profile"]
        print(f"rank {rank}: {profile.summary()}" if ranks.world()[1] > 1 else profile.summary())
    return 0


def _sweep(
    args: argparse.Namespace,
    model: HookedViT,
    dataset: Sequence[Scene],
    layers: list[int],
    probes: list[str],
    device: torch.device,
    options: Options,
) -> SweepResult:
    """`binding-lens sweep`'s runs: one sweep per seed of `--seed`..`--seed + --seeds - 1`, aggregated."""
    from ..activations.budget import GiB
    from ..analyses import layer_sweep_over_seeds
    from ..probes import ProbeTrainingConfig

    if args.paper_schedule:
        training = ProbeTrainingConfig.paper(epochs=args.epochs or 16, batch_images=args.batch_images, seed=args.seed)
    else:
        training = ProbeTrainingConfig(
            max_steps=args.max_steps, epochs=args.epochs, batch_images=args.batch_images, seed=args.seed
        )
    return layer_sweep_over_seeds(
        model,
        lambda seed: dataset if seed == args.seed else _dataset(args, seed),
        args.out,
        range(args.seed, args.seed + args.seeds),
        layers=layers,
        probes=probes,
        training=training,
        rank=args.rank,
        peak_by=args.peak_by,
        relation=args.relation,
        device=device,
        extract_kwargs=options,
        store=args.store,
        memory_budget=None if args.memory_budget is None else int(args.memory_budget * GiB),
    )


def _what(result: SweepResult) -> str:
    """What a learnt probe of this sweep would be read as: binding, or its relation by name."""
    return "binding" if result.relation == "same_object" else f"knowing {result.relation}"


def _print_report(args: argparse.Namespace, result: SweepResult) -> None:
    """The sweep's table, its training problems and where the report is, on rank 0."""
    if "store" in result.summary:
        print(f"store: {result.summary['store']['why']}")
    if args.seeds > 1:
        print(f"mean over seeds {args.seed}..{args.seed + args.seeds - 1}; [low, high]: 95% interval across seeds")
    print(result.table())
    problems = result.problems()
    if problems:
        print(
            f"\n{len(problems)} of {len(result.rows)} probes are not to be read as {_what(result)} (learnt False: on "
            "validation they do not beat the strongest network-free baseline beyond the noise, or on the "
            "benchmark their layer's linear probe) or did not converge:"
        )
        print("\n".join(f"  {line}" for line in problems))
    if result.summary.get("baselines", {}).get("pairing") == "twins":
        print(
            "\nscored on the benchmark's flip pairs: each pair is same-object in one twin maze and not in the other,"
            " with the same pixels around it; a probe binds only where it beats the strongest baseline and its"
            " layer's linear probe"
        )
    print(
        f"\nreport: {result.files['table_csv']}, {result.files['baselines_csv']}, {result.files['plot']}, "
        f"{result.files['summary']}"
    )
