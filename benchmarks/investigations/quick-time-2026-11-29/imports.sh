#!/usr/bin/env bash
# import torch and torch._dynamo in a new process, three times each way: the environment as it is (on the
# lent image: no bytecode beside torch, PYTHONDONTWRITEBYTECODE set), with PYTHONPYCACHEPREFIX alone at an
# empty cache, and with the prefix and writing on (what distbench.launch.pycache gives a run's processes).
# Run from the repository root, after device_setup.sh.
echo "# PYTHON* in the environment: $(env | grep '^PYTHON' | grep -v PYTHONPATH | sort | paste -sd' ')"
python3 -c "import torch, os; p = os.path.dirname(torch.__file__); print('torch/__pycache__ exists:', os.path.isdir(p + '/__pycache__'), '; torch/ writable:', os.access(p, os.W_OK))"
KEEP=${PYTHONDONTWRITEBYTECODE-unset}
for how in plain prefix prefix_write; do
  P=$(mktemp -d)
  for i in 1 2 3; do
    unset PYTHONPYCACHEPREFIX; [ "$KEEP" != unset ] && export PYTHONDONTWRITEBYTECODE=$KEEP
    [ $how != plain ] && export PYTHONPYCACHEPREFIX=$P
    [ $how = prefix_write ] && unset PYTHONDONTWRITEBYTECODE
    python3 -c "
import time; t = time.time(); import torch; a = time.time() - t; import torch._dynamo; b = time.time() - t
print(f'$how run $i: import torch {a:.2f} s, with torch._dynamo {b:.2f} s')"
  done
done
