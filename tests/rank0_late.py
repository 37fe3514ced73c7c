"""Run a recipe script with rank 0 started late, for tests/test_recipe.py: the order in which a
launcher sees another rank exit first, which used to get rank 0 killed before it had printed its
one error message. ``deepspeed ... tests/rank0_late.py recipes/pretrain_code.py key=value ...``;
RANK0_LATE_S seconds (default 5)."""

import os
import runpy
import sys
import time

if os.environ.get("RANK", "0") == "0":
    time.sleep(float(os.environ.get("RANK0_LATE_S", "5")))
args = sys.argv[1:]
script = next(a for a in args if a.endswith(".py"))
args.remove(script)
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
