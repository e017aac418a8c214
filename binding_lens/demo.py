"""Moved: the demo lives in `binding_lens.reports.demo` (the reports' one package)."""

raise ImportError("binding_lens.demo has moved to binding_lens.reports.demo: import run_demo from binding_lens.reports")
