"""Moved: the claims report lives in `binding_lens.reports.claims` (the reports' one package)."""

raise ImportError(
    "binding_lens.claims has moved to binding_lens.reports.claims: import claims_report and ClaimsReport from "
    "binding_lens.reports"
)
