"""Stage 2 of the pipeline: ahead-of-time compiles of every variant, in contained worker processes.

* :mod:`.job` — one variant (:class:`~tileprobe.compile.job.Variant`) compiled in a worker into a
  :class:`~tileprobe.compile.job.CompileResult` (cubin, signature, the compiler that made it);
* :mod:`.pool` — the worker pool: parallel compiles with per-variant timeouts and crash containment;
* :mod:`.failure` — what a failed compile was (compile error, compiler crash, probe error, broken environment) and
  its fix;
* :mod:`.claims` — compiles claimed across concurrent tileprobe processes, so none is done twice;
* :mod:`.toolcache` — per-process caches of compiler lookups.
"""
