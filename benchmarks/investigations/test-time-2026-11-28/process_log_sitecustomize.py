"""Process accounting for one test run (not part of the product or the suite): put this file's folder
on PYTHONPATH as `sitecustomize.py` and every Python process the run starts appends one line at its
exit, os._exit included (the ranks leave that way): pid, parent pid, its own CPU-s (user + system),
its wall-s, whether it imported torch / pandas / matplotlib / snakemake, the test that started it
(PYTEST_CURRENT_TEST, inherited), its interpreter and argv. Processes killed by a signal, and
non-Python ones (slurmd, sshd, chromium), are not counted."""
import atexit
import os
import resource
import sys
import time

_T0 = time.monotonic()
_LOG = os.environ.get("DISTBENCH_PROCESS_LOG", "/tmp/process_log.tsv")


def _rec():
    try:
        r = resource.getrusage(resource.RUSAGE_SELF)
        test = os.environ.get("PYTEST_CURRENT_TEST", "-").split(" ")[0]
        argv = " ".join(sys.argv[:4])[:200].replace("\t", " ").replace("\n", " ")
        mods = [str(m in sys.modules) for m in ("torch", "pandas", "matplotlib", "snakemake")]
        with open(_LOG, "a") as f:
            f.write("\t".join([str(os.getpid()), str(os.getppid()), f"{r.ru_utime + r.ru_stime:.2f}",
                               f"{time.monotonic() - _T0:.2f}", *mods, test, sys.executable, argv]) + "\n")
    except Exception:
        pass


atexit.register(_rec)
_orig_exit = os._exit


def _exit(code):
    _rec()
    _orig_exit(code)


os._exit = _exit
