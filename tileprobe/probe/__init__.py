"""Stage 1 of the pipeline: the user's probe file, loaded and run only in contained children.

* :mod:`.define` — the :class:`~tileprobe.probe.define.Probe` a probe file declares (kernel, cases × hints grid,
  ``args``) and how a file is loaded;
* :mod:`.signature` — the launch signature cuTile's JIT would build for those arguments, without a GPU;
* :mod:`.contained` — the loader children that import probe files (own session, parent-death signal, guarded
  exits) and report plans as data;
* :mod:`.wire` — what crosses back from a process that ran probe code: JSON data only, never pickles;
* :mod:`.zygote` — warm process starts: one process imports cuTile once and forks loaders and compile workers.
"""
