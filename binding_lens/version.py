"""The installed package version, recorded in manifests and model cards (no other binding_lens import)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("binding_lens")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
