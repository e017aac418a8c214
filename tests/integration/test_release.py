"""The release: the wheel and the sdist `make test-release` built into dist/ (`python -m build`, then `twine
check`), and the wheel installed into a fresh virtual environment in a temporary folder outside the checkout,
where the getting-started page's example runs (its Python blocks as the docs test shrinks them, its viewer
command through the installed `binding-lens` script), `binding-lens demo --help` answers, a zoo model loads
from the installed checkpoints, and `binding_lens.__version__` is the installed metadata's.

Marked `release`: `make test-release` runs these (BINDING_LENS_RELEASE=required: a missing dist/ fails);
elsewhere they skip when dist/ holds no wheel. How the fresh environment gets the wheel's dependencies
(BINDING_LENS_RELEASE_DEPS): `install` (the default) installs the wheel with them as a user would, pinned
by constraints.txt; `borrow` installs the wheel alone and lends it this environment's site-packages through
a .pth file (offline, a minute instead of several), then `pip check` confirms its declared requirements are
met there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from binding_lens.zoo.registry import zoo_names

from helpers.docs import ROOT, document_items, python_code

pytestmark = pytest.mark.release

DIST = ROOT / "dist"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]  # what the build was asked for
NAME = "binding_lens"  # the file names' form of the distribution `binding-lens`


def built(pattern: str) -> Path:
    found = sorted(DIST.glob(pattern))
    if not found:
        why = f"no {pattern} in {DIST}: `make test-release` builds it (python -m build)"
        if os.environ.get("BINDING_LENS_RELEASE") == "required":
            pytest.fail(why)
        pytest.skip(why)
    assert len(found) == 1, f"more than one {pattern} in dist/: {found}"
    return found[0]


@pytest.fixture(scope="module")
def wheel() -> Path:
    return built(f"{NAME}-*.whl")


def test_the_wheel_and_the_sdist_carry_the_package_data_the_metadata_and_the_command(wheel):
    assert wheel.name == f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"{NAME}-{VERSION}.dist-info/METADATA").decode()
        entry_points = archive.read(f"{NAME}-{VERSION}.dist-info/entry_points.txt").decode()
    assert "Name: binding-lens" in metadata and f"Version: {VERSION}" in metadata
    assert "binding-lens = binding_lens.cli:main" in entry_points
    assert "binding_lens/py.typed" in names
    cards = {name for name in names if name.startswith("binding_lens/zoo/checkpoints/") and name.endswith("card.json")}
    shipped = len(zoo_names())
    assert len(cards) == shipped, f"the wheel ships {len(cards)} zoo cards, not the {shipped} models"
    assert any(name.startswith("binding_lens/zoo/checkpoints/mae/") and name.endswith(".safetensors") for name in names)
    assert {n for n in names if n.startswith("binding_lens/vis/html_viewer/static/")} >= {
        "binding_lens/vis/html_viewer/static/viewer.js",
        "binding_lens/vis/html_viewer/static/viewer.css",
    }
    assert not any(name.startswith(("tests/", "docs/")) for name in names)
    sdist = built(f"{NAME}-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {member.name.split("/", 1)[-1] for member in archive.getmembers()}
    assert {"pyproject.toml", "README.md", "binding_lens/py.typed", "binding_lens/cli/__init__.py"} <= members


def run(argv: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env | {"TQDM_DISABLE": "1"}
    )
    assert done.returncode == 0, (
        f"`{' '.join(argv)}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment, in a temporary folder outside the checkout, with the wheel installed."""
    home = tmp_path_factory.mktemp("release")
    assert ROOT not in home.parents
    venv = home / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=home)
    python = venv / "bin" / "python"
    if os.environ.get("BINDING_LENS_RELEASE_DEPS", "install") == "borrow":
        purelib = Path(
            run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], home).stdout.strip()
        )
        (purelib / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], cwd=home)
        # the wheel's own requirements (the fresh venv's bundled setuptools may be older than torch asks)
        checked = subprocess.run([str(python), "-m", "pip", "check"], cwd=home, capture_output=True, text=True)
        unmet = [line for line in checked.stdout.splitlines() if line.startswith("binding-lens ")]
        assert not unmet, f"the wheel's requirements are not met: {unmet}"
    else:
        run([str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)], cwd=home)
    return venv


def test_the_installed_package_is_the_wheels_with_its_version_and_data(installed):
    work = installed.parent / "work"
    work.mkdir(exist_ok=True)
    code = (
        "import importlib.metadata, pathlib, binding_lens\n"
        "from binding_lens import HookedViT\n"
        "from binding_lens.zoo.registry import zoo_path\n"
        "package = pathlib.Path(binding_lens.__file__).parent\n"
        "model = HookedViT.from_pretrained('zoo:mae')\n"
        "print(binding_lens.__version__, importlib.metadata.version('binding-lens'))\n"
        "print(package)\n"
        "print(zoo_path('zoo:mae'))\n"
        "print((package / 'py.typed').exists(), model.cfg.n_layers)\n"
    )
    lines = run([str(installed / "bin" / "python"), "-c", code], cwd=work).stdout.splitlines()
    assert lines[0] == f"{VERSION} {VERSION}"
    package, checkpoint = Path(lines[1]), Path(lines[2])
    assert installed in package.parents and ROOT not in package.parents, f"imported from {package}"
    assert installed in checkpoint.parents, f"the zoo checkpoint comes from {checkpoint}"
    assert lines[3] == "True 6"


def test_the_getting_started_example_and_the_command_run_in_the_fresh_environment(installed):
    work = installed.parent / "getting-started"
    work.mkdir()
    items = [item for item in document_items()[0] if item.doc == "docs/getting-started.md"]
    script = "\n\n".join(python_code(item) for item in items if item.kind == "python")
    assert "layer_sweep" in script and "shuffle_effect" in script
    (work / "getting_started.py").write_text(script)
    done = run([str(installed / "bin" / "python"), "getting_started.py"], cwd=work)
    assert "quadratic" in done.stdout and "binding shuffle" in done.stdout

    command = installed / "bin" / "binding-lens"
    run([str(command), "view", "--run", "runs/start", "--images", "0,1", "--out", "start.html"], cwd=work)
    page = (work / "start.html").read_text()
    assert "bindingLensViewer" in page and len(page) > 20_000  # the viewer's script, inlined from the wheel
    help_text = run([str(command), "demo", "--help"], cwd=work).stdout
    assert "zoo" in help_text and "--n-scenes" in help_text
