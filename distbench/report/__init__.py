"""The report: `render` loops over the registered sections (`sections`: the report's own, with the
families' sections from their manifests in their places), the sections that are not a family's
(`overview`, `appendix`, `publish`, `hangs`), the Verdict's ordering (`verdict`), runs side by side
(`runs`), regressions against a baseline (`regressions`), summary.json (`summary_json`) and the quick
answer's report (`quick`). Each assembles what the registered sections declare, so report/ names no
family."""
