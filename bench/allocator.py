"""The memory allocator the benchmark process runs with (`--allocator`).

XLA:CPU allocates every output buffer afresh through `malloc`. glibc serves
blocks above 32 MiB with a fresh `mmap` and unmaps them on `free`, so each
call of a jitted function with a 64 MiB output faults in 16384 new 4 KiB
pages before it writes anything. The modes (see docs/cpu-performance.md):

* `system`: glibc's malloc as it is (any allocator preload or glibc
  hugetlb tunable in the environment is removed);
* `hugetlb`: glibc with `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` (transparent
  huge pages for its mmap'ed blocks: 512x fewer faults);
* `glibc-heap`: glibc kept to its heap, `GLIBC_HEAP` (one arena, no mmap'ed
  blocks, no trimming: a freed block's pages stay mapped and are reused,
  as with jemalloc, and nothing to install);
* `jemalloc`: `LD_PRELOAD` of libjemalloc, MALLOC_CONF set to
  `JEMALLOC_CONF` unless set already (freed pages are kept mapped and
  reused, blocks of 8 MiB and more too: docs/cpu-performance.md);
* `tcmalloc`: `LD_PRELOAD` of gperftools' libtcmalloc_minimal.

The loader and glibc read these variables at process start only, so
`restart_env` gives the environment to re-execute the benchmark with, or
None when the process already runs in the requested mode. With a preload,
`TBB_ENABLE_SANITIZERS=1` is set too: OpenVINO's TBB otherwise opens its
topology library (hwloc) with `RTLD_DEEPBIND`, which binds hwloc's `malloc`
and `free` to glibc's while the rest of the process uses the preloaded
allocator, and OpenVINO aborts ("free(): invalid pointer") the first time
hwloc frees a block that another library allocated. That variable keeps TBB
from deep-binding (it exists for sanitizers, which interpose `malloc` the
same way).
"""

from __future__ import annotations

import glob
import os
import subprocess

MODES = ("system", "hugetlb", "glibc-heap", "jemalloc", "tcmalloc")
MARKER = "BENCH_ALLOCATOR"
HUGETLB = "glibc.malloc.hugetlb=1"
# All three are needed: a thread's own arena grows by mmap'ed heaps of at
# most 64 MiB, which it shrinks with madvise; the main arena, with mmap off,
# serves every block from its heap, which it would trim on free.
GLIBC_HEAP = {
  "MALLOC_ARENA_MAX": "1",
  "MALLOC_MMAP_MAX_": "0",
  "MALLOC_TRIM_THRESHOLD_": str(2**36),
}
JEMALLOC_CONF = (
  "retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1,oversize_threshold:0"
)

_LIBRARIES = {
  "jemalloc": (
    ("libjemalloc.so.2", "libjemalloc.so"),
    "Debian/Ubuntu: apt-get install libjemalloc2; Fedora: dnf "
    "install jemalloc; conda: conda install jemalloc",
  ),
  "tcmalloc": (
    (
      "libtcmalloc_minimal.so.4",
      "libtcmalloc.so.4",
      "libtcmalloc_minimal.so",
      "libtcmalloc.so",
    ),
    "Debian/Ubuntu: apt-get install libtcmalloc-minimal4; "
    "Fedora: dnf install gperftools-libs; conda: conda install "
    "gperftools",
  ),
}
_SEARCH_DIRS = (
  "/usr/lib/x86_64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
  "/usr/lib64",
  "/usr/lib",
  "/usr/local/lib",
  "/lib64",
  "/lib",
)


