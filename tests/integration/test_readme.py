"""The README and the documentation are tested artifacts: their shell commands and Python snippets run.

The documents: README.md, then every page of the site under docs/ in the order of mkdocs.yml's `nav`
(DOCUMENTS). One pytest test per item, ids like `docs/guides/probing.md:17 bash`, run in that order.
How a document is read:
- ```bash blocks: each command line (`\\` continuations joined, `# comments` dropped). `make` lines are
  not run: they are the setup commands CI itself runs (`.ci/run` is `make test`, i.e. this suite).
  `binding-lens` / `.venv/bin/binding-lens` lines run through `binding_lens.cli.main`, the function
  the installed `binding-lens` script calls, in this process, in one temporary working directory
  (later commands read what earlier ones wrote). In-process, not a subprocess per command: every
  fresh process pays ~5 s importing torch and transformers, about 50 s for the README's commands, and
  the whole file must stay well under 60 s on 2 cores. The installed script itself is run as a
  subprocess for `--help` of every command the README names (cheap: `--help` imports no torch).
  A command exiting non-zero fails its test and shows its stderr. `torchrun ... -m binding_lens ...`
  lines are launched for real (subprocesses, gloo on CPU): two ranks for `--nproc-per-node N`, and a
  line for several nodes as all its nodes at once on this machine, meeting at localhost.
  Lines that begin with `pip` are installs (the release test, `make test-release`, installs the wheel
  into a fresh environment). The working directory is shared by all documents: a page may read a run
  folder that an earlier page's command wrote.
- ```python blocks run in order in one namespace per document, like a notebook (a page never relies on
  another page's variables), with the temporary directory as cwd, compiled against the document's own
  line numbers so a traceback points at its file and line.
- Prose: an inline `binding-lens ...` command is run when a readme-test marker comes right before its
  paragraph; otherwise (a reference such as `binding-lens zoo compare`) it must parse.
- Small sizes: a `<!-- readme-test: ... -->` comment on the line right before a block (or paragraph).
  For shell commands it holds arguments appended to each `binding-lens` command (argparse lets the
  last value win; an option a command does not take is left out for it, e.g. extract has no
  --epochs). For Python blocks, literal replacements `old -> new`, separated by `;`, or `needs MODULE ...`
  for a block that uses an optional extra: it runs where the extra is installed and is skipped elsewhere;
  such a block is marked `extras`, and `make test-extras` runs it in .venv-extras, where it must not skip.
  `parse-only` before a shell block: its commands need the hub's large weights and a GPU (Reproducing the
  papers), so each is parsed (its command and options exist), not run; the pipelines they call run on
  small models elsewhere in the documents.
- No network and no /data here: the substitutions below (HUB, DATA) apply to every block, and the
  data folders are built in the official layouts from synthetic scenes.
- `view --run runs/demo/mae` reads what `make demo` writes; a small `binding-lens sweep` of `zoo:mae`
  makes it first (PREPARED), since the `make` lines are not run.
- Torch runs on one thread here (tiny tensors; two threads lose several-fold when another process holds
  a core). After a Python block fails, the later ones are skipped (they share its namespace).
- KNOWN_FAILING: README text -> reason, for a line that fails because of a library bug (strict xfail,
  so the fix shows up as XPASS and the entry is removed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from binding_lens.cli import build_parser, main

from helpers.ade20k import OBJECTNAMES, encode_ade_seg
from helpers.coco import write_coco_fixture
from helpers.docs import DATA, DOCUMENTS, ROOT, Item, document_items, nav_pages, offline, python_code
from helpers.extras import extra
from helpers.hf import write_hf_fixture
from helpers.processes import torchrun
from helpers.saes import write_sae_layouts

BINDING_LENS = Path(sys.executable).parent / "binding-lens"

PREPARED = {
    "runs/demo/mae": [
        "sweep",
        "--model",
        "zoo:mae",
        "--data",
        "default",
        "--n-images",
        "12",
        "--size",
        "96",
        "--probes",
        "quadratic",
        "--epochs",
        "1",
        "--out",
        "runs/demo/mae",
    ]
}
KNOWN_FAILING: dict[str, str] = {}  # a text of the README item -> why it fails (xfail, strict)
PARSE_ONLY = "parse-only"

ITEMS, DANGLING = document_items()


def command_lines(code: str) -> list[list[str]]:
    """The command lines of a shell block: `\\` continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [argv for argv in (shlex.split(line, comments=True) for line in joined.splitlines()) if argv]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def parser_of(argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)parser that handles `argv` (binding-lens arguments, without the program name)."""
    parser = build_parser()
    for word in argv:
        if word not in subcommands(parser):
            break
        parser = subcommands(parser)[word]
    return parser


def options(argv: list[str]) -> set[str]:
    return {option for action in parser_of(argv)._actions for option in action.option_strings}


def pairs(extra: list[str]) -> list[list[str]]:
    """`--flag value --switch ...` as [[--flag, value], [--switch], ...]."""
    out: list[list[str]] = []
    for word in extra:
        if word.startswith("--") or not out:
            out.append([word])
        else:
            out[-1].append(word)
    return out


def with_small(argv: list[str], extra: list[str]) -> list[str]:
    """`argv` with the marker's options that its command takes appended."""
    known = options(argv)
    return argv + [word for pair in pairs(extra) if pair[0] in known for word in pair]


