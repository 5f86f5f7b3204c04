# Sourced by the run scripts, from the repository root: Snakemake (and the SLURM plugin) from the
# wheelhouse .whl/ where there is one (the lent machine's image has none: fill .whl/ here with
# ../shared/tools/device-wheelhouse.sh and carry it), else the environment's own packages (a GPU host
# of your own). Either way the checkout's distbench comes first on PYTHONPATH. The wheels are compiled to
# bytecode at install, as pip does by default (a user's own install of Snakemake starts from bytecode).
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || exit 1
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
