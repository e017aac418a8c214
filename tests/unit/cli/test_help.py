"""Every `--help` shows each option's default, a help line for every option and the command's description."""

from __future__ import annotations

import argparse
import contextlib
import io
import re

import pytest

from binding_lens.cli import build_parser, main, shown_default


def all_parsers(parser: argparse.ArgumentParser | None = None) -> list[argparse.ArgumentParser]:
    """The `binding-lens` parser and every (sub)command's parser below it, walked from the parser itself."""
    parser = parser or build_parser()
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += all_parsers(child)
    return found


PARSERS = all_parsers()


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings]


def entry(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The option's entry in its command's help, on one line."""
    return " ".join(parser._get_formatter()._format_action(action).split())


def has_default(action: argparse.Action) -> bool:
    return action.default not in (None, argparse.SUPPRESS) and not isinstance(action.default, bool)


def test_every_command_is_walked():
    names = {parser.prog.removeprefix("binding-lens").strip() for parser in PARSERS}
    assert len(PARSERS) == 18
    assert {"", "sweep", "extract", "ground", "zoo train", "zoo list", "zoo compare", "demo"} <= names
    assert sum(has_default(action) for parser in PARSERS for action in options(parser)) >= 79


@pytest.mark.parametrize("parser", PARSERS, ids=[parser.prog for parser in PARSERS])
def test_help_shows_each_default_a_help_line_for_each_option_and_a_description(parser):
    assert parser.description and "\n" not in parser.description, f"{parser.prog} has no one-line description"
    text = " ".join(parser.format_help().split())
    assert "".join(parser.description.split()) in "".join(text.split())  # wrapped, maybe after a hyphen
    for action in options(parser):
        shown = entry(parser, action)
        assert action.help and len(shown) > len(", ".join(action.option_strings)) + 8, f"{shown!r} has no help"
        if has_default(action):
            assert f"(default: {shown_default(action.default)})" in shown, shown
            assert shown.count("(default") == 1 and not re.search(r"default \d", shown), f"{shown!r}: two defaults"
    assert "default: None" not in text and "default: False" not in text


def test_defaults_are_shown_as_typed_and_only_where_they_mean_something():
    assert shown_default(["cls", "spatial"]) == "cls,spatial" and shown_default(30.0) == "30"
    help_of = {parser.prog: " ".join(parser.format_help().split()) for parser in PARSERS}
    assert "--n-images N_IMAGES images to use (synthetic: generated) (default: 400)" in help_of["binding-lens extract"]
    assert "(default: cls,spatial)" in help_of["binding-lens bits"]
    assert (
        "--max-mb MAX_MB file size budget in MB: fewer bits are used to fit it (0: no limit) (default: 30)"
        in (help_of["binding-lens view"])
    )
    assert "--all-blocks list the hook points of every block --device" in help_of["binding-lens hooks"]


def test_help_is_printed_by_each_command(capsys):
    for parser in PARSERS:
        argv = parser.prog.split()[1:] + ["--help"]
        with pytest.raises(SystemExit) as exit_, contextlib.redirect_stderr(io.StringIO()):
            main(argv)
        assert exit_.value.code == 0
        assert parser.description.split()[0] in capsys.readouterr().out


def test_version_prints_the_package_version(capsys):
    from binding_lens.version import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"binding-lens {__version__}"


def test_the_model_help_names_every_spec_prefix():
    from binding_lens.cli.arguments import MODEL_HELP

    for prefix in ("zoo:", "random:", "config:", "tiny:", "timm:", "open_clip:"):
        assert prefix in MODEL_HELP