def binding_lens_argv(argv: list[str], where: str) -> list[str]:
    if argv[0] == "torchrun":
        return torchrun_parts(argv, where)[1]
    assert argv[0] in ("binding-lens", ".venv/bin/binding-lens"), f"{where}: the test does not know how to run {argv}"
    return argv[1:]


def torchrun_parts(argv: list[str], where: str) -> tuple[list[str], list[str]]:
    """(torchrun's options, binding-lens arguments) of `torchrun OPTIONS -m binding_lens ARGS`."""
    at = argv.index("-m") if "-m" in argv else -1
    assert at > 0 and argv[at + 1 : at + 2] == ["binding_lens"], f"{where}: torchrun must launch `-m binding_lens`"
    return argv[1:at], argv[at + 2 :]


def _option(options: list[str], name: str, value: str | None = None) -> list[str]:
    """`options` with `name`'s value replaced by `value` (or the option removed when value is None)."""
    out, skip = [], False
    for word in options:
        if skip:
            skip = False
            continue
        if word == name:
            skip = True
            out += [] if value is None else [name, value]
            continue
        out.append(word)
    return out


def run_torchrun(argv: list[str], extra: list[str], where: str) -> None:
    """A torchrun line, launched for real on this CPU machine (gloo): --nproc-per-node N runs 2 ranks; a
    line for several nodes runs all its nodes at once here, one rank each, meeting at localhost."""
    launch, args = torchrun_parts(argv, where)
    args = with_small(args, extra)
    nodes = int(launch[launch.index("--nnodes") + 1]) if "--nnodes" in launch else 1
    launch = _option(launch, "--nproc-per-node", "2" if nodes == 1 else "1")
    if nodes > 1:
        with socket.socket() as probe:
            probe.bind(("localhost", 0))
            port = probe.getsockname()[1]
        launch = _option(launch, "--rdzv-endpoint", f"localhost:{port}")
        launches = [_option(launch, "--node-rank", str(rank)) for rank in range(nodes)]
    else:
        launches = [launch]
    for done in torchrun(launches, args):
        assert done.returncode == 0, (
            f"{where}: `torchrun ... {shlex.join(args)}` exited "
            f"{done.returncode}:\n{progress_free(done.stderr)[-3000:]}"
        )


def progress_free(text: str) -> str:
    lines = text.replace("\r", "\n").splitlines()
    return "\n".join(line for line in lines if "it/s]" not in line and "s/it]" not in line and "%|" not in line)


def run_cli(argv: list[str], where: str) -> None:
    """`binding-lens ARGV` through the console script's function; it must exit 0."""
    out, err, threads = io.StringIO(), io.StringIO(), torch.get_num_threads()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as exit_:  # argparse errors and --help
                status = exit_.code
    finally:
        torch.set_num_threads(threads)  # `zoo train --threads` sets it for the process
    assert status in (0, None), (
        f"{where}: `binding-lens {shlex.join(argv)}` exited {status}:\n{progress_free(err.getvalue())[-3000:]}"
    )


