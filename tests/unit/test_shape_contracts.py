"""The jaxtyping annotations of binding_lens are checked while the tests run.

pyproject.toml's pytest `addopts` passes `--jaxtyping-packages=binding_lens,beartype.beartype(...)`:
jaxtyping's import hook decorates every function and dataclass of the package with
`@jaxtyped(typechecker=beartype)`, so a tensor whose shape or dtype contradicts its annotation
(`Float[Tensor, "batch pos d_model"]`) raises `TypeCheckError` at the call. These tests fail when the
hook is off (run without that option, or binding_lens imported before pytest installs it): the first two
wrongly typed calls below run without error in plain Python, the last ones raise the library's own
InputError."""

from __future__ import annotations

import pytest
import torch
from jaxtyping import TypeCheckError

from binding_lens.probes import make_probe
from binding_lens.probes.base import masked_pair_bce
from binding_lens.stats.bootstrap import ratio_of_sums

HOOK_OFF = "no TypeCheckError: jaxtyping's import hook is off (see [tool.pytest.ini_options] addopts)"


def expect_type_check_error(call) -> TypeCheckError:
    try:
        call()
    except TypeCheckError as error:
        return error
    pytest.fail(HOOK_OFF)


def test_a_fixed_axis_of_the_wrong_size_is_rejected():
    """ratio_of_sums: Float[Tensor, "*batch 2"] (sum, count); plain Python divides columns 0 and 1 of
    any width."""
    assert ratio_of_sums(torch.tensor([[3.0, 2.0], [1.0, 4.0]])).tolist() == [1.5, 0.25]
    error = expect_type_check_error(lambda: ratio_of_sums(torch.ones(4, 3)))
    assert "summed" in str(error)


def test_the_wrong_dtype_is_rejected():
    """masked_pair_bce: `same` is Bool[Tensor, "image n n"]; plain Python casts a float one silently."""
    logits = torch.randn(2, 3, 3)
    same = torch.rand(2, 3, 3) > 0.5
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    assert masked_pair_bce(logits, same, mask).shape == ()
    error = expect_type_check_error(lambda: masked_pair_bce(logits, same.float(), mask))
    assert "same" in str(error)


def test_an_axis_name_binds_one_size_across_arguments():
    """pair_logits(x: [image n d_model], y: [image m d_model]): one `image` and one `d_model` in x and y."""
    probe = make_probe("quadratic", 8)
    x = torch.randn(2, 5, 8)
    assert probe.pair_logits(x, torch.randn(2, 4, 8)).shape == (2, 5, 4)
    expect_type_check_error(lambda: probe.pair_logits(x, torch.randn(3, 4, 8)))
    expect_type_check_error(lambda: probe.pair_logits(x, torch.randn(2, 4, 7)))


def test_each_test_checks_the_first_calls_of_every_function_again():
    """The suite checks each function's first CHECKED_CALLS calls per test (tests/helpers/typecheck.py): past
    them a wrong call goes through, and the next test checks again."""
    from helpers.typecheck import CHECKED_CALLS, new_test

    if not CHECKED_CALLS:
        pytest.skip("BINDING_LENS_CHECK_EVERY_CALL=1: every call is checked")
    for _ in range(CHECKED_CALLS):
        ratio_of_sums(torch.ones(4, 2))
    assert ratio_of_sums(torch.ones(4, 3)).shape == (4,)  # unchecked now: plain Python divides columns 0 and 1
    new_test()  # what conftest does before each test
    expect_type_check_error(lambda: ratio_of_sums(torch.ones(4, 3)))
