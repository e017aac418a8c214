"""Scene lists that fail on purpose."""

from __future__ import annotations

from binding_lens.data import SceneError


class FailsAt(list):
    """Scenes whose `bad`-th image raises, as a corrupt file or a wrong mask would."""

    identity = {"name": "fails"}

    def __init__(self, scenes, bad):
        super().__init__(scenes)
        self.bad = bad

    def __getitem__(self, index):
        if index == self.bad:
            raise SceneError(f"image {index} is broken")
        return super().__getitem__(index)
