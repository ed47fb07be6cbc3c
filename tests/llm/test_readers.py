"""read_option_logprobs and read_top_logprobs on hand-written records: every
rule (sentinel, absent options, aliases, matching, positions, multi-token
options, the legacy shape, the errors) with its numbers computed by hand."""

import copy
import json
from math import log

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skcal.llm import read_option_logprobs, read_top_logprobs


def chat(*positions):
    """A chat-completion record; a position is (generated token, its
    probability, [(token, probability or the -9999 sentinel), ...])."""
    content = [
        {
            "token": token,
            "logprob": log(p),
            "bytes": list(token.encode()),
            "top_logprobs": [
                {"token": t, "logprob": q if q == -9999.0 else log(q), "bytes": []}
                for t, q in top
            ],
        }
        for token, p, top in positions
    ]
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "logprobs": {"content": content}}],
    }


def one(top, generated=None):
    """A record of one generated position whose top-k is ``top``."""
    first = generated or top[0][0]
    p = dict(top).get(first, 0.5)
    return chat((first, p if p > 0 else 0.5, top))


# ------------------------------------------------------------ the sentinel
def test_the_sentinel_is_never_a_probability():
    records = [one([("A", 0.6), ("B", 0.3), ("C", -9999.0)]), one([("C", 1.0)])]
    floor = read_option_logprobs(records, ["A", "B", "C"], absent="floor")
    # C is absent: the floor is the smallest *reported* value, log 0.3
    assert_allclose(floor.logprobs[0], [log(0.6), log(0.3), log(0.3)])
    assert_array_equal(floor.absent[0], [False, False, True])
    # the leftover is 1 - 0.6 - 0.3 = 0.1 (the sentinel holds no mass)
    assert_allclose(floor.rest_logmass[0], log(0.1))
    share = read_option_logprobs(records, ["A", "B", "C"], absent="share")
    assert_allclose(share.logprobs[0, 2], log(0.1))  # 0.1 / 1 absent option


# ------------------------------------------------------------ absent rules
ROWS = [
    one([("A", 0.5), ("B", 0.2), ("X", 0.05)]),  # leftover 0.25
    one([("A", 0.6), ("B", 0.3), ("X", 0.08)]),  # leftover 0.02
    one([("C", 0.5), ("D", 0.4)]),  # C and D seen somewhere
]


def test_absent_floor():
    read = read_option_logprobs(ROWS, ["A", "B", "C", "D"], absent="floor")
    assert_allclose(read.logprobs[0], [log(0.5), log(0.2), log(0.05), log(0.05)])
    assert_allclose(read.logprobs[1], [log(0.6), log(0.3), log(0.08), log(0.08)])
    assert_allclose(read.logprobs[2], [log(0.4), log(0.4), log(0.5), log(0.4)])
    assert_array_equal(read.absent[0], [False, False, True, True])


def test_absent_share():
    read = read_option_logprobs(ROWS, ["A", "B", "C", "D"], absent="share")
    # row 0: 0.25 / 2 = 0.125 is above the floor 0.05: capped at the floor
    assert_allclose(read.logprobs[0, 2:], [log(0.05), log(0.05)])
    # row 1: 0.02 / 2 = 0.01, below the floor 0.08
    assert_allclose(read.logprobs[1, 2:], [log(0.01), log(0.01)])
    # row 2: leftover 0.1 shared by A and B: 0.05 each (floor 0.4)
    assert_allclose(read.logprobs[2, :2], [log(0.05), log(0.05)])
    assert_allclose(read.rest_logmass, [log(0.25), log(0.02), log(0.1)])


def test_share_of_no_leftover_is_clipped_at_min_logprob():
    rows = [one([("A", 0.75), ("X", 0.25)]), one([("B", 1.0)])]
    read = read_option_logprobs(rows, ["A", "B"], min_logprob=-50.0)
    assert_allclose(read.logprobs, [[log(0.75), -50.0], [-50.0, 0.0]])
    assert read.rest_logmass[0] == -np.inf


# ---------------------------------------------------- aliases and matching
def test_aliases_sum_their_probabilities():
    record = one(
        [("Yes", 0.5), (" yes", 0.1), ("Y", 0.05), ("True", 0.05), ("No", 0.2)]
    )
    read = read_option_logprobs([record], ["Yes", "No"], aliases={"Yes": ["Y", "True"]})
    assert_allclose(read.logprobs, [[log(0.7), log(0.2)]])


