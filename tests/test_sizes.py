import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybench.errors import SizeError
from pybench.sizes import MAX_SIZE_BYTES, format_size, parse_size, parse_sizes

K, M, G = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize("text,expected", [
    ("8", 8), ("1K", K), ("64k", 64 * K), ("1M", M), ("1G", G), ("3G", 3 * G), (" 2M ", 2 * M), ("1MiB", M),
    ("1KB", K),
])
def test_parse_size_binary_suffixes(text, expected):
    assert parse_size(text) == expected


def test_range_is_every_power_of_two_inclusive():
    sizes = parse_sizes("1M:1G")
    assert sizes[0] == M and sizes[-1] == G
    assert len(sizes) == 11
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))


def test_range_with_factor_and_list():
    assert parse_sizes("1K:1M:4") == [K, 4 * K, 16 * K, 64 * K, 256 * K, M]
    assert parse_sizes("1K:5K:4") == [K, 4 * K]  # stops before passing HI
    assert parse_sizes("8,1K,1M") == [8, K, M]
    assert parse_sizes("1M,8,8") == [8, M]  # sorted, de-duplicated
    assert parse_sizes("64K") == [64 * K]


def test_range_with_a_linear_step_as_nccl_tests_dash_i():
    assert parse_sizes("1M:4M:+1M") == [M, 2 * M, 3 * M, 4 * M]
    assert parse_sizes("1K:3500:+1K") == [K, 2 * K, 3 * K]  # stops before passing HI
    assert len(parse_sizes("1M:1G:+1M")) == 1024  # the vTrain tables' sizes
    assert parse_sizes("8:8:+1") == [8]


@pytest.mark.parametrize("spec,fragment", [
    ("1:1G:+1", "more than 65536"), ("1M:1G:+0", "at least 1 byte"), ("1M:1G:+", "not a size"),
    ("1M:1G:+-1M", "negative"), ("1G:1M:+1M", "goes down"),
    ("1G:1M", "goes down"), ("abc", "not a size"), ("0", "at least 1 byte"), ("-1M", "negative"),
    ("1X", "not a size"), ("", "empty"), ("8,,1K", "empty item"), ("1K:1M:1", "factor"), ("1K:1M:x", "factor"),
    ("1:2:3:4", "LO:HI"), ("1e6", "not a size"), ("0.3K", "not a whole number of bytes"), ("99999999999G", "too large"),
])
def test_bad_specs_say_what_is_wrong(spec, fragment):
    with pytest.raises(SizeError) as info:
        parse_sizes(spec)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_format_size_round_trips():
    for n in (1, 8, 1000, K, 3 * K, M, 5 * G):
        assert parse_size(format_size(n)) == n
    assert format_size(1536) == "1536"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_random_text_never_crashes(text):
    try:
        sizes = parse_sizes(text)
    except SizeError as exc:
        assert "\n" not in str(exc)
    else:
        assert sizes == sorted(set(sizes)) and all(0 < s <= MAX_SIZE_BYTES for s in sizes)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=MAX_SIZE_BYTES))
def test_every_valid_size_parses_back(n):
    assert parse_size(str(n)) == n
    assert parse_size(format_size(n)) == n


def test_a_list_of_a_million_sizes_is_refused_before_it_is_split():
    import tracemalloc

    from pybench.sizes import MAX_SIZE_COUNT
    spec = "8," * 1_000_000 + "8"
    tracemalloc.start()
    try:
        with pytest.raises(SizeError, match=f"1000001 items, more than {MAX_SIZE_COUNT}"):
            parse_sizes(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # splitting it would make a million strings (tens of MB)


def test_a_fraction_before_a_suffix_is_read_as_nccl_tests_reads_it():
    """nccl-tests reads `-b 0.5M` as 524288 bytes (sscanf of a double, times the unit); pybench had refused it."""
    assert parse_size("0.5M") == 1 << 19 and parse_size("1.5K") == 1536 and parse_size("2.0") == 2
    assert parse_sizes("0.5M:2M") == [1 << 19, 1 << 20, 1 << 21]
    assert parse_size("1.0000000000000000000K") == 1024  # (the fraction's digits are not the size's)
    assert parse_size(".5M") == parse_size("0.5M") and parse_size("5.M") == 5 << 20  # (as C's strtod reads them)
    assert parse_size("0" * 30 + "1K") == 1024  # (leading zeros are not the size's length)
