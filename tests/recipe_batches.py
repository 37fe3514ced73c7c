"""Run a recipe as a user does, recording the micro-batches it trains on, for tests/test_user_paths.py:
``python tests/recipe_batches.py OUT.npz N recipes/pretrain_code.py key=value ...``.

The recipe runs unchanged (codept.train.loop.main, one process, no launcher); only
codept.train.engine.train_step is wrapped to keep a copy of the first N optimizer steps' micro-batches
(every tensor column, as NumPy) before it trains on them. They are saved as ``OUT.npz`` with keys
``<step>/<micro>/<column>`` once the run ends (codept.train.engine.exit_process, wrapped too)."""

import runpy
import sys

import numpy as np

out, n_steps, script, *items = sys.argv[1:]
n_steps = int(n_steps)
saved: dict = {}

from codept.train import engine as E  # noqa: E402  (imported by the loop anyway)

_train_step = E.train_step


def recording_train_step(engine, micro_batches, *args, **kwargs):
    step = len({k.split("/")[0] for k in saved})
    if step < n_steps:
        for m, batch in enumerate(micro_batches):
            for col, value in batch.items():
                if hasattr(value, "numpy"):
                    saved[f"{step}/{m}/{col}"] = value.detach().cpu().numpy()
    return _train_step(engine, micro_batches, *args, **kwargs)


def save_and_exit(code: int = 0):
    np.savez(out, **saved)
    _exit_process(code)


_exit_process = E.exit_process
E.train_step, E.exit_process = recording_train_step, save_and_exit
sys.argv = [script, *items]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    save_and_exit(e.code or 0)
save_and_exit(0)
