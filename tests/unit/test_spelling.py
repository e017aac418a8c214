"""One spelling: American, as torch, transformers and TransformerLens write it (optimizer, normalize, color),
in the package, its tests, scripts, examples, README and documentation pages (the CHANGELOG's history stays as
written)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRITISH_STEMS = ("optimis", "normalis", "initialis", "standardis", "serialis", "quantis", "randomis", "visualis")
BRITISH_WORDS = ("colour", "labelled", "labelling", "centre", "centred", "centring", "behaviour", "neighbour", "grey")
PATTERN = re.compile(
    r"(?<![A-Za-z])(?:[A-Za-z]*(?:" + "|".join(BRITISH_STEMS) + r")(?:e|ed|es|ing|ation|ations|er|ers)"
    r"|(?:" + "|".join(BRITISH_WORDS) + r")s?)(?![a-z])",
    re.IGNORECASE,
)


def test_one_spelling_everywhere():
    files = [
        *ROOT.joinpath("binding_lens").rglob("*.py"),
        *ROOT.joinpath("binding_lens").rglob("*.js"),
        *(p for p in ROOT.joinpath("tests").rglob("*.py") if p.name != Path(__file__).name),
        *ROOT.joinpath("benchmarks").rglob("*.py"),
        *ROOT.joinpath("scripts").rglob("*"),
        *ROOT.joinpath("examples").rglob("*.ipynb"),
        ROOT / "README.md",
        *ROOT.joinpath("docs").rglob("*.md"),
        ROOT / "mkdocs.yml",
    ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in files
        if path.is_file() and "node_modules" not in path.parts
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if "# old name" not in line  # a renamed name kept only to say where it went
        for match in PATTERN.finditer(line)
    ]
    assert not found, "British spellings (write them as torch does):\n" + "\n".join(found[:30])


def test_the_pattern_finds_what_it_should():
    assert [m.group(0) for m in PATTERN.finditer("optimiser normalised colour_index U_colour labelled centred")] == [
        "optimiser",
        "normalised",
        "colour",
        "colour",
        "labelled",
        "centred",
    ]
    assert not PATTERN.search("optimizer normalized color labeled centered optimistic emphasis")
