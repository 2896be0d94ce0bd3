"""Parameter counts, transformer shapes and GEMM FLOP counts (exact)."""

import pytest

from pybench.errors import UsageError
from pybench.planning.transformer import (
    SHAPES,
    Gemm,
    TransformerShape,
    derive_shape,
    format_param_count,
    parse_param_count,
    shape_for_params,
    shape_from_dims,
    step_gemms,
    training_flops,
)


@pytest.mark.parametrize("text, expected", [
    ("7B", 7_000_000_000), ("1.3B", 1_300_000_000), ("350M", 350_000_000), ("125m", 125_000_000),
    ("70B", 70_000_000_000), ("7e9", 7_000_000_000), ("125000000", 125_000_000), ("1.5T", 1_500_000_000_000),
    ("2G", 2_000_000_000), (" 13B ", 13_000_000_000), (1000, 1000),
])
def test_parse_param_count(text, expected):
    assert parse_param_count(text) == expected


@pytest.mark.parametrize("bad", ["", "B7", "7 X", "-7B", "0", "abc", "1e20"])
def test_parse_param_count_rejects(bad):
    with pytest.raises(UsageError):
        parse_param_count(bad)


def test_format_param_count():
    assert format_param_count(7_000_000_000) == "7B"
    assert format_param_count(1_300_000_000) == "1.3B"
    assert format_param_count(125_000_000) == "125M"


@pytest.mark.parametrize("name", ["125M", "350M", "1.3B", "7B", "13B", "70B"])
def test_table_shapes_match_their_names(name):
    shape = shape_for_params(parse_param_count(name))
    assert shape.name == name
    # The table's shapes have about the parameter count they are named for.
    assert abs(shape.param_count / parse_param_count(name) - 1) < 0.1


def test_llama_7b_shape():
    s = shape_for_params(7 * 10**9)
    assert (s.hidden, s.layers, s.heads, s.ffn, s.vocab, s.gated_mlp) == (4096, 32, 32, 11008, 32000, True)
    assert s.kv_heads == 32
    assert shape_for_params(70 * 10**9).kv_heads == 8


def test_derived_shape_for_count_not_in_table():
    s = shape_for_params(20 * 10**9)
    assert s.name == "derived"
    assert s.hidden % 64 == 0
    assert abs(s.param_count / 20e9 - 1) < 0.1  # the embedding counts, as in the table
    assert 64 <= s.hidden / s.layers <= 256  # aspect ratio near 128
    small = derive_shape(20 * 10**6)
    assert small.layers >= 1 and small.hidden >= 128
    assert abs(small.param_count / 20e6 - 1) < 0.1


def test_shape_from_dims_and_bad_dims():
    s = shape_from_dims(256, 4)
    assert (s.hidden, s.layers, s.heads, s.ffn) == (256, 4, 2, 1024)
    assert s.param_count == 4 * 12 * 256**2 + 50257 * 256
    with pytest.raises(UsageError):
        shape_from_dims(0, 4)
    with pytest.raises(UsageError):
        TransformerShape("x", 100, 2, 3, 400, 10)  # hidden not a multiple of heads


def test_layer_params_plain_and_gated():
    plain = TransformerShape("p", 8, 1, 2, 32, 10)
    assert plain.layer_params == 8 * 24 + 64 + 2 * 8 * 32  # qkv + out + mlp = 12 h^2 with ffn 4h
    gated = TransformerShape("g", 8, 1, 2, 32, 10, gated_mlp=True)
    assert gated.layer_params == 8 * 24 + 64 + 3 * 8 * 32


def test_step_gemms_shapes_and_flops():
    shape = TransformerShape("t", 8, 2, 2, 32, 10)
    gemms = step_gemms(shape, tokens=5)
    assert [g.name for g in gemms] == [f"{op}.{ph}" for op in ("qkv", "attn_out", "mlp_up", "mlp_down")
                                       for ph in ("forward", "dgrad", "wgrad")]
    qkv_f, qkv_d, qkv_w = gemms[:3]
    assert (qkv_f.m, qkv_f.k, qkv_f.n) == (5, 8, 24)
    assert (qkv_d.m, qkv_d.k, qkv_d.n) == (5, 24, 8)
    assert (qkv_w.m, qkv_w.k, qkv_w.n) == (8, 5, 24)
    assert all(g.flops == 2 * 5 * 8 * 24 for g in gemms[:3])
    down = gemms[9]
    assert (down.m, down.k, down.n) == (5, 32, 8)
    # fwd + bwd GEMM FLOPs of a layer are 6 x (layer weights) x tokens: the 6PT rule.
    assert sum(g.flops for g in gemms) == 6 * shape.layer_params * 5


def test_step_gemms_gqa_gated_and_tp():
    shape = TransformerShape("g", 16, 1, 4, 40, 10, kv_heads=2, gated_mlp=True)
    g = step_gemms(shape, tokens=3)
    assert (g[0].k, g[0].n) == (16, 16 + 2 * 2 * 4)
    assert g[6].n == 80  # gate and up fused
    t = step_gemms(shape, tokens=3, tp=2)
    assert t[0].n == 16 and t[3].k == 8 and t[6].n == 40 and t[9].k == 20
    with pytest.raises(UsageError):
        step_gemms(shape, tokens=0)


def test_gemm_flops_and_training_flops():
    assert Gemm("x", "forward", 2, 3, 4).flops == 48
    assert training_flops(1000, 8) == 48000
    assert training_flops(1000, 8, recompute=True) == 64000


def test_shape_dict_round_trip():
    for shape in SHAPES.values():
        assert TransformerShape.from_dict(shape.to_dict()) == shape
    assert "hidden=4096" in str(SHAPES[7 * 10**9])