def test_case_space_and_marker_variants_are_one_option():
    record = one([("ĠA", 0.3), ("▁a", 0.2), ("A", 0.1), ("BĊ", 0.25), ("b", 0.05)])
    read = read_option_logprobs([record], ["A", "B"])
    assert_allclose(read.logprobs, [[log(0.6), log(0.3)]])
    exact = read_option_logprobs([record], ["A", "▁a", "b"], match="exact")
    assert_allclose(exact.logprobs, [[log(0.1), log(0.2), log(0.05)]])


def test_a_form_of_two_options_is_refused():
    with pytest.raises(ValueError, match="a form of two options"):
        read_option_logprobs([one([("A", 1.0)])], ["A", " a"])
    with pytest.raises(ValueError, match="start with the same token 'par'"):
        read_option_logprobs([one([("A", 1.0)])], [("Par", "is"), ("Par", "ma")])


# --------------------------------------------------------------- positions
RECORD = chat(
    ("The", 0.9, [("The", 0.9), ("A", 0.05)]),
    (" answer", 0.8, [(" answer", 0.8), (":", 0.1)]),
    (" B", 0.7, [(" B", 0.7), (" A", 0.2)]),
)


def test_position_first_reads_the_first_content_token():
    records = [RECORD, one([("B", 0.5)])]
    read = read_option_logprobs(records, ["A", "B"], absent="floor")
    assert_allclose(read.logprobs[0], [log(0.05), log(0.05)])
    assert_array_equal(read.absent[0], [False, True])
    assert_array_equal(read.positions, [0, 0])


@pytest.mark.parametrize("position", ["first_match", 2])
def test_position_first_match_reads_the_first_generated_option(position):
    read = read_option_logprobs([RECORD], ["A", "B"], position=position)
    assert_allclose(read.logprobs, [[log(0.2), log(0.7)]])
    assert_array_equal(read.positions, [2])


def test_first_match_falls_back_to_the_first_top_k_listing_an_option():
    record = chat(
        ("The", 0.9, [("The", 0.9)]),
        (" end", 0.6, [(" end", 0.6), (" B", 0.3)]),
        (".", 0.9, [(".", 0.9), ("A", 0.01)]),
    )
    read = read_option_logprobs(
        [record, RECORD], ["A", "B"], position="first_match", absent="floor"
    )
    assert_array_equal(read.positions, [1, 2])
    assert_allclose(read.logprobs[0], [log(0.3), log(0.3)])


# ------------------------------------------------------ multi-token options
PARIS = chat(
    ("Par", 0.6, [("Par", 0.6), ("Lon", 0.3)]),
    ("is", 0.9, [("is", 0.9), ("ade", 0.05)]),
)
OPTIONS = [("Par", "is"), ("Lon", "don")]


def test_multi_token_sum():
    read = read_option_logprobs([PARIS], OPTIONS, multi_token="sum")
    # Paris: 0.6 * 0.9; London: its second token is not read (the model
    # generated "Par"), so its first token's 0.3 stands for it
    assert_allclose(read.logprobs, [[log(0.54), log(0.3)]])
    assert_array_equal(read.unobserved, [[False, True]])


def test_multi_token_mean_and_first():
    mean = read_option_logprobs([PARIS], OPTIONS, multi_token="mean")
    assert_allclose(mean.logprobs, [[(log(0.6) + log(0.9)) / 2, log(0.3)]])
    first = read_option_logprobs([PARIS], OPTIONS, multi_token="first")
    assert_allclose(first.logprobs, [[log(0.6), log(0.3)]])


def test_a_later_token_is_read_from_the_top_k_where_the_path_diverges():
    record = chat(
        ("New", 0.8, [("New", 0.8), ("Los", 0.1)]),
        (" Yor", 0.9, [(" Yor", 0.9)]),
        ("kshire", 0.6, [("kshire", 0.6), ("k", 0.3)]),
    )
    read = read_option_logprobs(
        [record], [("New", " Yor", "k"), ("Los", " Angeles")], absent="floor"
    )
    # P(New York) = 0.8 * 0.9 * 0.3: "k" is listed after the generated "New Yor"
    assert_allclose(read.logprobs, [[log(0.8 * 0.9 * 0.3), log(0.1)]])
    assert_array_equal(read.unobserved, [[False, True]])


