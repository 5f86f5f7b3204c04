from distbench.pipeline.run_rules import run_family_job

# Every family's job rule (rules/families.smk): its manifest's job_entry, from the job's job.json.
run_family_job(snakemake)  # noqa: F821 - injected by Snakemake
