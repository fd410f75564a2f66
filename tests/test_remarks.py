"""tileiras YAML remarks (a real 13.4.92 file, W4A16 on sm_120, trimmed) parsed and de-duplicated."""
import os

from tileprobe.model.remarks import parse_remarks

DATA = os.path.join(os.path.dirname(__file__), "data", "remarks_w4a16_sm120.yaml")


def test_repeated_documents_and_reasons_are_folded():
    text = open(DATA).read()
    assert text.count("--- !") == 3 and text.count("leading tile dimension not 16-byte aligned") > 3
    remarks = parse_remarks(text)
    assert sorted(r["name"] for r in remarks) == ["RemarkMemoryStoreInstructionSelected", "RemarkMemoryTmaLoadFailed"]
    tma = next(r for r in remarks if r["name"] == "RemarkMemoryTmaLoadFailed")
    assert tma["kind"] == "Failure" and tma["line"] == 35 and tma["message"] == "Failed to select TMA load instruction"
    assert tma["details"] == ['Reason: loc("/work/main/examples/w4a16_gemm.py":35:16): '
                              'leading tile dimension not 16-byte aligned']


def test_unparseable_text_is_reported_not_raised():
    [r] = parse_remarks("--- !Passed\nPass: [unclosed\n")
    assert r["kind"] == "unparsed" and r["message"].startswith("could not parse remarks")
