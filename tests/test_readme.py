"""The README is executable: every `binding-lens` command and every Python block in it runs, in order.

How the README is read:
- ```bash blocks: each command line (`\\` continuations joined, `#` comments dropped) that runs
  `binding-lens` (or `.venv/bin/binding-lens`) runs in this process through `binding_lens.cli.main`;
  `make` lines are the setup commands CI itself runs (`make test` is this suite) and are not re-run.
  Inline `binding-lens ...` commands in the prose run too.
- ```python blocks run in order in one shared namespace, like a notebook, compiled with their README
  line numbers so a failure points at the README.
- Small sizes: a `<!-- readme-test: ... -->` comment right before a block says how. Before a shell
  block it holds arguments appended to each command (argparse lets the last value win; options a
  command lacks are left out); before a Python block, `old -> new` replacements separated by `;`.
  Inline commands get SMALL appended.
- No network: hub ids become the same architecture with random weights (HUB), and the /data paths
  become fixtures built here in the official layouts (an ADE20K release and an images/ + masks/ folder,
  both rendered from synthetic scenes).
- `view --run runs/demo/dino` reads what `make demo` writes; a small sweep of `zoo:dino` stands in.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from binding_lens.cli import build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"
HUB = {"facebook/dinov2-small": "random:dinov2-small"}
SMALL = ["--n-images", "24", "--size", "112", "--epochs", "1", "--batch-images", "8", "--n-scenes", "40",
         "--models", "zoo:dino"]
MARKER = re.compile(r"<!--\s*readme-test:(.*?)-->", re.S)


def blocks() -> list[tuple[int, str, str, str]]:
    """(line, language, code, marker) of every fenced bash/python block, in order."""
    found, lines, i = [], README.read_text().splitlines(), 0
    while i < len(lines):
        fence = re.match(r"^```(bash|python)\s*$", lines[i])
        if fence:
            start, body = i + 1, []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            before = "\n".join(lines[max(0, start - 3):start - 1])
            marker = MARKER.search(before)
            found.append((start + 1, fence.group(1), "\n".join(body), marker.group(1).strip() if marker else ""))
        i += 1
    return found


def inline_commands() -> list[tuple[int, str]]:
    """(line, command) of the `binding-lens ... --options` commands written inline in the prose."""
    text = README.read_text()
    prose = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)
    return [(prose[:m.start()].count("\n") + 1, " ".join(m.group(1).split()))
            for m in re.finditer(r"`(binding-lens [^`]+)`", prose) if "--" in m.group(1)]


def commands(code: str) -> list[str]:
    """Command lines of a shell block: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def options_of(argv: list[str]) -> set[str]:
    """The option strings the (sub)command of `argv` accepts."""
    parser = build_parser()
    for word in argv:
        sub = [a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict) and word in a.choices]
        if not sub:
            break
        parser = sub[0].choices[word]
    return {option for action in parser._actions for option in action.option_strings}


def with_small(argv: list[str], extra: list[str]) -> list[str]:
    """`argv` with the options of `extra` its command accepts appended."""
    known, out, i = options_of(argv), list(argv), 0
    while i < len(extra):
        option, value = extra[i], extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else None
        if option in known:
            out += [option] + ([value] if value is not None else [])
        i += 2 if value is not None else 1
    return out


def offline(text: str, fixtures: dict[str, str]) -> str:
    for old, new in {**HUB, **fixtures}.items():
        text = text.replace(old, new)
    return text


def run_cli(argv: list[str]) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit_:  # --help
            status = exit_.code
    assert status == 0, f"binding-lens {' '.join(argv)} exited {status}: {err.getvalue()[-2000:]}"


