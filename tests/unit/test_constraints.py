"""The two lock files agree: constraints-extras.txt (`make test-extras`) is constraints.txt with the torch /
torchvision pair that timm and open_clip need, plus the extras; `.ci/run` runs both environments."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pins(name: str) -> dict[str, str]:
    """`package: version` of a constraints file (names normalized as pip does)."""
    found = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            package, version = line.split("==")
            found[re.sub(r"[-_.]+", "-", package).lower()] = version
    return found


def test_the_extras_lock_file_is_the_main_one_with_the_matching_torch_pair_and_the_extras():
    main, extras = pins("constraints.txt"), pins("constraints-extras.txt")
    differ = {name: (version, extras.get(name)) for name, version in main.items() if extras.get(name) != version}
    assert differ == {"torch": ("2.13.0", "2.14.1")}, f"constraints-extras.txt departs from constraints.txt: {differ}"
    assert extras["torchvision"] == "0.29.1"  # the build made for torch 2.14.1
    assert {"timm", "open-clip-torch"} <= set(extras)


def test_ci_runs_the_extras_tests_after_the_suite_in_their_own_environment():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip()[:1] not in ("", "#")]
    assert ci.index("make test-extras") > ci.index("make test")
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^test-extras:(.*)\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target and ".venv-extras" in makefile and "constraints-extras.txt" in makefile
    assert "-m extras" in target.group(2) and "BINDING_LENS_EXTRAS=required" in target.group(2)