def write_ade20k(release: Path, n: int = 16) -> None:
    """An ADE20K_2021_17_01 tree (index_ade20k.pkl, images/ADE/validation/..., *_seg.png) of synthetic scenes."""
    from binding_lens.data import SyntheticScenes

    folder = f"{release.name}/images/ADE/validation/synthetic/scenes"
    (release.parent / folder).mkdir(parents=True)
    names = [f"ADE_val_{i + 1:08d}.jpg" for i in range(n)]
    for name, scene in zip(names, SyntheticScenes("default", n=n, size=112, seed=7)):
        Image.fromarray(scene.image).save(release.parent / folder / name, quality=95)
        seg = encode_ade_seg(scene.class_mask.astype(np.int64), scene.instance_mask.astype(np.int64))
        Image.fromarray(seg).save(release.parent / folder / name.replace(".jpg", "_seg.png"))
    with open(release / "index_ade20k.pkl", "wb") as f:
        pickle.dump({"filename": names, "folder": [folder] * n, "objectnames": OBJECTNAMES}, f)


def write_image_folder(root: Path, n: int = 4) -> None:
    """ROOT/images/<stem>.png beside ROOT/masks/<stem>.png (instance ids), as ImageFolderWithMasks reads."""
    from binding_lens.data import SyntheticScenes

    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for i, scene in enumerate(SyntheticScenes("default", n=n, size=64, seed=8)):
        Image.fromarray(scene.image).save(root / "images" / f"scene{i}.png")
        Image.fromarray(scene.instance_mask.astype(np.uint8)).save(root / "masks" / f"scene{i}.png")


@pytest.fixture(scope="module")
def readme(tmp_path_factory):
    """The README's working directory (with the DATA fixtures) and its Python namespace, shared by all items.
    One torch thread: these tensors are tiny, and two threads lose several-fold when another process
    holds a core."""
    cwd = tmp_path_factory.mktemp("readme")
    write_ade20k(cwd / DATA["/data/ADE20K_2021_17_01"])
    write_image_folder(cwd / DATA["/data/my_scenes"])
    write_coco_fixture(cwd / "data")  # data/coco/annotations/instances.json and data/coco/images/
    write_hf_fixture(cwd / "data" / "hf")  # data/hf/arrow (save_to_disk) and data/hf/parquet
    write_sae_layouts(cwd / DATA["/data/saes"], d_in=96, hook="blocks.3.hook_resid_post")  # zoo:mae's width
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield {"cwd": cwd, "namespaces": {}, "python_failed": {}}
    torch.set_num_threads(threads)