# ------------------------------------------------------------ legacy shape
def test_legacy_completion_shape():
    record = {
        "object": "text_completion",
        "choices": [
            {
                "text": " B",
                "logprobs": {
                    "tokens": [" B"],
                    "token_logprobs": [log(0.7)],
                    "top_logprobs": [{" B": log(0.7), "A": log(0.2), "C": -9999.0}],
                },
            }
        ],
    }
    also = one([("C", 1.0)])
    read = read_option_logprobs([record, also], ["A", "B", "C"], absent="floor")
    assert_allclose(read.logprobs[0], [log(0.2), log(0.7), log(0.2)])
    assert_allclose(read.rest_logmass[0], log(0.1))


# ------------------------------------------------------------------ inputs
def test_json_text_jsonl_file_json_file_and_wrappers(tmp_path):
    records = [RECORD, one([("A", 0.4), ("B", 0.4)])]
    expected = read_option_logprobs(records, ["A", "B"], position="first")
    jsonl = tmp_path / "records.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    listing = tmp_path / "records.json"
    listing.write_text(json.dumps(records, indent=2))
    batch = [{"custom_id": "1", "response": {"body": r}} for r in records]
    choices = [r["choices"][0] for r in records]
    for source in (
        json.dumps(records),
        jsonl.read_text(),
        jsonl,
        str(listing),
        batch,
        choices,
    ):
        read = read_option_logprobs(source, ["A", "B"])
        assert_array_equal(read.logprobs, expected.logprobs)


def test_records_are_not_modified_and_proba_renormalises():
    records = [RECORD, one([("A", 0.4), ("B", 0.2)])]
    before = copy.deepcopy(records)
    read = read_option_logprobs(records, ["A", "B"], position="first_match")
    assert records == before
    assert_allclose(read.proba(), [[0.2 / 0.9, 0.7 / 0.9], [2 / 3, 1 / 3]])
    pd = pytest.importorskip("pandas")
    frame = read.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [
        "logprob_A",
        "logprob_B",
        "absent_A",
        "absent_B",
        "rest_logmass",
        "position",
    ]


def test_the_logprobs_are_logits_for_a_calibrator():
    from skcal.calibrators import TemperatureScaling

    rng = np.random.default_rng(0)
    rows, y = [], []
    for _ in range(60):
        p = rng.dirichlet([1, 1, 1]) * 0.9
        rows.append(one(sorted(zip("ABC", p), key=lambda e: -e[1])))
        y.append(int(rng.choice(3, p=p / p.sum())))
    read = read_option_logprobs(rows, ["A", "B", "C"])
    proba = TemperatureScaling(input="logits").fit(read.logprobs, y)
    assert_allclose(proba.predict_proba(read.logprobs).sum(axis=1), 1.0)


# ------------------------------------------------------------------ errors
def test_a_record_without_logprobs_is_named():
    bad = {"choices": [{"index": 0, "logprobs": None}]}
    with pytest.raises(ValueError, match=r"Record 1 .*choices\[0\]\.logprobs is null"):
        read_option_logprobs([RECORD, bad], ["A", "B"])
    with pytest.raises(ValueError, match=r"Record 0 .*choices\[\]\.logprobs"):
        read_option_logprobs([{"id": "x"}], ["A", "B"])


def test_an_empty_top_k_is_refused():
    with pytest.raises(ValueError, match="Record 1, position 0: top_logprobs is empty"):
        read_option_logprobs([RECORD, chat(("A", 0.5, []))], ["A", "B"])


def test_an_option_never_seen_is_named_with_the_closest_tokens():
    with pytest.raises(ValueError, match=r"'Anser' \(closest tokens seen: \['answer'"):
        read_option_logprobs([RECORD], ["Answer", "Anser"], position=1)


