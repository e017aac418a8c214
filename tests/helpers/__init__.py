"""What several test files share, by topic (`tests/` is on sys.path through pyproject's `pythonpath`):

- `helpers.models`: tiny hooked models beside their plain HF twins, pixels, HF reference runs.
- `helpers.probes`: probes with randomized weights and planted binding data.
- `helpers.ade20k`: the official ADE20K encoding, for crafted release trees.
- `helpers.scenes`: scene lists that fail on purpose.
- `helpers.processes`: torchrun launches on this CPU machine.
- `helpers.docs`: the README and docs pages as the tests read them (code blocks, inline commands, markers).
- `helpers.typecheck`: the runtime type checker pyproject's pytest `addopts` gives jaxtyping's import hook.

Fixtures stay in `tests/conftest.py`; test files never import each other.
"""

from . import typecheck  # noqa: F401  (the hook names `helpers.typecheck.first_calls` after `import helpers`)
