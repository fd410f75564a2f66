"""``tileprobe reduce``: from a real kernel to the smallest one that keeps a compiler property (a bug report).

Stages, each a module: :mod:`.prop` (what is kept), :mod:`.source` (the probe's parts, sizes), :mod:`.fold`,
:mod:`.inline`, :mod:`.clean` (transformations that keep the variant's meaning), :mod:`.passes` (the candidates a
round tries), :mod:`.oracle` (batches of candidates audited in the contained compile pool), :mod:`.engine` (the
rounds, the budget, the journal, "what matters"), :mod:`.output` and :mod:`.report` (the files written).
"""
