"""Reports: the runs that answer the paper's questions end to end, each writing its tables and figures.

    run_demo("runs/demo")                                                 # binding-lens demo
    binding_by_objective(["zoo:dino", "zoo:mae", "zoo:random"], "runs/zoo-compare")   # binding-lens zoo compare
    claims_report(["zoo:dino", "zoo:mae", "zoo:random"], "runs/claims")  # binding-lens claims

`demo/` (the zoo's strongest binder beside its random-init twin, and one live intervention on it; its
defaults in `demo_config.py`), `zoo_compare.py` (does binding depend on the training objective?) and
`claims.py` (every claim of the paper with its interval and verdict) sit above everything they combine:
the analyses and the zoo.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .claim_report import ClaimsReport
    from .claims import claims_report
    from .demo.run import run_demo
    from .zoo_compare import ObjectiveTable, binding_by_objective

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ClaimsReport": ".claim_report",
        "claims_report": ".claims",
        "run_demo": ".demo.run",
        **dict.fromkeys(["ObjectiveTable", "binding_by_objective"], ".zoo_compare"),
    },
)

__all__ = ["ClaimsReport", "ObjectiveTable", "binding_by_objective", "claims_report", "run_demo"]
