"""`binding-lens hooks`: load a model, print its hook points with their shapes and its parity with HF."""

from __future__ import annotations

import argparse

from .arguments import DEVICE_HELP, MODEL_HELP, default_device, image_size


def add(commands: argparse._SubParsersAction) -> None:
    hooks = commands.add_parser(
        "hooks",
        help="load a model and print its hook points and cache shapes",
        description="Load a model and print its hook points with their cache shapes, and its parity with HF.",
    )
    hooks.add_argument("--model", default="random:dinov2-small", help=MODEL_HELP)
    hooks.add_argument(
        "--size", type=image_size, default=None, help="image size HEIGHTxWIDTH (default: the model's native size)"
    )
    hooks.add_argument("--all-blocks", action="store_true", help="list the hook points of every block")
    hooks.add_argument("--device", default=None, help=DEVICE_HELP)


def run(args: argparse.Namespace) -> int:
    from ..hooks import HookedViT

    model = HookedViT.from_pretrained(args.model, device=default_device(args.device))
    size = args.size or model.cfg.image_size
    print_hook_report(model, size, all_blocks=args.all_blocks)
    return 0


def sample_pixels(model, size: tuple[int, int], batch: int = 1):
    """A deterministic test image (smooth color ramps), preprocessed with the model's statistics."""
    import torch

    height, width = size
    rows = torch.linspace(0, 1, height).view(height, 1).expand(height, width)
    cols = torch.linspace(0, 1, width).view(1, width).expand(height, width)
    image = torch.stack([rows, cols, (rows + cols) / 2], dim=-1)
    return model.preprocess([image.numpy()] * batch)


def print_hook_report(model, size: tuple[int, int], all_blocks: bool = False) -> None:
    from ..hooks.parity import cache_shapes, hf_parity, hook_point_count

    cfg = model.cfg
    pixels = sample_pixels(model, size)
    rows, cols = model.patch_grid(pixels)
    shapes = cache_shapes(model, pixels)
    print(f"model      {cfg.source}  (family {cfg.family}, HF model_type {cfg.model_type})")
    print(
        f"shape      {cfg.n_layers} blocks, d_model {cfg.d_model}, {cfg.n_heads} heads x d_head {cfg.d_head}, "
        f"d_mlp {cfg.d_mlp}, patch {cfg.patch_size}, native {cfg.image_size[0]}x{cfg.image_size[1]}"
    )
    print(
        f"input      {size[0]}x{size[1]} px -> {rows}x{cols} patches + {cfg.n_prefix_tokens} prefix token(s) "
        f"= {rows * cols + cfg.n_prefix_tokens} positions; mean {cfg.image_mean}, std {cfg.image_std}"
    )
    print(
        f"hooks      {hook_point_count(model)}; those that fire, "
        + ("every block:" if all_blocks else "outside blocks and in block 0 (blocks 1.. have the same):")
    )
    for name, shape in shapes.items():
        if all_blocks or not name.startswith("blocks.") or name.startswith("blocks.0."):
            print(f"  {name:<34} {list(shape)}")
    errors = hf_parity(model, pixels)
    print(f"parity     max |HookedViT - HF hidden_states| over {len(errors)} residual streams: {max(errors):.2e}")