@pytest.mark.parametrize("value", [float("nan"), float("-inf"), 0.5])
def test_a_bad_logprob_is_refused(value):
    record = one([("A", 0.5), ("B", 0.2)])
    record["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["logprob"] = value
    with pytest.raises(ValueError, match=r"Record 1: .*finite value <= 0"):
        read_option_logprobs([RECORD, record], ["A", "B"])


def test_a_row_of_sentinels_and_a_position_past_the_end():
    with pytest.raises(ValueError, match="every top_logprobs entry .* sentinel"):
        read_option_logprobs([RECORD, one([("A", -9999.0)], "A")], ["A", "B"])
    with pytest.raises(ValueError, match="Record 0 has 3 generated tokens"):
        read_option_logprobs([RECORD], ["A", "B"], position=3)


# -------------------------------------------------------- read_top_logprobs
def test_read_top_logprobs_with_a_vocabulary():
    records = [
        one([("Yes", 0.6), ("No", 0.3), ("Maybe", -9999.0)]),
        one([("No", 0.5), ("Yes", 0.25), ("no", 0.125)]),
    ]
    top = read_top_logprobs(records, vocabulary=["No", "Yes", "no", "Maybe"])
    assert_array_equal(top.indices, [[1, 0, -1], [0, 1, 2]])
    assert_allclose(np.exp(top.values), [[0.6, 0.3, 0], [0.5, 0.25, 0.125]])
    assert_allclose(np.exp(top.rest_logmass), [0.1, 0.125])
    assert top.n_classes == 4
    # the rest model: row 0 leaves 0.1 to "no" and "Maybe"
    assert_allclose(np.exp(top.label_logproba([3, 3])), [0.05, 0.125])


def test_read_top_logprobs_without_a_vocabulary_and_merged_tokens():
    records = [one([("Yes", 0.5), ("No", 0.25), ("Yes", 0.125)])]
    top = read_top_logprobs(records, n_classes=1000)
    assert top.tokens == ("Yes", "No")
    assert_allclose(np.exp(top.values), [[0.625, 0.25]])
    assert_allclose(np.exp(top.label_logproba([7])), [0.125 / 998])
    with pytest.raises(ValueError, match="'Yes', which is not in vocabulary"):
        read_top_logprobs(records, vocabulary={"No": 0})


def test_probabilities_above_one_are_refused():
    with pytest.raises(ValueError, match=r"Record 0: .* sum to 1\.1 > 1"):
        read_option_logprobs([one([("A", 0.6), ("B", 0.5)])], ["A", "B"])


def test_a_sampled_token_outside_the_top_k_counts_as_listed():
    # "C" was sampled at probability 0.01, below the listed A and B
    records = [chat(("C", 0.01, [("A", 0.6), ("B", 0.3)])), one([("D", 1.0)])]
    read = read_option_logprobs(records, ["A", "B", "C", "D"], absent="floor")
    assert_allclose(read.logprobs[0], [log(0.6), log(0.3), log(0.01), log(0.01)])
    assert_array_equal(read.absent[0], [False, False, False, True])
    assert_allclose(read.rest_logmass[0], log(0.09))


def test_unreadable_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a file"):
        read_option_logprobs(str(tmp_path / "missing.jsonl"), ["A", "B"])
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(RECORD) + "\n{not json\n")
    with pytest.raises(ValueError, match="Line 2 of .*broken.jsonl is not valid JSON"):
        read_option_logprobs(broken, ["A", "B"])
    with pytest.raises(ValueError, match="records holds no record"):
        read_option_logprobs([], ["A", "B"])
    with pytest.raises(TypeError, match="Record 0 is a list"):
        read_option_logprobs([[RECORD]], ["A", "B"])


def test_chunks_give_the_same_rows_and_name_the_right_record(monkeypatch):
    from skcal.llm import _readers

    records = ROWS * 3 + [RECORD]
    whole = read_option_logprobs(records, ["A", "B", "C", "D"])
    monkeypatch.setattr(_readers._Scan, "_CHUNK", 2)
    chunked = read_option_logprobs(records, ["A", "B", "C", "D"])
    assert_array_equal(chunked.logprobs, whole.logprobs)
    assert_array_equal(chunked.rest_logmass, whole.rest_logmass)
    bad = one([("A", 0.5), ("B", 0.2)])
    bad["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = 1.0
    with pytest.raises(ValueError, match="Record 5: "):
        read_option_logprobs(ROWS + ROWS[:2] + [bad], ["A", "B", "C", "D"])