def _ld_cache() -> dict[str, str]:
  """soname -> path from the dynamic loader's cache (`ldconfig -p`)."""
  for ldconfig in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
    try:
      text = subprocess.run(
        [ldconfig, "-p"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
      ).stdout
    except (OSError, subprocess.SubprocessError):
      continue
    cache = {}
    for line in text.splitlines():
      if "=>" in line:
        name, path = line.split("=>", 1)
        cache.setdefault(name.split()[0], path.strip())
    return cache
  return {}


def find_library(mode: str) -> str:
  """Path of the allocator library for `mode`; SystemExit if there is none.

  `BENCH_JEMALLOC` / `BENCH_TCMALLOC` name the file explicitly.
  """
  sonames, install = _LIBRARIES[mode]
  explicit = os.environ.get(f"BENCH_{mode.upper()}")
  if explicit:
    if os.path.isfile(explicit):
      return explicit
    raise SystemExit(
      f"--allocator {mode}: BENCH_{mode.upper()}={explicit} is not a file"
    )
  cache = _ld_cache()
  for soname in sonames:
    if soname in cache and os.path.isfile(cache[soname]):
      return cache[soname]
    for directory in _SEARCH_DIRS:
      hits = sorted(glob.glob(os.path.join(directory, soname)))
      if hits:
        return hits[0]
  raise SystemExit(
    f"--allocator {mode}: none of {', '.join(sonames)} was found (searched "
    f"the ld.so cache and {', '.join(_SEARCH_DIRS)}). Install it ({install})"
    f" or set BENCH_{mode.upper()}=/path/to/the/library.so. The modes that "
    "need no library: system, hugetlb."
  )


def _is_allocator(path: str) -> bool:
  name = os.path.basename(path)
  return "jemalloc" in name or "tcmalloc" in name


def restart_env(mode: str, environ: dict[str, str]) -> dict[str, str] | None:
  """The environment to re-execute with for `mode`, None if already in it."""
  if mode not in MODES:
    raise SystemExit(f"--allocator {mode!r}: choose from {', '.join(MODES)}")
  if environ.get(MARKER) == mode:
    return None
  env = dict(environ)
  preload = [
    p
    for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
    if not _is_allocator(p)
  ]
  tunables = [
    t for t in env.get("GLIBC_TUNABLES", "").split(":") if t and t != HUGETLB
  ]
  if mode == "hugetlb":
    tunables.append(HUGETLB)
  for name in GLIBC_HEAP:
    env.pop(name, None)
  if mode == "glibc-heap":
    env.update(GLIBC_HEAP)
  if mode in _LIBRARIES:
    preload.insert(0, find_library(mode))
    env["TBB_ENABLE_SANITIZERS"] = "1"
    if mode == "jemalloc":
      env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
  for name, values, sep in (
    ("LD_PRELOAD", preload, " "),
    ("GLIBC_TUNABLES", tunables, ":"),
  ):
    if values:
      env[name] = sep.join(values)
    else:
      env.pop(name, None)
  if mode == "system" and env == {
    k: v for k, v in environ.items() if k != MARKER
  }:
    return None  # nothing to change: no restart needed
  env[MARKER] = mode
  return env


def loaded() -> list[str]:
  """Allocator libraries mapped into this process (Linux /proc/self/maps)."""
  try:
    with open("/proc/self/maps") as f:
      paths = {line.split()[-1] for line in f if "/" in line}
  except OSError:
    return []
  return sorted(p for p in paths if _is_allocator(p))


def describe(mode: str) -> dict[str, object]:
  """What the JSON records about the allocator of this process."""
  libraries = loaded()
  if mode in _LIBRARIES and not any(
    mode in os.path.basename(p) for p in libraries
  ):
    raise SystemExit(
      f"--allocator {mode}: the library is not loaded in this "
      f"process (LD_PRELOAD={os.environ.get('LD_PRELOAD')!r})"
    )
  return {
    "mode": mode,
    "loaded": libraries,
    "LD_PRELOAD": os.environ.get("LD_PRELOAD"),
    "MALLOC_CONF": os.environ.get("MALLOC_CONF"),
    "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES"),
    **{name: os.environ.get(name) for name in GLIBC_HEAP},
    "TBB_ENABLE_SANITIZERS": os.environ.get("TBB_ENABLE_SANITIZERS"),
  }
