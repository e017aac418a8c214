"""The expected errors: what a user can fix (a wrong argument, a missing file, an unsupported model).

Every error the library raises on purpose derives from `BindingLensError`; its message says what is
wrong and what to do, in one or two lines. The command line prints that message and exits 2 with no
traceback; any other exception is a bug and keeps its traceback. The subclasses also derive from the
built-in error a caller would catch (ValueError, FileNotFoundError, ...), so `except ValueError` works.
"""

from __future__ import annotations

from typing import Any


class BindingLensError(Exception):
    """An expected error with a message that says what is wrong and how to fix it."""


class InputError(BindingLensError, ValueError):
    """A value that cannot be used: a count of 0, a size the patch grid does not divide, NaN pixels..."""


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


def check_positive_ints(values: dict[str, Any]) -> None:
    """Raise `InputError` naming the first of `values` (name -> value) that is not an int >= 1 (bools refused)."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")


__all__ = [
    "BindingLensError",
    "check_positive_ints",
    "DeviceUnavailableError",
    "FolderInUseError",
    "InputError",
    "MissingFileError",
    "ModelUnavailableError",
    "SettingsMismatchError",
    "WriteError",
]
