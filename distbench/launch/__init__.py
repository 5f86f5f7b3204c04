"""Running torchrun jobs, for every family: `torchrun` (argument lists, environment, time limits,
signals, traces), `cluster` (srun/ssh/local launchers, SLURM resources), `planning` (what the families'
plans share), `placement`, `processes`, `ranks` (the worker side), `failure` (the failed/not_run rows),
`profiling`, `hang` and `fr_watch` (hang forensics), `batch` (shared launches), `timeline`, `progress`,
`hostlock` (one benchmark measurement at a time per host), `joblock` (the lock a job holds),
`invocation` and `dag_view` (a Snakemake run's id and the jobs it decided to run)."""
