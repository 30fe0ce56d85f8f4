"""Running a script once per test session, in a subprocess, under xdist.

Some tests need a fresh Python process (8 forced CPU devices must be set up
before JAX is imported; examples must not inherit this suite's x64 mode), and
the process is slow enough that it should run once per session, not once per
pytest-xdist worker. `produce_once` lets the first worker that needs a result
file write it while the others wait for it.
"""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def subprocess_env(**overrides: str) -> dict[str, str]:
  """This process's environment with the repository root on PYTHONPATH."""
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
    [str(REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
  )
  env.update(overrides)
  return env


def shared_dir(tmp_path_factory, worker_id: str, name: str) -> pathlib.Path:
  """A folder every xdist worker of this session sees (a fresh one without)."""
  if worker_id == "master":
    return tmp_path_factory.mktemp(name)
  return tmp_path_factory.getbasetemp().parent  # one per xdist session


def produce_once(
  directory: pathlib.Path,
  filename: str,
  write: Callable[[pathlib.Path], None],
  timeout_s: float,
) -> pathlib.Path:
  """Returns `directory / filename`, written by `write` in one worker only.

  The first caller takes a lock file and calls `write(partial_path)`; the
  file is then renamed into place, so readers never see half of it. Other
  callers wait (up to `timeout_s` + 60 s) for it to appear.
  """
  path = directory / filename
  try:
    os.close(
      os.open(
        directory / f"{filename}.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY
      )
    )
  except FileExistsError:  # another worker writes it: wait for it
    deadline = time.monotonic() + timeout_s + 60
    while not path.exists():
      if time.monotonic() > deadline:
        raise TimeoutError(f"no {path} from the other xdist worker") from None
      time.sleep(0.5)
  else:
    partial = path.with_suffix(".partial")
    write(partial)
    partial.rename(path)
  return path
