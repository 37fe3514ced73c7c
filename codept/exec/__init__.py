"""Execution semantics: run untrusted corpus code in an OS sandbox and record traces (offline only).

  sandbox.py  bubblewrap runner: namespaces, non-root uid, rlimits, sized tmpfs, hard kill, capped output
  tracer.py   the stdlib-only script that runs INSIDE the sandbox (sys.settrace -> JSON lines on a side fd)
  inputs.py   what to run: doctests of modules (stdlib or files), HumanEval problems, mutations
  job.py      ``codept trace``: sharded, resumable, parallel, determinism-checked labelling job
  views.py    trace rows -> token-level views for the exec_* objectives (no code runs there)
  hostile.py  the hostile suite (escape / exhaustion snippets and what counts as contained)
  commands.py the ``codept exec run`` and ``codept trace`` subcommands
Training never imports sandbox/tracer/job: labels come from the job's output folder.
"""
