"""What torch.profiler traces show: the overlap of communication and compute (`overlap`, HTA's
definition), the profiled steps' windows (`steps`), the per-step GPU timeline of a job's traced real
and compute-only steps (`split`: the figures the training family's four-part step split is made of;
`split_step`: the step that writes them as a table, a row per job, for a family to read by name), and
the report section on them. Reads traces and tables only; imports no family."""
