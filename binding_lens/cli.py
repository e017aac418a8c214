"""The `binding-lens` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import torch

from .hooks import HookedViT
from .hooks.loading import ARCHITECTURES, load_hooked_vit


def _sample_pixels(model: HookedViT, size: tuple[int, int], batch: int = 1) -> torch.Tensor:
    """A deterministic test image (smooth colour ramps), preprocessed with the model's statistics."""
    height, width = size
    rows = torch.linspace(0, 1, height).view(height, 1).expand(height, width)
    cols = torch.linspace(0, 1, width).view(1, width).expand(height, width)
    image = torch.stack([rows, cols, (rows + cols) / 2], dim=-1)
    return model.preprocess([image.numpy()] * batch)


def cache_shapes(model: HookedViT, pixel_values: torch.Tensor) -> dict[str, tuple[int, ...]]:
    """Shape of every hook point's activation on these pixel values."""
    with torch.inference_mode():
        _, cache = model.run_with_cache(pixel_values)
    return {name: tuple(value.shape) for name, value in cache.items()}


def hf_parity(model: HookedViT, pixel_values: torch.Tensor) -> list[float]:
    """Max |hooked resid - HF hidden_states| per layer (index 0 = the embeddings)."""
    kwargs = model.adapter.reference_kwargs(model.hf_model, pixel_values)
    with torch.inference_mode():
        reference = model.hf_model(pixel_values, output_hidden_states=True, **kwargs).hidden_states
        _, cache = model.run_with_cache(pixel_values, names_filter=lambda n: "hook_resid_p" in n)
    ours = [cache["blocks.0.hook_resid_pre"]] + [cache[f"blocks.{l}.hook_resid_post"] for l in range(model.cfg.n_layers)]
    return [(a - b).abs().max().item() for a, b in zip(ours, reference)]


def print_hook_report(model: HookedViT, size: tuple[int, int], all_blocks: bool = False) -> None:
    cfg = model.cfg
    pixels = _sample_pixels(model, size)
    rows, cols = model.patch_grid(pixels)
    shapes = cache_shapes(model, pixels)
    print(f"model      {cfg.source}  (family {cfg.family}, HF model_type {cfg.model_type})")
    print(f"shape      {cfg.n_layers} blocks, d_model {cfg.d_model}, {cfg.n_heads} heads x d_head {cfg.d_head}, "
          f"d_mlp {cfg.d_mlp}, patch {cfg.patch_size}, native {cfg.image_size[0]}x{cfg.image_size[1]}")
    print(f"input      {size[0]}x{size[1]} px -> {rows}x{cols} patches + {cfg.n_prefix_tokens} prefix token(s) "
          f"= {rows * cols + cfg.n_prefix_tokens} positions; mean {cfg.image_mean}, std {cfg.image_std}")
    print(f"hooks      {len(shapes)} hook points; "
          + ("every block:" if all_blocks else "outside blocks and in block 0 (blocks 1.. have the same):"))
    for name, shape in shapes.items():
        if all_blocks or not name.startswith("blocks.") or name.startswith("blocks.0."):
            print(f"  {name:<34} {list(shape)}")
    errors = hf_parity(model, pixels)
    print(f"parity     max |HookedViT - HF hidden_states| over {len(errors)} residual streams: {max(errors):.2e}")


def _size(text: str) -> tuple[int, int]:
    parts = text.lower().replace(",", "x").split("x")
    if len(parts) == 1:
        parts = parts * 2
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"image size {text!r} is not HEIGHTxWIDTH or a single integer") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="binding-lens", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    hooks = commands.add_parser("hooks", help="load a model and print its hook points and cache shapes")
    hooks.add_argument("--model", default="random:dinov2-small",
                       help="hub id or local path; random:<arch> (one of "
                            f"{', '.join(sorted(ARCHITECTURES))}); config:<config.json>; tiny:<name>")
    hooks.add_argument("--size", type=_size, default=None, help="image size HEIGHTxWIDTH (default: 224 or the native size)")
    hooks.add_argument("--all-blocks", action="store_true", help="list the hook points of every block")
    hooks.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")

    commands.add_parser("demo", help="the main job on the embedded defaults")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "hooks":
        model = load_hooked_vit(args.model, device=args.device)
        size = args.size or (224 - 224 % model.cfg.patch_size,) * 2
        print_hook_report(model, size, all_blocks=args.all_blocks)
    elif args.command == "demo":
        print("binding-lens demo: the DINOv2-small architecture with random weights (no machine here can")
        print("download pretrained weights), hooked and checked against the plain HF model.\n")
        print_hook_report(load_hooked_vit("random:dinov2-small"), (224, 224))
    return 0


if __name__ == "__main__":
    sys.exit(main())
