"""A package that reaches cuda.tile.tune the way the coming upstream ``cuda.tile.tune.autotune`` decorator does
(tests/test_use_autotune.py): its module :mod:`autotune_pkg.autotune` binds ``exhaustive_search`` by name at import
and calls it with keyword arguments (``flush_l2``, ``single_run_timeout_sec``, and ``benchmark_fn``-style extras);
:mod:`autotune_pkg.ops` decorates kernels with it."""
