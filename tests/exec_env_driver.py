"""Run by tests/test_exec_venv.py with ANOTHER environment's interpreter (a venv, a virtualenv, a uv
venv, a standalone conda-style prefix), PYTHONPATH = this repo: the sandbox as a user of that
environment gets it. Prints one JSON object:
  host       tracer.interpreter_info() here (version, prefix, site-packages)
  unavailable  the preflight's refusal, when it refused (nothing else then)
  hello      [status, stdout] of a benign program
  trace      the tracer's units for the doctests of the package named in argv[1], installed only in
             this environment's site-packages (``pkg:`` item: imported by name inside the sandbox)
  write_site [status, stdout] of a program writing into that site-packages folder
  script     [status, stdout, stderr] of `codept exec run`'s path (sandbox.run_script) on a file that
             imports that package: the environment's packages import, __file__ names the file
  hostile    run_case rows of the hostile cases named in argv[2:] (codept.exec.hostile)
Imports only codept.exec (stdlib only), so a bare venv without the project's dependencies runs it.
"""

import json
import sys
import tempfile
from pathlib import Path

from codept.exec import hostile, inputs, sandbox, tracer


def main() -> None:
    out = {"host": tracer.interpreter_info()}
    try:
        sandbox.check_sandbox()
    except sandbox.SandboxUnavailable as e:
        print(json.dumps({**out, "unavailable": str(e)}))
        return
    r = sandbox.run_python(["-c", "import sys; print('hello from', sys.version_info[:2])"])
    out["hello"] = [r.status, r.stdout]
    item = inputs.package_items(sys.argv[1])[0]
    r = sandbox.run_python(["-c", sandbox.TRACER.read_text()], sandbox.Limits(timeout=20), json.dumps(item.task).encode())
    out["trace"] = [json.loads(line) for line in r.side.decode().splitlines()]
    site = Path(__import__(sys.argv[1]).__file__).parents[1]  # <site>/<package>/__init__.py
    code = f"try:\n    open({str(site / 'pwned.py')!r}, 'w')\n    print('ESCAPED')\nexcept OSError as e:\n    print('CONTAINED', e)\n"
    r = sandbox.run_python(["-c", code])
    out["write_site"] = [r.status, r.stdout]
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "probe_script.py"
        f.write_text(f"import sys, {sys.argv[1]} as m\nprint(__file__, sys.argv[0], m.double(21))\n")
        r = sandbox.run_script(f)
    out["script"] = [r.status, r.stdout, r.stderr[-500:]]
    names = set(sys.argv[2:])
    with tempfile.TemporaryDirectory() as d:
        out["hostile"] = [hostile.run_case(c, Path(d)) for c in hostile.CASES if c.name in names]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