def write_ade_release(root: Path, n: int = 24) -> Path:
    """An ADE20K 2021_17_01 tree (index, images, *_seg.png) holding `n` rendered synthetic scenes."""
    from binding_lens.data import CLASS_NAMES, SyntheticScenes

    release = root / "ADE20K_2021_17_01"
    folder = "ADE20K_2021_17_01/images/ADE/validation/synthetic/scenes"
    (root / folder).mkdir(parents=True)
    names = []
    for i, scene in enumerate(SyntheticScenes("default", n=n, size=112, seed=7)):
        name = f"ADE_val_{i + 1:08d}.jpg"
        Image.fromarray(scene.image).save(root / folder / name, quality=95)
        seg = np.stack([scene.class_mask // 256 * 10, scene.class_mask % 256, scene.instance_mask], -1)
        Image.fromarray(seg.astype(np.uint8)).save(root / folder / name.replace(".jpg", "_seg.png"))
        names.append(name)
    index = {"filename": names, "folder": [folder] * n, "objectnames": [CLASS_NAMES[k] for k in sorted(CLASS_NAMES)]}
    with open(release / "index_ade20k.pkl", "wb") as f:
        pickle.dump(index, f)
    return release


def write_image_folder(root: Path, n: int = 4) -> Path:
    from binding_lens.data import SyntheticScenes

    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for i, scene in enumerate(SyntheticScenes("default", n=n, size=64, seed=8)):
        Image.fromarray(scene.image).save(root / "images" / f"scene{i}.png")
        Image.fromarray(scene.instance_mask.astype(np.uint8)).save(root / "masks" / f"scene{i}.png")
    return root


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readme")
    fixtures = {"/data/ADE20K_2021_17_01": str(write_ade_release(tmp / "data")),
                "/data/my_scenes": str(write_image_folder(tmp / "data" / "my_scenes"))}
    return tmp, fixtures, {"__name__": "readme"}


BLOCKS = blocks()


@pytest.mark.parametrize("line, language, code, marker", BLOCKS, ids=[f"README.md:{b[0]} {b[1]}" for b in BLOCKS])
def test_readme_block_runs(line, language, code, marker, workdir, monkeypatch):
    tmp, fixtures, namespace = workdir
    monkeypatch.chdir(tmp)
    if language == "python":
        for pair in filter(None, (p.strip() for p in marker.split(";"))):
            old, new = (s.strip() for s in pair.split("->"))
            assert old in code, f"README.md:{line}: the readme-test marker replaces {old!r}, which the block lacks"
            code = code.replace(old, new)
        exec(compile("\n" * (line - 1) + offline(code, fixtures), str(README), "exec"), namespace)
        return
    extra = shlex.split(marker)
    for argv in commands(offline(code, fixtures)):
        if argv[0] == "make":
            continue  # the setup commands: CI runs `make test` itself
        assert argv[0] in ("binding-lens", ".venv/bin/binding-lens"), f"README.md:{line}: unexpected command {argv}"
        if argv[1:3] == ["view", "--run"] and not (tmp / argv[3]).exists():
            run_cli(["sweep", "--model", "zoo:dino", "--data", "default", "--n-images", "24", "--size", "96",
                     "--probes", "quadratic", "--epochs", "1", "--out", argv[3]])  # stands in for `make demo`
        run_cli(with_small(argv[1:], extra))


def test_readme_inline_commands_run(workdir, monkeypatch):
    tmp, fixtures, _ = workdir
    monkeypatch.chdir(tmp)
    for line, command in inline_commands():
        run_cli(with_small(shlex.split(offline(command, fixtures))[1:], SMALL))


def test_every_command_named_in_the_readme_exists_and_ci_runs_the_readme_test_command():
    names = set(re.findall(r"binding-lens (\w+)", README.read_text()))
    known = set(options_of([]) | {a for action in build_parser()._actions if isinstance(getattr(action, "choices", None), dict)
                                  for a in action.choices})
    assert names <= known, f"README names commands that do not exist: {names - known}"
    root = README.parent
    assert "make test" in README.read_text() and "make test" in (root / ".ci" / "run").read_text()
    assert re.search(r"^test:", (root / "Makefile").read_text(), re.M)
