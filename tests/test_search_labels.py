"""A recorded search's configurations are named by the program's own values (``TILE=128 occupancy=1``), not by
the probe's ``C0 … Cn``; names that would read alike fall back to ``C<i> …`` so that they stay distinct."""
from __future__ import annotations

from tileprobe.record.model import KernelRef, RecordedSearch
from tileprobe.record.searches import program_label, program_labels
from tileprobe.record.tabledoc import RecordedConfigDoc


def test_a_configuration_reads_as_the_program_wrote_it():
    assert program_label({"TILE": 128, "occupancy": 1}, {"occupancy": 1}) == "TILE=128 occupancy=1"
    assert program_label({"TILE_MN": [128, 64]}, {"occupancy": 2, "num_ctas": None}) == "TILE_MN=128×64 occupancy=2"
    assert program_label([128, 64], {}) == "128×64"
    assert program_label({"cfg": {"a": 1}}, {}) == 'cfg={"a":1}'


def _search(configs):
    return RecordedSearch(key="0" * 16, kernel=KernelRef(name="k"), configs=configs)


def test_labels_that_read_alike_fall_back_to_their_position():
    distinct = _search([RecordedConfigDoc(config={"TILE": t}, hints={"occupancy": 1}) for t in (64, 128)])
    assert program_labels(distinct) == ["TILE=64 occupancy=1", "TILE=128 occupancy=1"]
    alike = _search([RecordedConfigDoc(config="<object at 0x1>", hints={}),
                     RecordedConfigDoc(config="<object at 0x1>", hints={})])
    assert program_labels(alike) == ["C0 <object at 0x1>", "C1 <object at 0x1>"]