def parse_command(args: list[str], where: str) -> None:
    """`binding-lens ARGS` must parse: its command and options exist (run nothing)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            build_parser().parse_args(args)
    except SystemExit as exit_:  # --help, or an argparse error
        assert exit_.code == 0, f"{where}: `binding-lens {shlex.join(args)}` does not parse: {err.getvalue()}"


def run_shell_block(item: Item, cwd: Path) -> None:
    commands = command_lines(offline(item.text))
    runnable = [argv for argv in commands if argv[0] not in ("make", "pip")]
    if not runnable:
        pytest.skip(
            "`make` lines are the setup commands CI itself runs (.ci/run: `make test`, this suite), and `pip` "
            "lines the installs `make test-release` checks"
        )
    if item.marker == PARSE_ONLY:
        for argv in runnable:
            parse_command(binding_lens_argv(argv, item.id), item.id)
        return
    extra = shlex.split(item.marker or "")
    wanted = {pair[0] for pair in pairs(extra)}
    taken = {option for argv in runnable for option in options(binding_lens_argv(argv, item.id)) & wanted}
    assert taken == wanted, f"{item.id}: no command of the block takes the marker's {sorted(wanted - taken)}"
    for argv in runnable:
        if argv[0] == "torchrun":
            run_torchrun(argv, extra, item.id)
            continue
        args = binding_lens_argv(argv, item.id)
        for path, prepare in PREPARED.items():
            if path in args and not (cwd / path).exists():
                run_cli(prepare, f"{item.id} (preparing {path}, what `make demo` writes)")
        run_cli(with_small(args, extra), item.id)


def run_python_block(item: Item, namespace: dict) -> None:
    marker = item.marker or ""
    if marker.startswith("needs "):  # an optional extra: run where it is installed, skipped (and said) elsewhere
        for module in marker.removeprefix("needs ").split():
            extra(module, reason=f"{item.id} needs the optional {module} (see the install notes of {item.doc})")
    # Padded to the block's line, so tracebacks name the document and the line as written there.
    padded = "\n" * (item.line - 1) + python_code(item)
    exec(compile(padded, str(ROOT / item.doc), "exec"), namespace)  # noqa: S102 (the document's own code)


def run_inline(item: Item) -> None:
    args = binding_lens_argv(shlex.split(offline(item.text)), item.id)
    if item.marker is not None:
        run_cli(with_small(args, shlex.split(item.marker)), item.id)
        return
    parse_command(args, item.id)  # a reference to a command: it must parse (names a command and options that exist)


def known_failing(item: Item) -> str | None:
    return next((why for text, why in KNOWN_FAILING.items() if text in item.text), None)


def marks(item: Item) -> list:
    """xfail for a known failure; `extras` for a block that needs an optional extra (`make test-extras`)."""
    found = [pytest.mark.xfail(reason=known_failing(item), strict=True)] if known_failing(item) else []
    return found + ([pytest.mark.extras] if (item.marker or "").startswith("needs ") else [])


def params() -> list:
    return [pytest.param(item, id=item.id, marks=marks(item)) for item in ITEMS]


@pytest.mark.parametrize("item", params())
def test_readme_item_runs(item: Item, readme, monkeypatch):
    monkeypatch.chdir(readme["cwd"])
    if item.kind == "bash":
        run_shell_block(item, readme["cwd"])
    elif item.kind == "inline":
        run_inline(item)
    else:
        failed = readme["python_failed"].get(item.doc)
        if failed:
            pytest.skip(f"the Python blocks of {item.doc} share one namespace and {failed} failed")
        namespace = readme["namespaces"].setdefault(item.doc, {"__name__": "docs"})
        try:
            run_python_block(item, namespace)
        except Exception:
            if not known_failing(item):  # a known failure leaves the later blocks to run as far as they can
                readme["python_failed"][item.doc] = item.id
            raise


def test_readme_markers_apply_to_something():
    assert not DANGLING, f"readme-test markers at {DANGLING} precede no bash/python block or command"
    assert [item.kind for item in ITEMS].count("python") >= 5 and any(i.kind == "bash" for i in ITEMS)
    assert all(item.marker != PARSE_ONLY or item.kind == "bash" for item in ITEMS), "parse-only is for shell blocks"


def test_every_page_of_the_site_is_read():
    """Each page of mkdocs.yml's nav is a file under docs/ (read here) or the generated notebook page."""
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    missing = [page for page in nav if not (ROOT / "docs" / page).exists() and page != "quickstart.md"]
    assert not missing, f"mkdocs.yml's nav names pages that are not in docs/: {missing}"
    on_disk = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    left_out = on_disk - set(nav)
    assert not left_out, f"pages under docs/ that the nav leaves out (and the test would not run): {left_out}"


def named_commands(text: str) -> set[tuple[str, ...]]:
    """('zoo', 'train'), ('sweep',), ... : every `binding-lens <command> [<subcommand>]` the README names."""
    top, found = subcommands(build_parser()), set()
    for first, second in re.findall(r"binding-lens ([a-z][\w-]*)(?: ([a-z][\w-]*))?", text):
        found.add((first, second) if first in top and subcommands(top[first]) else (first,))
    return found


def test_every_command_the_readme_names_exists_and_the_installed_script_runs_it():
    names = set().union(*(named_commands(path.read_text()) for path in DOCUMENTS))
    assert {("sweep",), ("zoo", "train"), ("view",), ("ablate",), ("hooks",)} <= names
    env = {**os.environ, "TQDM_DISABLE": "1"}
    top = subcommands(build_parser())
    for name in sorted(names):
        assert name[0] in top and (len(name) == 1 or name[1] in subcommands(top[name[0]])), (
            f"README names `binding-lens {' '.join(name)}`, which does not exist"
        )
        done = subprocess.run(
            [str(BINDING_LENS), *name, "--help"], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert done.returncode == 0, f"README names `binding-lens {' '.join(name)}`, which fails: {done.stderr}"
    done = subprocess.run(
        [str(BINDING_LENS), "--help"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0 and "sweep" in done.stdout


def test_the_readme_test_command_is_what_ci_runs():
    readme = [item for item in ITEMS if item.kind == "bash" and item.doc == "README.md"]
    shell = [argv for item in readme for argv in command_lines(item.text)]
    assert ["make", "test"] in shell, "the README no longer shows `make test`"
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert "make test" in ci, f".ci/run does not call `make test`: {ci}"
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target and "-m pytest" in target.group(1), "the Makefile's `test` target does not run pytest"
