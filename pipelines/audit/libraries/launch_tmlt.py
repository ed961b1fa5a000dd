"""Starts with_tmlt.py under tmlt.core's own interpreter, `$TMLT_CORE_PYTHON`.

(Not named tmlt.py: the program's folder leads sys.path, and `import tmlt` would find it.)

tmlt.core 0.20 needs numpy < 2 on Python 3.11, so it lives in an environment of its own
(target/pyenv-tmlt, made by `make pyenv-libraries`); the stage names it through the variable the
Makefile sets and the stage passes on (`pass_env`). exec keeps the process, its standard streams
and the worker's answer descriptor: dplab sees one program.
"""

import os
import sys

python = os.environ.get("TMLT_CORE_PYTHON")
if not python:
    sys.exit(
        "TMLT_CORE_PYTHON is not set: it names the interpreter of tmlt.core's environment "
        "(make pyenv-libraries makes target/pyenv-tmlt; the Makefile sets the variable)"
    )
program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "with_tmlt.py")
os.execv(python, [python, program, *sys.argv[1:]])
