"""A JSON number in a text field is read as its text, as the same value in a CSV cell is (issue 14, item 8)."""

from pathlib import Path

from assay.formats import open_dataset
from assay.formats.normalize import NUMBERS_AS_TEXT

FIX = Path(__file__).parent.parent / "fixtures"


def test_json_numbers_in_text_fields_read_as_text():
    rows = list(open_dataset(FIX / "math_numbers.jsonl"))
    assert [(r.id, r.response, r.ground_truth) for r in rows] == [
        ("m1", "42", "42"), ("m2", "2.5", "2.5"), ("m3", "4", "4")]
    assert rows[0].extra[NUMBERS_AS_TEXT] == ["response"]
    assert rows[1].extra[NUMBERS_AS_TEXT] == ["ground_truth"]
    assert NUMBERS_AS_TEXT not in rows[2].extra


def test_json_numbers_match_the_csv_reading(tmp_path):
    csv = tmp_path / "math.csv"
    csv.write_text("id,query,response,ground_truth\nm1,What is 6 times 7?,42,42\n")
    from_csv = next(iter(open_dataset(csv)))
    from_json = next(iter(open_dataset(FIX / "math_numbers.jsonl")))
    assert (from_csv.response, from_csv.ground_truth) == (from_json.response, from_json.ground_truth)


def test_databricks_names_with_numbers():
    rows = list(open_dataset(FIX / "math_numbers_databricks.json"))
    assert [(r.id, r.query, r.response, r.ground_truth) for r in rows] == [
        ("d1", "What is 12 squared?", "144", "144"), ("d2", "17", "seventeen", "17")]
    assert rows[0].extra[NUMBERS_AS_TEXT] == ["response", "expected_response"]
    assert rows[1].extra[NUMBERS_AS_TEXT] == ["request"]
