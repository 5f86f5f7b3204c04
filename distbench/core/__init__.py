"""Torch-free, family-agnostic building blocks that every layer above may import (core names no family):
`manifest` (the FamilyManifest each family declares itself with), `ops_spec` (what each collective is,
its bus factor), `choices`, `units`, `sizes`, `io` (atomic writes), `provenance`, `contract` (the CSV
machinery), `tables` (job CSVs read against their contract), `readers` (the one reader of every cached
CSV/JSON: file, problem and fix), `intervals` (when each benchmark measurement of a run ran, and which
overlapped), `judged` (which rows a verdict judges), `figures`, `palette`, `run_label` and `section`
(the report's Section/ReportInputs/Headline API)."""
