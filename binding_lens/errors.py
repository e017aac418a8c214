"""The expected errors: what a user can fix (a wrong argument, a missing file, an unsupported model).

Every error the library raises on purpose derives from `BindingLensError`; its message says what is
wrong and what to do, in one or two lines. The command line prints that message and exits 2 with no
traceback; any other exception is a bug and keeps its traceback. The subclasses also derive from the
built-in error a caller would catch (ValueError, FileNotFoundError, ...), so `except ValueError` works.

Two families a caller catches: `InputError` (a value that cannot work: an argument, a layer, a hook or probe
name, an image size, a scene, a checkpoint; its subclasses say which), and the environment's (`MissingFileError`,
`ModelUnavailableError`, `WriteError`, `FolderInUseError`, `DeviceUnavailableError`, `SettingsMismatchError`,
the store's `StoreError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class BindingLensError(Exception):
    """An expected error with a message that says what is wrong and how to fix it."""


class InputError(BindingLensError, ValueError):
    """A value that cannot be used: a count of 0, a size the patch grid does not divide, NaN pixels..."""


class GridSizeError(InputError):
    """An image size that a grid does not divide (the patch size, the grid synthetic scenes are drawn on).
    `size` (height, width), `multiple` and `grid` (what must divide it, in words: 'the patch size 16') let
    a caller such as the command line say it with its own flag (`restated`); `size` is None where the
    error is about something else (a subclass's channels, say)."""

    def __init__(
        self, message: str, size: tuple[int, int] | None = None, multiple: int | None = None, grid: str = ""
    ) -> None:
        super().__init__(message)
        self.size, self.multiple, self.grid = size, multiple, grid

    def restated(self, flag: str, chosen: str = "") -> str:
        """'--size 100 is not a multiple of the patch size 16; use --size 96 or 112'; for a size the
        command chose (`chosen`: why, e.g. "the model's native size"), the same naming it and `flag`."""
        assert self.size is not None and self.multiple is not None, "restated needs the size and the multiple"
        (height, width), multiple = self.size, self.multiple

        def near(side: int) -> list[int]:
            if side % multiple:
                below = max(multiple, side // multiple * multiple)
                return [below, below + multiple]
            return [side, side]

        shown = str(height) if height == width else f"{height}x{width}"
        options = dict.fromkeys(str(h) if height == width else f"{h}x{w}" for h, w in zip(near(height), near(width)))
        use = f"{flag} " + " or ".join(options)
        if chosen:
            return f"the image size {shown} ({chosen}) is not a multiple of {self.grid}; give {use}"
        return f"{flag} {shown} is not a multiple of {self.grid}; use {use}"


class KnobError(InputError):
    """A setting out of its range, named as the Python API names it (`knob`, `value`), with what is
    `allowed` in words, so a caller such as the command line can say it with its own flag (`restated`)."""

    def __init__(self, message: str, knob: str, value: Any, allowed: str) -> None:
        super().__init__(message)
        self.knob, self.value, self.allowed = knob, value, allowed

    def restated(self, flag: str) -> str:
        """'--split foo: synthetic scenes have the splits train, val and test (...)'."""
        return f"{flag} {self.value}: {self.allowed}"


class MissingFileError(BindingLensError, FileNotFoundError):
    """A file or directory that should exist does not (a run, a probe, a mask, an index)."""


class ModelUnavailableError(BindingLensError, OSError):
    """A model that cannot be loaded here: no network for a hub id, no such local checkpoint."""


class WriteError(BindingLensError, OSError):
    """A file or folder the operating system would not let us write (permission, a file in the way, a full
    disk): the message names the path and what to do."""


class FolderInUseError(BindingLensError, OSError):
    """An output folder another run is writing (its lock names that process); see `io.lock`."""


class DeviceUnavailableError(BindingLensError, RuntimeError):
    """A device that this machine does not have (`cuda` with no GPU, `cuda:3` with two)."""


class SettingsMismatchError(BindingLensError):
    """A directory holding work made with other settings than those asked for (a sweep run, a store).
    `stored` and `requested` are the two settings as recorded, so a caller such as the command line can
    restate the difference in its own terms (`restated`)."""

    def __init__(self, subject: str, differences: str, advice: str, stored: Any, requested: Any) -> None:
        super().__init__(f"{subject} with other settings ({differences}). {advice}")
        self.subject, self.advice, self.stored, self.requested = subject, advice, stored, requested

    def restated(self, differences: str) -> str:
        """The message with `differences` in place of the recorded fields that differ."""
        return f"{self.subject} with other settings ({differences}). {self.advice}"


def check_ints(values: Mapping[str, object], minimum: int = 1) -> None:
    """Raise `InputError` naming the first of `values` (name -> value) that is not an int >= `minimum` (bools
    refused): the one check of integer settings."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            wanted = "a positive integer" if minimum == 1 else f"an int >= {minimum}"
            raise InputError(f"{name} must be {wanted}, got {value!r}")


def check_positive_ints(values: Mapping[str, object]) -> None:
    """Raise `InputError` naming the first of `values` (name -> value) that is not an int >= 1 (bools refused)."""
    check_ints(values)


__all__ = [
    "BindingLensError",
    "DeviceUnavailableError",
    "FolderInUseError",
    "InputError",
    "MissingFileError",
    "ModelUnavailableError",
    "SettingsMismatchError",
    "WriteError",
]
